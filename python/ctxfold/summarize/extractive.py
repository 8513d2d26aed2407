"""Extractive summaries: the default summarizer, fast and faithful.

A text is split into sentences (within lines, within speaker turns such as
``user: ...``). Each sentence has two forms: whole, and with filler pruned
(hedges, discourse markers, markdown emphasis, content-free asides). A summary
is a choice of one form or nothing per sentence, rendered in source order:
every word of it is a word of the source, in the source's order, so names,
numbers and dates survive verbatim.

What is chosen maximises

    F(S) = cos(token-weighted mean of the chosen sentences' vectors, the text's)
         + entity_weight * share of the text's entities covered
         + query_weight  * relevance to the query per target token

under the token target. The first term rewards central sentences and
penalises redundant ones (a second sentence on the same point barely moves
the mean: MMR's diversity, derived instead of tuned). A sentence's vector is
its embedder vector beside its term vector over the text's own vocabulary
(TF-IDF with idf fitted on the text's sentences, ``term_weight`` of the
length), so what the text keeps returning to is what is central; a sentence
with no content word and no entity ("How about you?") is not a candidate.
The second term counts each name, number or date once, however many chosen
sentences repeat it, weighted ``1 + ln(mentions)``: what a conversation is
about is what it names again and again. Names said only once count only in
a text that repeats none, and speakers' names are left to the speaker
labels, which the summary writes anyway. F is
submodular-like, so a cost-benefit greedy builds a first selection; then the
core's exact multiple-choice knapsack (`ctxfold.select_options`) re-chooses
every sentence's form (whole / pruned / dropped) on F linearised around the
selection, which also fills the budget's last tokens, and its plan is kept
when F improves. The rendered summary is counted exactly with the
summarizer's tokenizer and trimmed or topped up to the target.

Rendering: sentences of one source line stay on one line; a speaker label
(``user:``) is written only where the speaker changes, so kept sentences of
consecutive turns of one speaker merge under one label instead of paying for
it again.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ctxfold._core import Bm25, Tokenizer, cosine_similarity, select_options
from ctxfold._renamed import renamed_arguments
from ctxfold.errors import CtxFoldError, InvalidInputError, InvalidTypeError
from ctxfold.text.entities import verbatim_entities
from ctxfold.progress import ProgressBar
from ctxfold.summarize.protocol import BaseSummarizer, check_targets

__all__ = [
    "ExtractiveSummarizer",
    "Extract",
    "Sentence",
    "TermVectorEmbedder",
    "split_sentences",
    "is_fence_line",
    "prune_filler",
    "source_words",
    "is_source_wording",
]

FloatArray = npt.NDArray[np.float32]


@runtime_checkable
class SentenceEmbedder(Protocol):
    """Anything with ``embed(list[str]) -> (n, dim) float array`` of unit rows:
    `ctxfold.StaticEmbedder`, `ctxfold.Embedder`, `TermVectorEmbedder`."""

    def embed(self, texts: Sequence[str]) -> Any: ...


# ---- sentences -------------------------------------------------------------------------

# "user: ...", "assistant: ...": a speaker label opening a line.
_SPEAKER = re.compile(r"(?P<name>[A-Za-z][\w.'-]*(?: [\w.'-]+){0,2}):[ \t]+(?=\S)")
KNOWN_SPEAKERS = frozenset("user assistant system tool human ai bot developer function model".split())
# A sentence end: terminal punctuation, closing quotes/brackets/emphasis, then space.
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]*_]*(?=\s+\S)")
_ABBREVIATIONS = frozenset(
    "e.g i.e etc vs mr mrs ms dr st no nos approx fig inc ltd jr sr prof dept est cf al u.s a.m p.m".split()
)
_LIST_MARKER = re.compile(r"\s*(?:[*\-•+]\s+)?(?:\d{1,3}|[A-Za-z])[.)]?\Z")
# A code fence line ("```", "```python"): chosen alone it opens or closes a
# block the rest of the summary is not in, and the reader takes prose for code.
_FENCE_LINE = re.compile(r"\s*```")


def is_fence_line(sentence: str) -> bool:
    """Whether `sentence` (from `split_sentences`) opens or closes a fenced code block."""
    return _FENCE_LINE.match(sentence) is not None


@dataclass(frozen=True)
class Sentence:
    """One sentence of the source: its span ``text[start:end]``, the line and
    speaker turn it is in (``turn`` -1 outside any turn), and its pruned form
    (``""`` when it is all filler, e.g. "I hope this helps!")."""

    start: int
    end: int
    line: int
    turn: int
    speaker: str | None
    text: str
    pruned: str
    line_start: bool  # the first sentence of its line


def _speakers(lines: list[tuple[int, str]]) -> set[str]:
    """Labels that open lines as speakers: known roles, or any label that opens
    at least two lines when at least two labels do (a dialogue transcript)."""
    counts: Counter[str] = Counter()
    for _, line in lines:
        m = _SPEAKER.match(line)
        if m:
            counts[m.group("name")] += 1
    known = {n for n in counts if n.lower() in KNOWN_SPEAKERS}
    repeated = {n for n, c in counts.items() if c >= 2 and len(n) <= 24}
    return known | (repeated if len(repeated) >= 2 else set())


def split_sentences(text: str) -> list[Sentence]:
    """The sentences of ``text`` with their spans, lines and speaker turns."""
    lines: list[tuple[int, str]] = []
    offset = 0
    for raw in text.splitlines(keepends=True):
        lines.append((offset, raw.rstrip("\r\n")))
        offset += len(raw)
    speakers = _speakers(lines)
    out: list[Sentence] = []
    turn, speaker = -1, None
    for line_no, (base, line) in enumerate(lines):
        begin = len(line) - len(line.lstrip())
        m = _SPEAKER.match(line, begin)
        if m and m.group("name") in speakers:
            turn, speaker = turn + 1, m.group("name")
            begin = m.end()
        if not line[begin:].strip():
            continue
        first = True
        for s, e in _sentence_spans(line, begin):
            piece = line[s:e]
            out.append(Sentence(base + s, base + e, line_no, turn, speaker, piece, prune_filler(piece), first))
            first = False
    return out


def _sentence_spans(line: str, begin: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = begin
    for m in _SENTENCE_END.finditer(line, begin):
        head = line[start : m.start() + 1]
        if _LIST_MARKER.match(head):  # "1. **Basil**": a list marker, not a sentence
            continue
        word = re.search(r"([\w.]+)\.$", line[start : m.start() + 1])
        if word and word.group(1).lower().rstrip(".") in _ABBREVIATIONS:
            continue
        spans.append((start, m.end()))
        start = m.end()
        while start < len(line) and line[start].isspace():
            start += 1
    rest = line[start:].rstrip()
    if rest.strip():
        spans.append((start, start + len(rest)))
    return [(s, e) for s, e in spans if line[s:e].strip()]


# ---- filler ----------------------------------------------------------------------------

# Whole sentences that carry no content of the text they end or open.
_FILLER_SENTENCE = re.compile(
    r"""^\W*(?:i\ hope\ (?:this|that|these)\ (?:helps?|gives|inspires)|hope\ (?:this|that)\ helps|let\ me\ know\ if
    |feel\ free\ to|don't\ hesitate\ to|do\ you\ have\ any\ (?:other|more|further)\ questions|happy\ \w+ing\W*$
    |good\ luck\W*$|enjoy\W*(?:your\ \w+)?\W*$|you're\ (?:very\ )?welcome|(?:what\ )?(?:a\ )?great\ question
    |(?:i'd|i\ would|i'm|i\ am)\ (?:be\ )?(?:happy|glad|delighted)\ to\ help|thanks?(?:\ you)?(?:\ so\ much)?\W*$
    |sure\W*$|of\ course\W*$|absolutely\W*$|certainly\W*$|great\W*$|awesome\W*$|perfect\W*$)""",
    re.IGNORECASE | re.VERBOSE,
)
# Discourse markers and interjections opening a sentence (with their comma).
_OPENERS = (
    r"however|additionally|also|furthermore|moreover|in\ addition|overall|finally|anyway|honestly|basically"
    r"|actually|so|well|oh|ah|now|ultimately|essentially|generally|typically|of\ course|in\ fact|that\ said"
    r"|that\ being\ said|as\ i\ mentioned(?:\ earlier|\ before|\ above)?|as\ mentioned(?:\ earlier|\ before|\ above)?"
    r"|in\ general|in\ summary|to\ summarize|in\ conclusion|besides|similarly|luckily|fortunately|interestingly"
    r"|importantly|notably|specifically|ideally|alternatively|personally|by\ the\ way|plus|yes|sure|okay|ok"
    r"|great|absolutely|definitely|certainly|indeed|hmm|wow|for\ instance|for\ example|remember|again"
)
_OPENER = re.compile(rf"(?:(?:{_OPENERS})\s*,\s*)+", re.IGNORECASE | re.VERBOSE)
# Hedges and intensifiers inside a sentence (lower case only: "Super Bowl" stays),
# and asides in brackets with no name or number in them: "(yes, they're a fruit!)".
_INLINE = re.compile(
    r"\b(?:really|very|just|quite|basically|actually|literally|totally|truly|definitely|certainly|absolutely"
    r"|extremely|incredibly|super|simply|[Ii] think|[Ii] believe|[Ii] guess|you know|[Ii] mean)\b(?:,(?=\s))?\s*"
    r"|\s*\((?![^()]*(?:\d|\b[A-Z][a-z]))[^()\n]{1,80}\)"
)
# A heading or bullet marker opening the sentence; a list number (kept) after it.
_LEAD_MARKUP = re.compile(r"#{1,6}\s+|[*\-•+]\s+(?=\S)")
_LIST_NUMBER = re.compile(r"(?:\d{1,3}|[A-Za-z])[.)]\s+")
_SPACES = re.compile(r"(?P<before>[ \t]+(?=[,.;:!?]))|[ \t]{2,}")


def prune_filler(sentence: str) -> str:
    """``sentence`` with filler deleted (nothing is added or reworded): the
    whole of it when it is a courtesy ("I hope this helps!"), else markdown
    emphasis, opening discourse markers ("Additionally, "), hedges and
    intensifiers ("really", "I think"), and bracketed asides without names or
    numbers."""
    s = sentence.strip()
    if _FILLER_SENTENCE.match(s):
        return ""
    s = s.replace("**", "")
    lead = _LEAD_MARKUP.match(s)
    if lead:
        s = s[lead.end() :]
    number = _LIST_NUMBER.match(s)
    cut = number.end() if number else 0
    opener = _OPENER.match(s, cut)
    if opener:
        s = s[:cut] + s[opener.end() :]
    shorter = _INLINE.sub("", s)
    if len(shorter) != len(s) or opener:
        shorter = _SPACES.sub(lambda m: "" if m.group("before") else " ", shorter)
    return shorter.strip()


_WORD = re.compile(r"\w+|[^\w\s]")


def source_words(text: str) -> list[str]:
    """The words and punctuation marks of ``text``, in order."""
    return _WORD.findall(text)


def is_source_wording(summary: str, source: str) -> bool:
    """Whether every word and mark of ``summary`` is one of ``source``'s, in
    the source's order (a subsequence): nothing added, reworded or reordered."""
    it = iter(source_words(source))
    return all(any(w == s for s in it) for w in source_words(summary))


