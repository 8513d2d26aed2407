"""Excerpts: a long message shortened to its own sentences that match the
query, quoted as written, in place of a summary made without the query."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ctxfold._core import Bm25, Tokenizer
from ctxfold.engine.cache import EngineCache
from ctxfold.summarize.extractive import is_fence_line, split_sentences

__all__ = ["EXCERPT_GAP", "EXCERPT_MARKER", "excerpt", "query_weights", "quotable_spans"]

# Opens an excerpt, as the summary marker opens a summary: the reader (and
# whoever restores the message) sees that the rest of the message is left out.
EXCERPT_MARKER = "[excerpt] "
# Stands where sentences of the source are left out between two quoted ones.
EXCERPT_GAP = " … "


def query_weights(texts: Sequence[str], query: str, cache: EngineCache) -> dict[str, float]:
    """Each distinct term of `query` that the conversation `texts` uses, with
    its idf over them (Lucene's, as BM25 scores): a sentence that holds a rare
    term of the question is worth more than one that holds a common one."""
    terms = cache.terms_of(texts, Bm25.tokenize)
    n = len(terms)
    weights: dict[str, float] = {}
    for term in set(Bm25.tokenize(query)):
        df = sum(1 for counts, _ in terms if term in counts)
        if df:
            weights[term] = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    return weights


def excerpt(body: str, weights: dict[str, float], target: int, tokenizer: Tokenizer) -> str | None:
    """The sentences of `body` that hold terms of the query (`weights`, from
    `query_weights`), the best first while they fit `target` tokens, then the
    others in source order while they fit; quoted in source order, adjacent
    sentences with their own separator and `EXCERPT_GAP` where sentences are
    left out. A fenced code block counts as one sentence (`quotable_spans`).
    None when no sentence matches, or none fits: the caller then
    summarises."""
    if not weights or target <= 0:
        return None
    spans = quotable_spans(body)
    texts = [body[a:b] for a, b in spans]
    # An exact sum (fsum): a set's order follows the process's string hashing,
    # and a plain float sum's last bits follow the order, which would tip
    # ties between sentences from one run to the next.
    value = [math.fsum(weights.get(t, 0.0) for t in set(Bm25.tokenize(text))) for text in texts]
    matched = sorted((k for k, v in enumerate(value) if v > 0), key=lambda k: (-value[k], k))
    if not matched:
        return None
    rest = [k for k, v in enumerate(value) if v <= 0]
    sizes = [int(n) for n in tokenizer.count(texts)]
    chosen: list[int] = []
    text, used = "", 0
    for k in [*matched, *rest]:
        # A sentence longer than the room left cannot fit (a token of slack
        # for a merge at the seam); the others are counted in place.
        if used + sizes[k] > target + 1:
            continue
        trial = _quote(body, spans, sorted([*chosen, k]))
        found = tokenizer.count_until(trial, target)
        if found is not None:
            chosen.append(k)
            text, used = trial, int(found)
    return text if any(value[k] > 0 for k in chosen) else None


def quotable_spans(body: str) -> list[tuple[int, int]]:
    """The spans an excerpt quotes whole or leaves out: the sentences of
    `body`, each fenced code block (from its opening fence line to its
    closing one, or to the end of `body`) as one: a fence quoted without its
    other half would turn the rest of the context into code."""
    spans: list[tuple[int, int]] = []
    in_block = False
    for sentence in split_sentences(body):
        fence = is_fence_line(sentence.text)
        if in_block:
            spans[-1] = (spans[-1][0], sentence.end)
            in_block = not fence
        else:
            # A block is quoted with its opening fence's indentation (a fence in a list item).
            start = body.rfind("\n", 0, sentence.start) + 1 if fence and sentence.line_start else sentence.start
            spans.append((start, sentence.end))
            in_block = fence
    return spans


def _quote(body: str, spans: Sequence[tuple[int, int]], chosen: list[int]) -> str:
    """The chosen spans (indices in source order) as one text: a run of
    adjacent spans as the source has it, runs joined by `EXCERPT_GAP`."""
    runs: list[str] = []
    start = previous = -2
    for k in chosen:
        if k != previous + 1:
            if start >= 0:
                runs.append(body[spans[start][0]:spans[previous][1]])
            start = k
        previous = k
    if start >= 0:
        runs.append(body[spans[start][0]:spans[previous][1]])
    return EXCERPT_GAP.join(runs)
