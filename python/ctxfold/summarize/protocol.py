"""Summarizers: one protocol, several engines.

Every summarizer answers ``summarize(texts, budget, query=None)`` with
one summary per text, each at most ``budget`` tokens as counted by the
summarizer's `Tokenizer` (the project's exact counter; ``o200k_base`` unless
another is passed), and ``await asummarize(...)`` with the same result. A
text that already fits its target is returned unchanged (no model call)
unless ``always_summarize=True``. Whatever an engine writes is cut on a token
boundary (preferably after the last whole sentence) if it overshoots.

`BaseSummarizer` is what an engine subclasses (implement ``_summarize_many``):
`ExtractiveSummarizer`, `CallableSummarizer`, `OnnxSeq2SeqSummarizer` and
`HeadTailSummarizer` in this package.
"""

from __future__ import annotations

import asyncio
import numbers
import re
from collections.abc import Sequence
from typing import Protocol, TypeVar, runtime_checkable

from ctxfold._core import Tokenizer
from ctxfold._renamed import renamed_arguments
from ctxfold.errors import InvalidInputError, InvalidTypeError, ModelError
from ctxfold.tokens import get_tokenizer

__all__ = ["Summarizer", "BaseSummarizer", "fit_to_tokens", "check_texts", "check_targets"]

T = TypeVar("T")

# A sentence end: . ! ? (or an ellipsis) possibly closed by a quote or bracket, then a space.
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*(?=\s)")


@runtime_checkable
class Summarizer(Protocol):
    """What `ContextEngine` calls to shorten texts. ``budget`` is one
    int for every text or one per text; each summary fits its budget. The
    engine passes both arguments by position."""

    def summarize(
        self, texts: Sequence[str], budget: int | Sequence[int], query: str | None = None
    ) -> list[str]:
        """One summary per text, each within its ``budget`` tokens (``query``: what matters, if known)."""
        ...

    async def asummarize(
        self, texts: Sequence[str], budget: int | Sequence[int], query: str | None = None
    ) -> list[str]:
        """`summarize`, awaitable."""
        ...


@renamed_arguments(max_tokens="budget")
def fit_to_tokens(text: str, budget: int, tokenizer: Tokenizer) -> str:
    """``text`` stripped, or, if it counts more than ``budget``, its longest
    start that fits, shortened to the last sentence end when that keeps at least
    half of it (a summary that stops mid-sentence reads worse than one that is
    a little shorter)."""
    text = text.strip()
    if tokenizer.count_until(text, budget) is not None:
        return text
    cut = tokenizer.truncate(text, budget).rstrip()
    ends = [m.end() for m in _SENTENCE_END.finditer(cut + " ")]
    if ends and ends[-1] >= len(cut) / 2:
        cut = cut[: ends[-1]]
    if tokenizer.count_until(cut, budget) is None:  # BPE gives no prefix guarantee; truncate decides
        cut = tokenizer.truncate(cut, budget)
    return cut


