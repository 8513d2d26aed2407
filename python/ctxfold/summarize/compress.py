"""Semantic compression: summarise a long text topic by topic.

    sentences -> blocks (speaker turns or paragraphs; long ones cut into
    sentence groups, every block <= ``block_tokens``) -> block vectors ->
    similarity graph -> topic chunks (the core's `segment`, contiguous; or
    `spectral_clustering`) -> each chunk summarised to its share of the target,
    in a thread pool -> summaries reassembled in source order.

Every chunk of the result keeps its source span(s), so a summary can be traced
back and the original restored (`CompressionResult.restore`, `.expand`).

Multi-level: level 1 (``topic``) summarises each chunk to its share of
``ratio * tokens``. When the result must also fit ``budget`` and does not,
level 2 (``extractive``) re-summarises each chunk's summary by the ratio again
(never below the limit), and level 3 (``key_points``) takes each chunk down to
its pruned key sentences within exactly its share of the limit. At most three
levels; the last always fits.
"""

from __future__ import annotations

import concurrent.futures
import math
import numbers
import os
import sys
import types
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ctxfold._core import Tokenizer, cosine_similarity, segment, spectral_clustering
from ctxfold._renamed import renamed_arguments
from ctxfold.errors import BudgetError, InvalidInputError, InvalidTypeError
from ctxfold.summarize.extractive import ExtractiveSummarizer, Sentence, SentenceEmbedder, split_sentences
from ctxfold.progress import ProgressBar
from ctxfold.summarize.protocol import Summarizer
from ctxfold.tokens import get_tokenizer

__all__ = ["compress", "CompressionResult", "CompressedChunk", "LEVELS"]

#: The compression levels, in the order they are tried.
LEVELS = ("topic", "extractive", "key_points")
CHUNK_SEPARATOR = "\n\n"
DEFAULT_TOPIC_TOKENS = 1500
SEGMENTATIONS = ("segment", "spectral")


@dataclass(frozen=True)
class CompressedChunk:
    """One topic chunk: where it comes from and what replaced it.

    ``spans``: the source character ranges (one for contiguous segmentation,
    possibly several for a spectral cluster); ``start``/``end`` cover them all.
    ``level``: 0 kept verbatim (it fit its share), 1-3 the deepest level that
    rewrote it; ``method``: ``"verbatim"``, ``"dropped"`` (no share of the
    target was left for it) or the summarizer that wrote the summary.
    ``sentence_spans``: the source sentences an extractive summary was drawn
    from (empty for other summarizers)."""

    index: int
    start: int
    end: int
    spans: tuple[tuple[int, int], ...]
    source_tokens: int
    summary: str
    tokens: int
    level: int
    method: str
    sentence_spans: tuple[tuple[int, int], ...] = ()


