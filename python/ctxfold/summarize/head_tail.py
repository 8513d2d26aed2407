"""The model-free cut: a text's head and tail around an omission marker."""

from __future__ import annotations

from ctxfold._core import Tokenizer
from ctxfold._renamed import renamed_arguments
from ctxfold.summarize.protocol import BaseSummarizer

__all__ = ["HeadTailSummarizer", "head_tail"]


@renamed_arguments(max_tokens="budget")
def head_tail(text: str, budget: int, tokenizer: Tokenizer) -> str:
    """`text` cut to its head and tail around an omission marker, at most
    `budget` tokens in all (the marker included)."""
    if tokenizer.count_until(text, budget) is not None:
        return text
    omitted = tokenizer.count(text)
    marker = f"\n[... {omitted} tokens omitted ...]\n"
    room = max(0, budget - tokenizer.count(marker))
    head = tokenizer.truncate(text, room - room // 3, side="end")
    tail = tokenizer.truncate(text, room // 3, side="start")
    out = head + marker + tail
    while tokenizer.count(out) > budget and (head or tail):
        # Joining can merge tokens across the seams; give back one token at a time.
        if len(head) >= len(tail):
            head = tokenizer.truncate(head, max(0, tokenizer.count(head) - 1))
        else:
            tail = tokenizer.truncate(tail, max(0, tokenizer.count(tail) - 1), side="start")
        out = head + marker + tail
    return out if tokenizer.count(out) <= budget else tokenizer.truncate(marker.strip(), budget)


class HeadTailSummarizer(BaseSummarizer):
    """The fallback shortener: the head and tail of a text around an omission
    marker (no model, source wording only)."""

    def _summarize_many(self, texts: list[str], targets: list[int], query: str | None) -> list[str]:
        return [head_tail(t, n, self.tokenizer) for t, n in zip(texts, targets)]