class BaseSummarizer:
    """Argument checks, the fits-already shortcut and the final cut, shared by
    every summarizer. Subclasses implement ``_summarize_many(texts, targets,
    query)`` returning one raw summary per text (it is cut afterwards) and may
    override ``_asummarize_many`` for native async."""

    def __init__(self, *, tokenizer: Tokenizer | None = None, always_summarize: bool = False) -> None:
        if tokenizer is not None and not isinstance(tokenizer, Tokenizer):
            raise InvalidTypeError(
                "tokenizer: expected a ctxfold.Tokenizer (e.g. get_tokenizer(model=...)), "
                f"got {type(tokenizer).__name__}"
            )
        self.tokenizer = tokenizer if tokenizer is not None else get_tokenizer()
        self.always_summarize = bool(always_summarize)

    @renamed_arguments(target_tokens="budget")
    def summarize(
        self, texts: Sequence[str], budget: int | Sequence[int], query: str | None = None
    ) -> list[str]:
        """One summary per text, each within its token budget (one int for
        every text or one per text)."""
        items, targets, todo = self._plan(texts, budget, query)
        raw = self._summarize_many([items[i] for i in todo], [targets[i] for i in todo], query) if todo else []
        return self._finish(items, targets, todo, raw)

    @renamed_arguments(target_tokens="budget")
    async def asummarize(
        self, texts: Sequence[str], budget: int | Sequence[int], query: str | None = None
    ) -> list[str]:
        """`summarize` for async callers."""
        items, targets, todo = self._plan(texts, budget, query)
        raw = await self._asummarize_many([items[i] for i in todo], [targets[i] for i in todo], query) if todo else []
        return self._finish(items, targets, todo, raw)

    def _summarize_many(self, texts: list[str], targets: list[int], query: str | None) -> list[str]:
        raise NotImplementedError

    async def _asummarize_many(self, texts: list[str], targets: list[int], query: str | None) -> list[str]:
        # Model inference releases the GIL, so a worker thread keeps the event loop free.
        return await asyncio.to_thread(self._summarize_many, texts, targets, query)

    def _plan(
        self, texts: Sequence[str], budget: int | Sequence[int], query: str | None
    ) -> tuple[list[str], list[int], list[int]]:
        items = check_texts(texts)
        targets = check_targets(budget, len(items))
        if query is not None and not isinstance(query, str):
            raise InvalidTypeError(f"query: expected str or None, got {type(query).__name__}")
        if self.always_summarize:
            return items, targets, list(range(len(items)))
        todo = [i for i, (t, n) in enumerate(zip(items, targets)) if self.tokenizer.count_until(t, n) is None]
        return items, targets, todo

    def _finish(self, items: list[str], targets: list[int], todo: list[int], raw: Sequence[object]) -> list[str]:
        if len(raw) != len(todo):
            raise ModelError(f"{type(self).__name__}: got {len(raw)} summaries for {len(todo)} texts")
        out = list(items)
        for i, summary in zip(todo, raw):
            if not isinstance(summary, str):
                raise InvalidTypeError(f"summary of texts[{i}]: expected str, got {type(summary).__name__}")
            out[i] = fit_to_tokens(summary, targets[i], self.tokenizer)
        return out


def check_texts(texts: object) -> list[str]:
    """``texts`` as a list of non-empty str, or a clear error naming the bad one."""
    if isinstance(texts, str):
        raise InvalidTypeError("texts: expected a list of str, got one str (wrap it in a list: [text])")
    if isinstance(texts, (bytes, bytearray)) or not isinstance(texts, Sequence):
        raise InvalidTypeError(f"texts: expected a list of str, got {type(texts).__name__}")
    items = list(texts)
    for i, t in enumerate(items):
        if not isinstance(t, str):
            raise InvalidTypeError(f"texts[{i}]: expected str, got {type(t).__name__}")
        if not t.strip():
            raise InvalidInputError(f"texts[{i}]: empty text, nothing to summarize (leave it out of the list)")
    return items


def check_targets(budget: object, count: int) -> list[int]:
    """One positive int per text, from an int or a sequence (or array) of ints."""
    scalar = isinstance(budget, numbers.Integral) and not isinstance(budget, bool)
    values = [budget] * count if scalar else budget
    if hasattr(values, "tolist") and not scalar:  # a numpy array from the planner
        values = values.tolist()
    if isinstance(budget, bool) or isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise InvalidTypeError(f"budget: expected an int or a list of ints, got {type(budget).__name__}")
    if len(values) != count:
        raise InvalidInputError(
            f"budget: got {len(values)} budgets for {count} texts; pass one int or one per text"
        )
    targets = []
    for i, v in enumerate(values):
        where = "budget" if scalar else f"budget[{i}]"
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise InvalidTypeError(f"{where}: expected int, got {type(v).__name__}")
        if v < 1:
            raise InvalidInputError(f"{where}: must be a positive number of tokens, got {v}")
        targets.append(int(v))
    return targets
