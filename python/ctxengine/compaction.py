"""Structural compaction: the cheap, reversible steps taken before anything is
summarised. Each returns new text and never touches decision, quality_gate,
trajectory or active_task items."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from ctxengine._core import Tokenizer
from ctxengine.types import Item

__all__ = ["head_tail", "placeholder", "NEVER_COMPACT", "CLEARABLE_KINDS", "superseded_reads", "duplicates"]

NEVER_COMPACT = frozenset({"decision", "quality_gate", "trajectory", "active_task"})
#: What may be cleared to a placeholder, in the order it is cleared.
CLEARABLE_KINDS = ("tool_result", "file_read", "debug_log", "intermediate")
_PATH = re.compile(r"[\w.~-]*(?:/[\w.-]+)+")


def head_tail(text: str, max_tokens: int, tokenizer: Tokenizer) -> str:
    """`text` cut to its head and tail around an omission marker, at most
    `max_tokens` tokens in all (the marker included)."""
    if tokenizer.count_until(text, max_tokens) is not None:
        return text
    omitted = tokenizer.count(text)
    marker = f"\n[... {omitted} tokens omitted ...]\n"
    room = max(0, max_tokens - tokenizer.count(marker))
    head = tokenizer.truncate(text, room - room // 3, side="end")
    tail = tokenizer.truncate(text, room // 3, side="start")
    out = head + marker + tail
    while tokenizer.count(out) > max_tokens and (head or tail):
        # Joining can merge tokens across the seams; give back one token at a time.
        if len(head) >= len(tail):
            head = tokenizer.truncate(head, max(0, tokenizer.count(head) - 1))
        else:
            tail = tokenizer.truncate(tail, max(0, tokenizer.count(tail) - 1), side="start")
        out = head + marker + tail
    return out if tokenizer.count(out) <= max_tokens else tokenizer.truncate(marker.strip(), max_tokens)


def placeholder(item: Item) -> str:
    """What a cleared item leaves behind: enough to know it existed and to get it back."""
    what = (item.kind or item.role).replace("_", " ")
    return f"[{what} {item.id} cleared ({item.tokens} tokens); restore with engine.restore({item.id!r})]"


def _read_path(item: Item) -> str | None:
    match = _PATH.search(item.text[:300])
    return match.group(0) if match else None


def superseded_reads(items: Sequence[Item]) -> set[int]:
    """Indices of file reads whose path is read again later."""
    last_read: dict[str, int] = {}
    for i, it in enumerate(items):
        if it.kind == "file_read" and (path := _read_path(it)):
            last_read[path] = i
    return {
        i for i, it in enumerate(items)
        if it.kind == "file_read" and (path := _read_path(it)) and last_read[path] != i
    }


def duplicates(items: Sequence[Item]) -> set[int]:
    """Indices of messages repeated verbatim later (same role and content)."""
    last: dict[str, int] = {}
    keys = []
    for i, it in enumerate(items):
        key = json.dumps([it.role, it.message.get("content")], sort_keys=True, default=str) if it.text else None
        keys.append(key)
        if key is not None:
            last[key] = i
    return {i for i, key in enumerate(keys) if key is not None and last[key] != i and items[i].kind not in NEVER_COMPACT}