@dataclass
class CompressionResult:
    """The compressed ``text`` and how it was made.

    ``chunks`` in source order; ``text`` is their non-empty summaries joined
    by a blank line. ``source_tokens``/``tokens`` are exact counts with the
    tokenizer used; ``ratio`` is ``tokens / source_tokens`` (compare with
    ``target_ratio``) and ``compression_ratio`` its inverse. ``compression_type``
    names the levels applied (``"none"`` when the text already fit,
    ``"topic"``, ``"topic+extractive"``, ``"topic+extractive+key_points"``).
    """

    text: str
    source: str
    chunks: list[CompressedChunk]
    source_tokens: int
    tokens: int
    budget: int
    """The tokens the text had to fit: ``target_ratio`` of the source, or the
    caller's ``budget`` when that is less."""
    target_ratio: float
    compression_type: str
    levels: int
    segmentation: str
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def target_tokens(self) -> int:
        """Deprecated: `budget`."""
        warnings.warn(
            "CompressionResult.target_tokens is now CompressionResult.budget; target_tokens will be removed in the next release",
            DeprecationWarning, stacklevel=2,
        )
        return self.budget

    @property
    def ratio(self) -> float:
        """Output tokens per source token (the kept share)."""
        return self.tokens / self.source_tokens if self.source_tokens else 1.0

    @property
    def compression_ratio(self) -> float:
        """Source tokens per output token (6.0 = six times shorter)."""
        return self.source_tokens / self.tokens if self.tokens else float("inf")

    def restore(self, index: int | None = None) -> str:
        """The source of chunk ``index`` (its spans joined by a newline), or
        the whole source text when ``index`` is None."""
        if index is None:
            return self.source
        chunk = self._chunk(index)
        return "\n".join(self.source[s:e] for s, e in chunk.spans)

    def expand(self, indices: int | Sequence[int]) -> str:
        """The compressed text with the given chunks restored to their source."""
        wanted = {indices} if isinstance(indices, int) else set(indices)
        for i in wanted:
            self._chunk(i)
        parts = [self.restore(c.index) if c.index in wanted else c.summary for c in self.chunks]
        return CHUNK_SEPARATOR.join(p for p in parts if p)

    def chunk_at(self, offset: int) -> CompressedChunk:
        """The chunk whose summary holds character ``offset`` of ``text``."""
        if not isinstance(offset, int) or not 0 <= offset < len(self.text):
            raise InvalidInputError(f"offset: must be an int in 0..{len(self.text) - 1}, got {offset!r}")
        position = 0
        for chunk in self.chunks:
            if not chunk.summary:
                continue
            if offset < position + len(chunk.summary):
                return chunk
            position += len(chunk.summary) + len(CHUNK_SEPARATOR)
            if offset < position:
                return chunk  # on the separator after it
        return self.chunks[-1]

    def to_dict(self) -> dict[str, Any]:
        """Everything but the source text, as plain builtins (JSON-ready)."""
        data = {k: v for k, v in asdict(self).items() if k != "source"}
        data["ratio"] = round(self.ratio, 6)
        data["compression_ratio"] = round(self.compression_ratio, 4) if self.tokens else None
        return data

    def _chunk(self, index: int) -> CompressedChunk:
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self.chunks):
            raise InvalidInputError(f"index: must be a chunk index in 0..{len(self.chunks) - 1}, got {index!r}")
        return self.chunks[index]


@dataclass
class _Block:
    start: int
    end: int
    tokens: int
    sentences: list[int]


@dataclass
class _Chunk:
    spans: list[tuple[int, int]]
    source: str
    tokens: int
    sentences: list[Sentence] = field(default_factory=list)
    summary: str = ""
    summary_tokens: int = 0
    level: int = 0
    method: str = "verbatim"
    sentence_spans: list[tuple[int, int]] = field(default_factory=list)


