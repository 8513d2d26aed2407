"""Structural compaction: the cheap, reversible steps taken before anything is
summarised. Each returns new text and never touches decision, quality_gate,
trajectory or active_task items."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

import msgspec

from ctxfold._core import Tokenizer
from ctxfold.summarize.head_tail import head_tail
from ctxfold.tokens import message_costs
from ctxfold.engine.results import STATE_KINDS, Item

__all__ = [
    "placeholder", "CLEARABLE_KINDS", "superseded_reads", "later_copies", "structural_pass",
    "apply_edits", "Edit",
]

#: What may be cleared to a placeholder, in the order it is cleared.
CLEARABLE_KINDS = ("tool_result", "file_read", "debug_log", "intermediate")
_PATH = re.compile(r"[\w.~-]*(?:/[\w.-]+)+")


def placeholder(item: Item, *, tool_name: str | None = None) -> str:
    """What a cleared item leaves behind, in words a model can act on: what
    it was (the tool's name for a tool result, when known: `tool_name`, the
    name of the call it answers, or the message's own ``name``), its size, and the id to pass to the recall
    tool (`ctxfold.recall_tool`)."""
    name = tool_name or item.tool_name or (item.message.get("name") if item.role == "tool" else None)
    if isinstance(name, str) and name.strip("` "):
        what = f"output of `{name.replace('`', '')[:64]}`"
    elif item.kind == "tool_result" or (item.kind is None and item.role == "tool"):
        what = "tool output"
    elif item.kind in _KIND_WORDS:
        what = _KIND_WORDS[item.kind]
    else:
        what = item.kind.replace("_", " ") if item.kind else f"{item.role} message"
    return f"[{what} omitted to save context: {item.tokens:,} tokens; recall id {item.id} with the recall tool]"


_KIND_WORDS = {"file_read": "file read", "debug_log": "debug log", "intermediate": "intermediate output"}


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


class Edit(NamedTuple):
    """A structural change to one message: its new content and what it counts as."""

    status: str
    """``summarized`` (cut to head + tail) or ``cleared`` (a placeholder)."""
    content: str
    reason: str


def structural_pass(
    items: Sequence[Item],
    room: int,
    keep: Sequence[bool],
    tokenizer: Tokenizer,
    max_tool_output_tokens: int,
) -> dict[int, Edit]:
    """The cheap, reversible steps, taken in order and only until the
    messages fit `room` tokens: (1) tool output over `max_tool_output_tokens`
    cut to head + tail with an omission marker; then cleared to a restorable
    placeholder: (2) stale tool results, (3) superseded file reads (the same
    path read again later), (4) debug logs, (5) intermediate outputs, oldest
    first. Exact duplicates are left to the planner, which drops the earlier
    copy first (a stub naming the later copy could outlive it). `keep[i]`
    marks what must not change (protected, the recent turns); decision,
    quality_gate, trajectory and active_task items are never touched."""
    edits: dict[int, Edit] = {}
    total = sum(it.tokens for it in items)

    def apply(i: int, edit: Edit) -> None:
        nonlocal total
        item = items[i]
        content_before = item.message.get("content")
        old = int(tokenizer.count(content_before)) if isinstance(content_before, str) else 0
        total += int(tokenizer.count(edit.content)) - old
        edits[i] = edit

    if total <= room:
        return edits
    eligible = [
        i for i, it in enumerate(items)
        if not keep[i] and it.kind not in STATE_KINDS and isinstance(it.message.get("content"), str)
    ]

    def candidates(predicate: Callable[[int, Item], bool]) -> list[int]:
        return [i for i in eligible if i not in edits and predicate(i, items[i])]

    for i in candidates(lambda i, it: it.role == "tool" and it.tokens > max_tool_output_tokens):
        if total <= room:
            return edits
        apply(i, Edit("summarized", head_tail(items[i].message["content"], max_tool_output_tokens, tokenizer),
                      f"tool output cut to {max_tool_output_tokens} tokens (head + tail)"))
    stale = superseded_reads(items)
    stages: list[tuple[str, Callable[[int, Item], bool]]] = [
        ("stale tool result", lambda i, it: it.kind == "tool_result"),
        ("superseded file read", lambda i, it: i in stale),
        ("debug log", lambda i, it: it.kind == "debug_log"),
        ("intermediate output", lambda i, it: it.kind == "intermediate"),
    ]
    for name, predicate in stages:
        for i in candidates(predicate):
            if total <= room:
                return edits
            stub = placeholder(items[i])
            if tokenizer.count(stub) < tokenizer.count(items[i].message["content"]):
                apply(i, Edit("cleared", stub, name))
    return edits


def apply_edits(items: Sequence[Item], edits: dict[int, Edit], tokenizer: Tokenizer) -> list[Item]:
    """The items with each edit's content in place and its exact new cost
    (the text used for scoring stays the original)."""
    out = list(items)
    for i, edit in edits.items():
        message = {**items[i].message, "content": edit.content}
        out[i] = msgspec.structs.replace(items[i], message=message, tokens=message_costs([message], tokenizer)[0])
    return out


def later_copies(items: Sequence[Item]) -> dict[int, int]:
    """For each message repeated verbatim later, the index of its last copy
    (tool calls excepted: each carries its own call ids)."""
    last: dict[tuple[str, str], int] = {}
    for i, it in enumerate(items):
        content = it.message.get("content")
        if isinstance(content, str) and content and not it.tool_call_ids:
            last[(it.role, content)] = i
    out = {}
    for i, it in enumerate(items):
        content = it.message.get("content")
        if isinstance(content, str) and content and not it.tool_call_ids and last[(it.role, content)] != i:
            out[i] = last[(it.role, content)]
    return out
