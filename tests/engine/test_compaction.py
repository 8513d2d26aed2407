"""Structural compaction's texts and facts on hand-made items: placeholders,
superseded file reads, later copies (`options` makes forms of them)."""

from __future__ import annotations

import pytest

from ctxfold.engine.compaction import later_copies, placeholder, read_path, superseded_reads
from ctxfold.engine.messages import parse_messages
from ctxfold.tokens import get_tokenizer

TOK = get_tokenizer(encoding="cl100k_base")


def tool_round(call_id: str, output: str, name: str = "grep", **extra) -> list[dict]:
    return [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": call_id, "content": output, **extra},
    ]


def test_placeholder_names_the_tool_size_and_recall_id():
    items = parse_messages([{"role": "user", "content": "go"}, *tool_round("c1", "line " * 300)], TOK)
    tool = items[2]
    assert placeholder(tool) == (
        f"[output of `grep` omitted to save context: {tool.tokens:,} tokens; recall id {tool.id} with the recall tool]"
    )
    assert placeholder(tool, tool_name="my`tool").startswith("[output of `mytool` omitted")


@pytest.mark.parametrize(
    "message, what",
    [
        ({"role": "assistant", "content": "x", "kind": "file_read"}, "file read"),
        ({"role": "assistant", "content": "x", "kind": "debug_log"}, "debug log"),
        ({"role": "assistant", "content": "x", "kind": "intermediate"}, "intermediate output"),
        ({"role": "assistant", "content": "x", "kind": "quality_gate"}, "quality gate"),
        ({"role": "user", "content": "x"}, "user message"),
        ({"role": "user", "content": "x", "kind": "tool_result"}, "tool output"),
    ],
)
def test_placeholder_says_what_was_there(message, what):
    item = parse_messages([message], TOK)[0]
    assert placeholder(item).startswith(f"[{what} omitted to save context: {item.tokens} tokens; recall id {item.id}")


def test_a_read_is_superseded_only_by_a_later_read_of_the_same_path():
    msgs = [
        {"role": "assistant", "content": "/src/app.py\n" + "old " * 20, "kind": "file_read"},
        {"role": "assistant", "content": "/src/other.py\n" + "x " * 20, "kind": "file_read"},
        {"role": "assistant", "content": "/src/app.py mentioned in passing", "kind": "debug_log"},
        {"role": "assistant", "content": "/src/app.py\n" + "new " * 20, "kind": "file_read"},
    ]
    items = parse_messages(msgs, TOK)
    assert [read_path(it) for it in items] == ["/src/app.py", "/src/other.py", "/src/app.py", "/src/app.py"]
    assert superseded_reads(items) == {0}


def test_later_copies_point_at_the_last_copy_and_skip_tool_calls():
    msgs = [{"role": "user", "content": "again"}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "again"}, {"role": "user", "content": "again"},
            *tool_round("c1", "out"), *tool_round("c2", "out")]
    items = parse_messages(msgs, TOK)
    # A call carries its own ids and is never a copy; a result repeated verbatim later is.
    assert later_copies(items) == {0: 3, 2: 3, 5: 7}