@renamed_arguments(max_tokens="budget")
def compress(
    text: str,
    target_ratio: float = 0.15,
    *,
    budget: int | None = None,
    summarizer: Summarizer | None = None,
    query: str | None = None,
    segmentation: str = "segment",
    topic_tokens: int = DEFAULT_TOPIC_TOKENS,
    block_tokens: int = 512,
    embedder: SentenceEmbedder | None = None,
    tokenizer: Tokenizer | None = None,
    workers: int | None = None,
    progress: bool = True,
) -> CompressionResult:
    """Compress ``text`` to about ``target_ratio`` of its tokens (and, if
    given, to at most ``budget`` tokens), topic by topic.

    - ``summarizer``: what summarises each chunk (default: an
      `ExtractiveSummarizer` sharing ``embedder`` and ``tokenizer``);
    - ``segmentation``: ``"segment"`` (contiguous topics, exact dynamic
      programme) or ``"spectral"`` (spectral clusters of blocks, which may be
      non-contiguous; each summary goes where its cluster starts);
    - ``topic_tokens``: the aimed size of a topic chunk; ``block_tokens``: the
      largest block the similarity graph is built on;
    - ``embedder``: block (and sentence) vectors (default: the static table,
      or TF-IDF when it is not installed); ``tokenizer``: the exact counter
      (default ``o200k_base``);
    - ``workers``: threads summarising chunks (default: one per core, at most 4);
    - ``progress``: a progress bar on stderr when on a terminal and there are
      more than a few chunks (``False``: never).

    Returns a `CompressionResult`. Raises ``InvalidTypeError``/``InvalidInputError``
    naming the argument for bad input (empty text, a ratio outside (0, 1],
    non-positive limits).
    """
    import time

    started = time.perf_counter()
    _check_arguments(text, target_ratio, budget, query, segmentation, topic_tokens, block_tokens, workers)
    tok = tokenizer if tokenizer is not None else get_tokenizer()
    if not isinstance(tok, Tokenizer):
        raise InvalidTypeError(f"tokenizer: expected a ctxfold.Tokenizer, got {type(tok).__name__}")
    if summarizer is not None and not callable(getattr(summarizer, "summarize", None)):
        raise InvalidTypeError(
            f"summarizer: expected an object with summarize(texts, budget, query), got {type(summarizer).__name__}"
        )
    extractive = ExtractiveSummarizer(embedder=embedder, tokenizer=tok)
    chosen = summarizer if summarizer is not None else extractive
    source_tokens = int(tok.count(text))
    target = max(1, math.floor(source_tokens * target_ratio))
    limit = min(target, budget) if budget is not None else target
    sentences = split_sentences(text)
    result_args = dict(source=text, source_tokens=source_tokens, target_ratio=float(target_ratio), segmentation=segmentation)
    if source_tokens <= limit:
        chunk = CompressedChunk(0, 0, len(text), ((0, len(text)),), source_tokens, text, source_tokens, 0, "verbatim")
        return CompressionResult(
            text, chunks=[chunk], tokens=source_tokens, budget=limit, compression_type="none", levels=0,
            seconds=time.perf_counter() - started, **result_args,  # type: ignore[arg-type]
        )
    blocks = _blocks(text, sentences, tok, block_tokens)
    groups = _topics(text, blocks, extractive.embedder, segmentation, topic_tokens)
    chunks = []
    for group in groups:
        spans = _merge_spans([(blocks[b].start, blocks[b].end) for b in group])
        source = "\n".join(text[s:e] for s, e in spans)
        members = [sentences[i] for b in group for i in blocks[b].sentences]
        chunks.append(_Chunk(spans, source, sum(blocks[b].tokens for b in group), members))
    chunks.sort(key=lambda c: c.spans[0][0])
    for c in chunks:
        c.summary, c.summary_tokens = c.source, c.tokens
    sep = int(tok.count(CHUNK_SEPARATOR))
    n_workers = workers if workers is not None else max(1, min(4, os.cpu_count() or 1))
    levels_done: list[str] = []
    total = _total(chunks, sep)
    for level, name in enumerate(LEVELS, start=1):
        if level > 1 and total <= limit:
            break
        if level == 1:
            goal = target
        elif level < len(LEVELS):
            goal = max(limit, math.floor(total * target_ratio))
        else:
            goal = limit
        goal = min(goal, limit) if level == len(LEVELS) else goal
        engine: Any = chosen if level == 1 else (extractive if level == 2 else _key_points(extractive))
        _summarize_level(chunks, goal, sep, engine, level, query, n_workers, progress, tok, name)
        levels_done.append(name)
        total = _total(chunks, sep)
    if total > limit:  # rounding at the last level: take it out of the longest summaries
        _squeeze(chunks, limit, sep, _key_points(extractive), query, tok)
        total = _total(chunks, sep)
    if total > limit:
        raise BudgetError(
            f"budget: could not compress to {limit} tokens (got {total}); raise budget or target_ratio"
        )
    out = CHUNK_SEPARATOR.join(c.summary for c in chunks if c.summary)
    tokens = int(tok.count(out)) if out else 0
    result_chunks = [
        CompressedChunk(
            i, c.spans[0][0], c.spans[-1][1], tuple(c.spans), c.tokens, c.summary, c.summary_tokens,
            c.level, c.method, tuple(c.sentence_spans),
        )
        for i, c in enumerate(chunks)
    ]
    return CompressionResult(
        out, chunks=result_chunks, tokens=tokens, budget=limit, compression_type="+".join(levels_done),
        levels=len(levels_done), seconds=time.perf_counter() - started, **result_args,  # type: ignore[arg-type]
    )


