"""Structural compaction's texts and facts: the placeholder a cleared message
leaves, which file reads a later read supersedes, which messages are exact
copies of later ones. `options` turns them into forms the plan can pick."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ctxfold.engine.results import Item

__all__ = ["placeholder", "CLEARABLE_KINDS", "read_path", "superseded_reads", "later_copies"]

#: What may be cleared to a placeholder.
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


def read_path(item: Item) -> str | None:
    """The file path a file read names near its start, if any."""
    match = _PATH.search(item.text[:300])
    return match.group(0) if match else None


def superseded_reads(items: Sequence[Item]) -> set[int]:
    """Indices of file reads whose path is read again later."""
    last_read: dict[str, int] = {}
    for i, it in enumerate(items):
        if it.kind == "file_read" and (path := read_path(it)):
            last_read[path] = i
    return {
        i for i, it in enumerate(items)
        if it.kind == "file_read" and (path := read_path(it)) and last_read[path] != i
    }


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