# ---- entities --------------------------------------------------------------------------

# Entity coverage next to centrality (1.0: the cosine term's scale).
ENTITY_WEIGHT = 1.5
# Centrality's share taken by the text's own term vectors (the rest: the embedder's).
TERM_WEIGHT = 0.85


def entities(text: str) -> list[str]:
    """Names, numbers and dates in ``text``, verbatim, with repeats."""
    return verbatim_entities(text)


# ---- vectors ---------------------------------------------------------------------------


class TermVectorEmbedder:
    """TF-IDF vectors over `Bm25.tokenize` terms (stemmed, stop words out),
    with idf fitted on each call's texts (the sentences of one document): the
    fallback when no static table is installed. Sub-linear tf, unit rows."""

    def embed(self, texts: Sequence[str]) -> FloatArray:
        docs = [Bm25.tokenize(t) for t in texts]
        vocab: dict[str, int] = {}
        rows, cols, vals = [], [], []
        for r, terms in enumerate(docs):
            for term, n in Counter(terms).items():
                rows.append(r)
                cols.append(vocab.setdefault(term, len(vocab)))
                vals.append(1.0 + math.log(n))
        out = np.zeros((len(docs), max(1, len(vocab))), dtype=np.float32)
        if vals:
            out[rows, cols] = vals
            df = np.count_nonzero(out, axis=0)
            out *= (np.log((1 + len(docs)) / (1 + df)) + 1.0).astype(np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        result: FloatArray = out / np.maximum(norms, 1e-12)
        return result


_DEFAULT_EMBEDDER: list[SentenceEmbedder] = []


def default_embedder() -> SentenceEmbedder:
    """The shipped static table when it is installed (fast, semantic), else
    `TermVectorEmbedder`; loaded once per process."""
    if not _DEFAULT_EMBEDDER:
        embedder: SentenceEmbedder
        try:
            from ctxfold.embed.static import StaticEmbedder

            embedder = StaticEmbedder()
            embedder.embed(["probe"])
        except (ImportError, CtxFoldError, AttributeError, OSError):
            embedder = TermVectorEmbedder()
        _DEFAULT_EMBEDDER.append(embedder)
    return _DEFAULT_EMBEDDER[0]


# ---- selection -------------------------------------------------------------------------

FULL, PRUNED = 0, 1
FORMS = ("both", "whole", "pruned")
# Greedy starts: gain per token (fills the budget with dense sentences) and gain
# per sqrt(token) (lets a long central sentence in); the better plan is kept.
GREEDY_EXPONENTS = (1.0, 0.5)


@dataclass
class Extract:
    """What `ExtractiveSummarizer.extract` chose: the summary ``text``
    (``tokens`` long), the source's ``sentences`` and, in source order, the
    ``chosen`` ``(sentence index, form)`` pairs (form 0 whole, 1 pruned) with
    their ``spans`` in the source."""

    text: str
    tokens: int
    sentences: list[Sentence]
    chosen: list[tuple[int, int]]
    objective: float = 0.0
    spans: list[tuple[int, int]] = field(default_factory=list)


class _Objective:
    """F(S) and its per-sentence changes, vectorised over the candidates."""

    def __init__(
        self,
        vectors: FloatArray,
        private: npt.NDArray[np.float64],
        weights: npt.NDArray[np.float64],
        ent_full: npt.NDArray[np.float64],
        ent_pruned: npt.NDArray[np.float64],
        ent_weights: npt.NDArray[np.float64],
        relevance: npt.NDArray[np.float64],
        entity_weight: float,
        query_weight: float,
        target: int,
    ) -> None:
        # a row is ``vectors[i]`` on shared axes plus ``private[i]`` on an axis of its own (`_TermParts`);
        # rows are not renormalised: a part that is zero shortens the row
        norms = np.linalg.norm(vectors, axis=1).astype(np.float64)
        own = private * private
        centroid = (weights[:, None] * vectors).sum(axis=0)
        norm = math.sqrt(float(centroid @ centroid) + float((weights * weights) @ own))
        self.mu = (vectors @ centroid + weights * own) / norm if norm > 0 else np.zeros(len(vectors))
        # the core's GEMM: numpy's BLAS spends longer waking its threads than a matrix this small takes
        self.gram = np.asarray(cosine_similarity(vectors), dtype=np.float64) * np.outer(norms, norms)
        self.self_sim = norms * norms + own
        np.fill_diagonal(self.gram, self.self_sim)
        self.ent = (ent_full, ent_pruned)
        total = float(ent_weights.sum())
        self.ent_weights = ent_weights * (entity_weight / total) if total > 0 else ent_weights * 0.0
        self.rel = relevance * (query_weight / max(1, target))

    def state(self, chosen: dict[int, tuple[int, float]]) -> tuple[float, float, npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """(s.mu, |s|^2, s.e_i for every i, entity cover counts) of a selection
        {sentence: (form, weight)}."""
        n = len(self.mu)
        w = np.zeros(n)
        cover = np.zeros(self.ent[0].shape[1])
        for i, (form, weight) in chosen.items():
            w[i] = weight
            cover += self.ent[form][i]
        se = self.gram @ w
        return float(w @ self.mu), float(w @ se), se, cover

    def value(self, sm: float, ss: float, cover: npt.NDArray[np.float64], rel: float) -> float:
        cos = sm / math.sqrt(ss) if ss > 1e-12 else 0.0
        return cos + float(self.ent_weights @ (cover > 0)) + rel


class ExtractiveSummarizer(BaseSummarizer):
    """Summaries made of the source's own sentences (whole, or with filler
    pruned), in source order, chosen for centrality, diversity, coverage of
    names/numbers/dates and relevance to the query, exactly within the target.

    - ``embedder``: sentence vectors, any object with ``embed(list[str])``
      (`StaticEmbedder`, `Embedder`, `TermVectorEmbedder`); default: the
      shipped static table if installed, else TF-IDF vectors;
    - ``entity_weight``: weight of entity coverage next to semantic
      centrality (1.0 = the cosine term's scale);
    - ``query_weight``: weight of relevance to the query (when one is given);
    - ``term_weight``: share of a sentence's vector (0 to 1) given to its
      term vector over the text's own vocabulary, the rest to ``embedder``'s
      (0: the embedder alone, as the query's relevance always uses);
    - ``forms``: which form of a sentence may be used: ``"both"`` (whole or
      filler-pruned, the default), ``"whole"`` (whole sentences only) or
      ``"pruned"`` (pruned only: terse key points);
    - ``tokenizer``: the exact counter of the target (default ``o200k_base``);
    - ``progress``: a progress bar on stderr when a call summarises more than
      a few texts, is slow, and runs on a terminal (``False``: never).

    ``extract(text, budget, query)`` returns the choice with its source
    spans (`Extract`); ``summarize`` returns the texts.
    """

    def __init__(
        self,
        *,
        embedder: SentenceEmbedder | None = None,
        entity_weight: float = ENTITY_WEIGHT,
        query_weight: float = 0.5,
        term_weight: float = TERM_WEIGHT,
        forms: str = "both",
        tokenizer: Tokenizer | None = None,
        always_summarize: bool = False,
        progress: bool = True,
    ) -> None:
        super().__init__(tokenizer=tokenizer, always_summarize=always_summarize)
        if embedder is not None and not callable(getattr(embedder, "embed", None)):
            raise InvalidTypeError(
                "embedder: expected an object with embed(list[str]) -> array (StaticEmbedder, Embedder, "
                f"TermVectorEmbedder), got {type(embedder).__name__}"
            )
        self._embedder = embedder
        self.entity_weight = _non_negative(entity_weight, "entity_weight")
        self.query_weight = _non_negative(query_weight, "query_weight")
        self.term_weight = _non_negative(term_weight, "term_weight")
        if self.term_weight > 1.0:
            raise InvalidInputError(
                f"term_weight: the term vectors' share of a sentence's vector must be between 0 and 1, got {term_weight}"
            )
        self.greedy_exponents = GREEDY_EXPONENTS
        if forms not in FORMS:
            raise InvalidInputError(f"forms: expected one of {list(FORMS)}, got {forms!r}")
        self.forms = forms
        self.progress = bool(progress)

    @property
    def embedder(self) -> SentenceEmbedder:
        """The sentence embedder centrality uses (the shared static one unless one was passed)."""
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    def _summarize_many(self, texts: list[str], targets: list[int], query: str | None) -> list[str]:
        out = []
        with ProgressBar(len(texts), "summarize", unit="texts", enabled=self.progress) as bar:
            for t, n in zip(texts, targets):
                out.append(self._extract(t, n, query).text)
                bar.update()
        return out

    @renamed_arguments(target_tokens="budget")
    def extract(self, text: str, budget: int, query: str | None = None) -> Extract:
        """The summary of one text (at most ``budget`` tokens) with what was
        chosen and where it comes from."""
        (item,) = _check_one(text, budget, query)
        return self._extract(item, budget, query)

    # -- the selection --

    def _extract(self, text: str, target: int, query: str | None) -> Extract:
        return self.select(split_sentences(text), target, query)

    @renamed_arguments(target="budget")
    def select(self, sentences: list[Sentence], budget: int, query: str | None = None) -> Extract:
        """The summary made of some of ``sentences`` (from `split_sentences`,
        possibly a slice of a longer text's: `compress` passes each topic's), at
        most ``budget`` tokens."""
        check_targets(budget, 1)
        if not sentences:
            return Extract("", 0, sentences, [])
        tok = self.tokenizer
        n = len(sentences)
        # each form's cost with the separator it is rendered after; count each distinct string once
        strings = [("\n" if s.line_start else " ") + form for s in sentences for form in (s.text, s.pruned)]
        distinct = list(dict.fromkeys(strings))
        counted = dict(zip(distinct, np.asarray(tok.count(distinct)).tolist()))
        costs = np.array([counted[x] for x in strings], dtype=np.int64).reshape(n, 2)  # whole, pruned
        empty_pruned = np.array([not s.pruned for s in sentences])
        weights = costs.astype(np.float64)  # token weights of the mean vector, per form
        texts = [s.text for s in sentences]
        vectors = np.asarray(self.embedder.embed(texts + ([query] if query else [])), dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != n + bool(query) or not np.isfinite(vectors).all():
            raise InvalidInputError(
                f"embedder: {type(self.embedder).__name__}.embed returned an array of shape {vectors.shape} "
                f"(or with NaN/inf) for {n + bool(query)} texts; expected finite (n, dim) vectors, one row per text"
            )
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        qvec = vectors[n] if query else None
        vectors = vectors[:n]
        relevance = np.zeros(n)
        if query and qvec is not None:
            dense = np.maximum(vectors @ qvec, 0.0).astype(np.float64)
            lexical = np.asarray(Bm25(texts).scores(query), dtype=np.float64)
            relevance = 0.5 * dense / max(dense.max(), 1e-9) + 0.5 * lexical / max(lexical.max(), 1e-9)
        ent_full, ent_pruned, ent_weights = self._entity_matrices(sentences)
        terms = _TermParts(texts)
        obj = _Objective(
            *terms.blend(vectors, self.term_weight), weights[:, FULL], ent_full, ent_pruned, ent_weights, relevance,
            self.entity_weight, self.query_weight if query else 0.0, budget,
        )
        allowed = np.ones((n, 2), dtype=bool)
        allowed[empty_pruned, :] = False  # all filler: neither form says anything
        # no content word and no entity ("How about you?"): nothing to keep, unless nothing else is
        contentless = ~terms.nonzero & ~ent_full.any(axis=1)
        if self.term_weight > 0 and not contentless.all():
            allowed[contentless, :] = False
        fences = np.array([is_fence_line(s.text) for s in sentences], dtype=bool)
        if fences.any() and not fences.all():
            allowed[fences, :] = False
        if self.forms == "whole":
            allowed[:, PRUNED] = False
        elif self.forms == "pruned":
            allowed[:, FULL] = False
        room = budget
        chosen: dict[int, int] = {}
        # Speaker labels cost more than the parts' sum: one more plan with that
        # much less, then `_fit` settles the last tokens.
        for _ in range(2):
            chosen = self._best_plan(obj, costs, weights, allowed, room)
            rendered, count = self._render(sentences, chosen)
            if count <= budget:
                break
            room -= count - budget
            if room < 1:
                break
        chosen = self._fit(obj, sentences, costs, weights, allowed, budget, chosen)
        rendered, count = self._render(sentences, chosen)
        if not chosen or count > budget:
            return self._fallback(sentences, obj, budget, fences)
        order = sorted(chosen)
        state = obj.state({i: (chosen[i], weights[i, chosen[i]]) for i in order})
        value = obj.value(state[0], state[1], state[3], float(sum(obj.rel[i] * weights[i, chosen[i]] for i in order)))
        return Extract(
            rendered, count, sentences, [(i, chosen[i]) for i in order], value,
            [(sentences[i].start, sentences[i].end) for i in order],
        )

    def _entity_matrices(
        self, sentences: list[Sentence]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        found_full = [entities(s.text) for s in sentences]
        found_pruned = [a if s.pruned == s.text else entities(s.pruned) for s, a in zip(sentences, found_full)]
        counts = Counter(e for found in found_full for e in found)
        index = {e: k for k, e in enumerate(counts)}
        full = np.zeros((len(sentences), len(index)))
        pruned = np.zeros((len(sentences), len(index)))
        for i, (a, b) in enumerate(zip(found_full, found_pruned)):
            full[i, [index[e] for e in a]] = 1.0
            pruned[i, [index[e] for e in b if e in index]] = 1.0
        # what a text keeps naming is what it is about; a name said once counts only when nothing repeats
        single = 1.0 if max(counts.values(), default=0) < 2 else 0.0
        w = np.array([1.0 + math.log(counts[e]) if counts[e] >= 2 else single for e in index])
        # the speaker labels written with the chosen sentences keep the speakers' names
        labels = {e for label in {s.speaker for s in sentences if s.speaker} for e in entities(label)}
        w[[index[e] for e in labels if e in index]] = 0.0
        return full, pruned, w

    def _best_plan(
        self,
        obj: _Objective,
        costs: npt.NDArray[np.int64],
        weights: npt.NDArray[np.float64],
        allowed: npt.NDArray[np.bool_],
        budget: int,
    ) -> dict[int, int]:
        """The best of the greedy starts (gain per token^r for each r of
        ``GREEDY_EXPONENTS``), each polished by the knapsack."""
        best: dict[int, int] = {}
        best_value = -math.inf
        for exponent in self.greedy_exponents:
            plan = self._greedy(obj, costs, weights, allowed, budget, exponent)
            plan = self._polish(obj, costs, weights, allowed, budget, plan)
            value = self._linear_values(obj, weights, plan)[1] if plan else 0.0
            if value > best_value + 1e-12:
                best, best_value = plan, value
        return best

    def _greedy(
        self,
        obj: _Objective,
        costs: npt.NDArray[np.int64],
        weights: npt.NDArray[np.float64],
        allowed: npt.NDArray[np.bool_],
        budget: int,
        exponent: float,
    ) -> dict[int, int]:
        """Cost-benefit greedy on F: add the sentence form with the best gain
        per token^r that still fits, until none does or none gains. Both forms
        are scored at once ((n, 2) arrays); entity gains are updated only for
        the entities a step newly covers."""
        chosen: dict[int, int] = {}
        sm = ss = 0.0
        se = np.zeros(len(costs))
        covered = np.zeros(obj.ent[0].shape[1], dtype=bool)
        spent = 0
        scale = np.maximum(costs.astype(np.float64), 1.0) ** exponent
        open_ = allowed.copy()
        mu, self_sim = obj.mu[:, None], obj.self_sim[:, None]
        fixed_gain = obj.rel[:, None] * weights + np.column_stack([a @ obj.ent_weights for a in obj.ent])
        while True:
            sm2 = sm + weights * mu
            ss2 = ss + 2 * weights * se[:, None] + weights * weights * self_sim
            cos = sm2 / np.sqrt(np.maximum(ss2, 1e-12))
            gain = cos - (sm / math.sqrt(ss) if ss > 1e-12 else 0.0) + fixed_gain
            ratio = np.where(open_ & (costs <= budget - spent), gain / scale, -np.inf)
            flat = int(np.argmax(ratio))
            i, form = divmod(flat, 2)
            if not ratio[i, form] > 0:
                return chosen
            w_i = float(weights[i, form])
            sm += w_i * obj.mu[i]
            ss += 2 * w_i * se[i] + w_i * w_i * obj.self_sim[i]
            se += w_i * obj.gram[i]
            newly = (obj.ent[form][i] > 0) & ~covered
            if newly.any():
                covered |= newly
                dropped = obj.ent_weights[newly]
                fixed_gain -= np.column_stack([a[:, newly] @ dropped for a in obj.ent])
            spent += int(costs[i, form])
            open_[i] = False
            chosen[i] = form

    def _linear_values(
        self, obj: _Objective, weights: npt.NDArray[np.float64], chosen: dict[int, int]
    ) -> tuple[npt.NDArray[np.float64], float]:
        """Each sentence form's value: F with it minus F without the sentence,
        everything else as chosen (n, 3: whole, pruned, dropped = 0)."""
        sel = {i: (f, float(weights[i, f])) for i, f in chosen.items()}
        sm, ss, se, cover = obj.state(sel)
        rel_total = float(sum(obj.rel[i] * w for i, (_, w) in sel.items()))
        n = len(weights)
        current = np.zeros(n)
        for i, (_, w) in sel.items():
            current[i] = w
        # remove each sentence's own contribution: s_i = s - w_i e_i
        sm_i = sm - current * obj.mu
        se_ii = se - current * obj.self_sim  # s_i . e_i
        ss_i = ss - 2 * current * se + current * current * obj.self_sim
        # an entity counts for sentence i if no other chosen sentence covers it:
        # uncovered ones, and (for a chosen i) those only i covers
        rows = np.fromiter(sel, dtype=np.int64, count=len(sel))
        own = np.array([obj.ent[f][i] for i, (f, _) in sel.items()]).reshape(len(sel), cover.shape[0])
        free_weights = obj.ent_weights * (cover == 0)
        sole_weights = obj.ent_weights * (cover == 1)
        values = np.zeros((n, 3))
        cos_i = np.where(ss_i > 1e-12, sm_i / np.sqrt(np.maximum(ss_i, 1e-12)), 0.0)
        for form in (FULL, PRUNED):
            wf = weights[:, form]
            sm2 = sm_i + wf * obj.mu
            ss2 = ss_i + 2 * wf * se_ii + wf * wf * obj.self_sim
            cos = np.where(ss2 > 1e-12, sm2 / np.sqrt(np.maximum(ss2, 1e-12)), 0.0)
            ent_gain = obj.ent[form] @ free_weights
            if len(rows):
                ent_gain[rows] += (obj.ent[form][rows] * own) @ sole_weights
            values[:, form] = cos - cos_i + ent_gain + obj.rel * wf
        return values, obj.value(sm, ss, cover, rel_total)

    def _polish(
        self,
        obj: _Objective,
        costs: npt.NDArray[np.int64],
        weights: npt.NDArray[np.float64],
        allowed: npt.NDArray[np.bool_],
        budget: int,
        chosen: dict[int, int],
    ) -> dict[int, int]:
        """Re-choose every sentence's form with the exact knapsack on F
        linearised around ``chosen``; keep the plan while F improves."""
        if budget < 1 or not chosen:
            return chosen
        n = len(costs)
        option_costs = np.zeros((n, 3), dtype=np.int64)
        option_costs[:, :2] = costs
        best_value = self._linear_values(obj, weights, chosen)[1]
        for _ in range(3):
            values, _ = self._linear_values(obj, weights, chosen)
            # a form that is not allowed costs more than the budget and is worth nothing
            option_values = np.where(np.column_stack([allowed, np.ones(n, bool)]), values, -1.0)
            option_costs[:, :2] = np.where(allowed, costs, budget + 1)
            try:
                plan = select_options(option_costs, option_values, int(budget))
            except CtxFoldError:
                return chosen
            candidate = {i: int(p) for i, p in enumerate(plan.tolist()) if p < 2}
            value = self._linear_values(obj, weights, candidate)[1] if candidate else 0.0
            if value <= best_value + 1e-9:
                return chosen
            chosen, best_value = candidate, value
        return chosen

    def _fit(
        self,
        obj: _Objective,
        sentences: list[Sentence],
        costs: npt.NDArray[np.int64],
        weights: npt.NDArray[np.float64],
        allowed: npt.NDArray[np.bool_],
        target: int,
        chosen: dict[int, int],
    ) -> dict[int, int]:
        """Make the rendered summary fit exactly: drop the least valuable
        sentences while over, then add the best that still fit."""
        chosen = dict(chosen)
        _, count = self._render(sentences, chosen)
        while chosen and count > target:
            values, _ = self._linear_values(obj, weights, chosen)
            i = min(chosen, key=lambda k: values[k, chosen[k]] / max(1, costs[k, chosen[k]]))
            del chosen[i]
            _, count = self._render(sentences, chosen)
        for _ in range(8):
            room = target - count
            if room <= 0:
                break
            values, _ = self._linear_values(obj, weights, chosen)
            fits = [
                (values[i, f] / max(1, costs[i, f]), i, f)
                for i in range(len(sentences)) if i not in chosen
                for f in (FULL, PRUNED) if allowed[i, f] and costs[i, f] <= room and values[i, f] > 0
            ]
            added = False
            for _, i, f in sorted(fits, reverse=True)[:4]:
                trial = {**chosen, i: f}
                _, c = self._render(sentences, trial)
                if c <= target:
                    chosen, count, added = trial, c, True
                    break
            if not added:
                break
        return chosen

    def _fallback(
        self, sentences: list[Sentence], obj: _Objective, target: int, fences: npt.NDArray[np.bool_]
    ) -> Extract:
        """No sentence fits: the start of the most central one (not a code
        fence line, unless all are), cut after its last whole word (or its
        first word that fits), never inside a word."""
        tok = self.tokenizer
        for i in np.argsort(-obj.mu, kind="stable").tolist():
            if fences[i] and not fences.all():
                continue
            s = sentences[i]
            body = s.pruned or s.text
            cut = tok.truncate(body, target).rstrip()
            if cut and len(cut) < len(body) and body[len(cut)].isalnum() and cut[-1].isalnum():
                cut = cut[: len(cut) - len(re.search(r"\w*$", cut).group(0))].rstrip()  # type: ignore[union-attr]
            if not cut:
                cut = next((w for w in re.findall(r"\w+", body) if tok.count_until(w, target) is not None), "")
            if cut:
                return Extract(cut, int(tok.count(cut)), sentences, [(i, PRUNED)], 0.0, [(s.start, s.end)])
        return Extract("", 0, sentences, [])

    def _render(self, sentences: list[Sentence], chosen: dict[int, int]) -> tuple[str, int]:
        parts: list[str] = []
        prev: Sentence | None = None
        speaker: str | None = None
        for i in sorted(chosen):
            s = sentences[i]
            body = s.text if chosen[i] == FULL else s.pruned
            if s.speaker is not None and s.speaker != speaker:
                parts.append(("\n" if parts else "") + f"{s.speaker}: " + body)
                speaker = s.speaker
            elif prev is not None and prev.line == s.line:
                parts.append(" " + body)
            else:
                parts.append(("\n" if parts else "") + body)
            prev = s
        text = "".join(parts)
        return text, int(self.tokenizer.count(text)) if text else 0


class _TermParts:
    """The sentences' TF-IDF vectors over the text's own vocabulary (as
    `TermVectorEmbedder` makes them: sub-linear tf, idf fitted on these
    sentences, unit rows), stored as the columns of terms in two or more
    sentences plus, per row, the norm of the rest: a term of one sentence adds
    nothing to any other sentence's similarity, so the Gram matrix costs the
    shared terms only."""

    def __init__(self, texts: Sequence[str]) -> None:
        docs = [Counter(Bm25.tokenize(t)) for t in texts]
        n = len(docs)
        terms = [term for d in docs for term in d]
        df = Counter(terms)
        rows = np.repeat(np.arange(n), [len(d) for d in docs])
        counts = np.fromiter((c for d in docs for c in d.values()), dtype=np.float64, count=len(terms))
        dfs = np.fromiter((df[t] for t in terms), dtype=np.float64, count=len(terms))
        values = (1.0 + np.log(counts)) * (np.log((1 + n) / (1 + dfs)) + 1.0)
        is_shared = dfs >= 2
        index = {t: k for k, t in enumerate(t for t, c in df.items() if c >= 2)}
        self.shared = np.zeros((n, len(index)), dtype=np.float32)
        cols = np.fromiter((index[t] for t, s in zip(terms, is_shared.tolist()) if s), dtype=np.int64)
        self.shared[rows[is_shared], cols] = values[is_shared]
        own = np.bincount(rows[~is_shared], weights=values[~is_shared] ** 2, minlength=n)
        norms = np.sqrt(np.einsum("ij,ij->i", self.shared, self.shared, dtype=np.float64) + own)
        self.nonzero = norms > 0
        safe = np.maximum(norms, 1e-12)
        self.shared /= safe[:, None].astype(np.float32)
        self.private = np.sqrt(own) / safe

    def blend(self, semantic: FloatArray, term_weight: float) -> tuple[FloatArray, npt.NDArray[np.float64]]:
        """Rows of unit ``semantic`` vectors and these term vectors side by
        side, weighted so that a row with both parts has unit length: the
        shared axes and each row's private norm."""
        if term_weight <= 0.0:
            return semantic, np.zeros(len(semantic))
        a, b = math.sqrt(1.0 - min(term_weight, 1.0)), math.sqrt(term_weight)
        parts = [semantic * a] if a > 0 else []
        rows = np.hstack([*parts, self.shared * b]).astype(np.float32)
        if rows.shape[1] == 0:  # no term in two sentences, and no semantic part
            rows = np.zeros((len(rows), 1), dtype=np.float32)
        return rows, self.private * b


def _check_one(text: object, budget: object, query: object) -> list[str]:
    from ctxfold.summarize.protocol import check_texts

    if not isinstance(text, str):
        raise InvalidTypeError(f"text: expected str, got {type(text).__name__}")
    items = check_texts([text])
    check_targets(budget, 1)
    if query is not None and not isinstance(query, str):
        raise InvalidTypeError(f"query: expected str or None, got {type(query).__name__}")
    return items


def _non_negative(value: object, argument: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(f"{argument}: expected a number, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise InvalidInputError(f"{argument}: must be a finite number >= 0, got {value}")
    return float(value)