def _key_points(extractive: ExtractiveSummarizer) -> ExtractiveSummarizer:
    """The level-3 summarizer: pruned sentences only, names and numbers first."""
    return ExtractiveSummarizer(
        embedder=extractive.embedder, tokenizer=extractive.tokenizer, forms="pruned",
        entity_weight=2.0 * extractive.entity_weight,
    )


def _total(chunks: list[_Chunk], sep: int) -> int:
    kept = [c for c in chunks if c.summary]
    return sum(c.summary_tokens for c in kept) + sep * max(0, len(kept) - 1)


def _shares(sizes: list[int], budget: int) -> list[int]:
    """``budget`` split in proportion to ``sizes`` (largest remainder), never
    more than a size."""
    total = sum(sizes)
    if total <= 0 or budget <= 0:
        return [0] * len(sizes)
    raw = [budget * s / total for s in sizes]
    shares = [min(s, math.floor(r)) for s, r in zip(sizes, raw)]
    left = budget - sum(shares)
    for i in sorted(range(len(sizes)), key=lambda k: raw[k] - math.floor(raw[k]), reverse=True):
        if left <= 0:
            break
        if shares[i] < sizes[i]:
            shares[i] += 1
            left -= 1
    return shares


def _allocate(chunks: list[_Chunk], goal: int, sep: int) -> list[int]:
    """Each chunk's share of ``goal`` after the separators between the chunks
    that get a share (a chunk whose share rounds to 0 is dropped)."""
    live = [i for i, c in enumerate(chunks) if c.summary]
    while True:
        budget = goal - sep * max(0, len(live) - 1)
        shares = _shares([chunks[i].summary_tokens for i in live], budget)
        zero = [i for i, s in zip(live, shares) if s == 0]
        if not zero or len(live) <= 1:
            out = [0] * len(chunks)
            for i, s in zip(live, shares):
                out[i] = s
            return out
        # drop the smallest chunk that got nothing, then share again
        live.remove(min(zero, key=lambda i: chunks[i].summary_tokens))


def _summarize_level(
    chunks: list[_Chunk],
    goal: int,
    sep: int,
    engine: Any,
    level: int,
    query: str | None,
    workers: int,
    progress: bool,
    tok: Tokenizer,
    name: str,
) -> None:
    shares = _allocate(chunks, goal, sep)
    todo = []
    for i, (c, share) in enumerate(zip(chunks, shares)):
        if not c.summary:
            continue
        if share <= 0:
            c.summary, c.summary_tokens, c.method, c.level, c.sentence_spans = "", 0, "dropped", level, []
        elif c.summary_tokens > share:
            todo.append((i, share))
    if not todo:
        return

    def run(job: tuple[int, int]) -> tuple[int, str, list[tuple[int, int]]]:
        i, share = job
        c = chunks[i]
        if isinstance(engine, ExtractiveSummarizer):
            if level == 1 and c.sentences:  # the topic's own sentences, split once for the whole text
                ex = engine.select(c.sentences, share, query)
                return i, ex.text, ex.spans
            return i, engine.extract(c.summary, share, query).text, c.sentence_spans
        (summary,) = engine.summarize([c.summary], share, query)
        return i, summary, []

    with ProgressBar(len(todo), f"compress ({name})", enabled=progress) as bar:
        if workers > 1 and len(todo) > 1:
            with concurrent.futures.ThreadPoolExecutor(min(workers, len(todo))) as pool:
                results = []
                for r in pool.map(run, todo):
                    results.append(r)
                    bar.update()
        else:
            results = []
            for job in todo:
                results.append(run(job))
                bar.update()
    method = type(engine).__name__ if level == 1 else ("ExtractiveSummarizer" if level == 2 else "key_points")
    summaries = [s for _, s, _ in results]
    counts = np.asarray(tok.count(summaries)).tolist() if summaries else []
    for (i, summary, spans), n in zip(results, counts):
        c = chunks[i]
        c.summary, c.summary_tokens, c.level, c.method = summary.strip(), int(n), level, method
        c.sentence_spans = list(spans)
        if not c.summary:
            c.method = "dropped"


def _squeeze(chunks: list[_Chunk], limit: int, sep: int, engine: ExtractiveSummarizer, query: str | None,
             tok: Tokenizer) -> None:
    """Take the last few tokens over ``limit`` out of the longest summaries."""
    for _ in range(len(chunks) + 1):
        over = _total(chunks, sep) - limit
        if over <= 0:
            return
        live = [c for c in chunks if c.summary]
        if not live:
            return
        c = max(live, key=lambda c: c.summary_tokens)
        share = c.summary_tokens - over
        if share < 1:
            c.summary, c.summary_tokens, c.method = "", 0, "dropped"
            continue
        c.summary = engine.extract(c.summary, share, query).text
        c.summary_tokens = int(tok.count(c.summary)) if c.summary else 0


def _merge_spans(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted spans with contiguous ones (only whitespace between) merged."""
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1] + 2:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _blocks(text: str, sentences: list[Sentence], tok: Tokenizer, block_tokens: int) -> list[_Block]:
    """Speaker turns, or paragraphs outside turns; a unit over ``block_tokens``
    is cut into sentence groups of about a quarter of it."""
    if not sentences:
        return [_Block(0, len(text), int(tok.count(text)), [])]
    paragraph = _paragraph_ids(text, sentences)
    units: list[list[int]] = []
    key_prev: tuple[int, int] | None = None
    for i, s in enumerate(sentences):
        key = (s.turn, -1) if s.turn >= 0 else (-1, paragraph[i])
        if key != key_prev:
            units.append([])
            key_prev = key
        units[-1].append(i)
    counts = np.asarray(tok.count([s.text for s in sentences])).tolist()
    starts = [_line_start(text, s) for s in sentences]
    blocks: list[_Block] = []
    group_tokens = max(1, block_tokens // 4)
    for unit in units:
        size = sum(counts[i] for i in unit) + len(unit)
        groups = [unit] if size <= block_tokens else _cut(unit, counts, group_tokens, block_tokens)
        for g in groups:
            blocks.append(_Block(starts[g[0]], sentences[g[-1]].end, 0, g))
    # the real block sizes, separators and labels included
    for b, n in zip(blocks, np.asarray(tok.count([text[b.start : b.end] for b in blocks])).tolist()):
        b.tokens = int(n)
    return blocks


def _cut(unit: list[int], counts: list[int], aim: int, cap: int) -> list[list[int]]:
    groups: list[list[int]] = [[]]
    size = 0
    for i in unit:
        if groups[-1] and (size + counts[i] > cap or size >= aim):
            groups.append([])
            size = 0
        groups[-1].append(i)
        size += counts[i] + 1
    return groups


def _line_start(text: str, s: Sentence) -> int:
    """Where a block opening with ``s`` starts: its line (speaker label
    included) when it opens the line."""
    if not s.line_start:
        return s.start
    return text.rfind("\n", 0, s.start) + 1


def _paragraph_ids(text: str, sentences: list[Sentence]) -> list[int]:
    ids = []
    pid = 0
    prev_end = 0
    for s in sentences:
        gap = text[prev_end : s.start]
        if prev_end and gap.count("\n") >= 2:
            pid += 1
        ids.append(pid)
        prev_end = s.end
    return ids


def _topics(
    text: str, blocks: list[_Block], embedder: SentenceEmbedder, segmentation: str, topic_tokens: int
) -> list[list[int]]:
    """Block indices of each topic chunk."""
    n = len(blocks)
    total = sum(b.tokens for b in blocks)
    k = max(1, min(n, round(total / topic_tokens)))
    if k == 1 or n < 3:
        return [list(range(n))]
    vectors = np.asarray(embedder.embed([text[b.start : b.end] for b in blocks]), dtype=np.float32)
    similarity = np.asarray(cosine_similarity(vectors), dtype=np.float64)
    if segmentation == "spectral":
        affinity = np.clip((similarity + similarity.T) / 2, 0.0, None)
        labels = spectral_clustering(affinity, k)
        groups: dict[int, list[int]] = {}
        for i, label in enumerate(labels.tolist()):
            groups.setdefault(int(label), []).append(i)
        return sorted(groups.values(), key=lambda g: g[0])
    tokens = np.array([b.tokens for b in blocks], dtype=np.int64)
    # a floor per topic keeps one short turn ("thanks!") from becoming a chunk of its own
    floor = topic_tokens // 5 if total >= k * (topic_tokens // 5) + int(tokens.max()) else 0
    try:
        bounds = segment(similarity, tokens, target_tokens=topic_tokens, min_tokens=floor).tolist()
    except InvalidInputError:  # the floor cannot be met with that many topics
        bounds = segment(similarity, tokens, target_tokens=topic_tokens).tolist()
    edges = [0, *bounds, n]
    return [list(range(a, b)) for a, b in zip(edges, edges[1:]) if b > a]


def _check_arguments(
    text: object,
    target_ratio: object,
    budget: object,
    query: object,
    segmentation: object,
    topic_tokens: object,
    block_tokens: object,
    workers: object,
) -> None:
    if not isinstance(text, str):
        raise InvalidTypeError(f"text: expected str, got {type(text).__name__}")
    if not text.strip():
        raise InvalidInputError("text: empty text, nothing to compress")
    if isinstance(target_ratio, bool) or not isinstance(target_ratio, numbers.Real):
        raise InvalidTypeError(f"target_ratio: expected a float in (0, 1], got {type(target_ratio).__name__}")
    if not math.isfinite(float(target_ratio)) or not 0 < float(target_ratio) <= 1:
        raise InvalidInputError(
            f"target_ratio: must be in (0, 1] (the share of tokens to keep, e.g. 0.15), got {target_ratio}"
        )
    for name, value, low in (("budget", budget, 1), ("topic_tokens", topic_tokens, 1),
                             ("block_tokens", block_tokens, 1), ("workers", workers, 1)):
        if value is None and name in ("budget", "workers"):
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise InvalidTypeError(f"{name}: expected a positive int, got {type(value).__name__}")
        if int(value) < low:
            raise InvalidInputError(f"{name}: must be a positive number, got {value}")
    if query is not None and not isinstance(query, str):
        raise InvalidTypeError(f"query: expected str or None, got {type(query).__name__}")
    if segmentation not in SEGMENTATIONS:
        raise InvalidInputError(f"segmentation: expected one of {list(SEGMENTATIONS)}, got {segmentation!r}")


class _CallableModule(types.ModuleType):
    """``ctxfold.summarize.compress`` is both this module and the function: importing
    the module (``from ctxfold.summarize.compress import CompressionResult``) binds the
    package attribute to the module, and ``ctxfold.summarize.compress(text)`` must
    still work."""

    # The function itself, not a forwarding method: no extra frame, so its warnings point at the caller.
    __call__ = staticmethod(compress)


sys.modules[__name__].__class__ = _CallableModule
