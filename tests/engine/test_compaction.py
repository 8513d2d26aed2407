"""The structural compaction stage alone: placeholder text, structural_pass
and apply_edits on hand-made items."""

from __future__ import annotations

import pytest

from ctxfold import count_messages
from ctxfold.engine.compaction import apply_edits, placeholder, structural_pass, superseded_reads
from ctxfold.engine.messages import parse_messages
from ctxfold.engine.results import STATE_KINDS
from ctxfold.tokens import REPLY_PRIMING, get_tokenizer

TOK = get_tokenizer(encoding="cl100k_base")
BIG = 2000


def tool_round(call_id: str, output: str, name: str = "grep", **extra) -> list[dict]:
    return [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": call_id, "content": output, **extra},
    ]


def total(items) -> int:
    return sum(it.tokens for it in items)


def run(items, room, keep=None, max_tool=BIG):
    keep = keep if keep is not None else [False] * len(items)
    edits = structural_pass(items, room, keep, TOK, max_tool)
    return edits, apply_edits(items, edits, TOK)


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


def test_nothing_changes_when_it_fits():
    items = parse_messages(tool_round("c1", "line " * 300), TOK)
    edits, _ = run(items, total(items))
    assert edits == {}


def test_stale_tool_results_cleared_oldest_first_only_until_it_fits():
    msgs = [*tool_round("c1", "alpha " * 300), *tool_round("c2", "beta " * 300), *tool_round("c3", "gamma " * 300),
            {"role": "user", "content": "and now?"}]
    items = parse_messages(msgs, TOK)
    # Room for everything but one tool output: clearing the oldest is enough.
    edits, after = run(items, total(items) - 250)
    assert sorted(edits) == [1]
    assert edits[1].status == "cleared" and edits[1].reason == "stale tool result"
    assert edits[1].content == placeholder(items[1])
    assert total(after) <= total(items) - 250
    # Room for one output of three: the two oldest go, the newest stays.
    edits, after = run(items, total(items) - 500)
    assert sorted(edits) == [1, 3]
    assert total(after) <= total(items) - 500


def test_long_tool_output_cut_to_head_and_tail_first():
    items = parse_messages(tool_round("c1", " ".join(f"w{k}" for k in range(3000))), TOK)
    edits, after = run(items, total(items) - 100, max_tool=200)
    assert list(edits) == [1] and edits[1].status == "summarized"
    assert edits[1].reason == "tool output cut to 200 tokens (head + tail)"
    assert TOK.count(edits[1].content) <= 200
    assert edits[1].content.startswith("w0 w1") and edits[1].content.endswith("w2999")


def test_clearing_order_tool_result_then_superseded_read_then_debug_log_then_intermediate():
    msgs = [
        {"role": "assistant", "content": "/src/app.py\n" + "old " * 200, "kind": "file_read"},
        {"role": "assistant", "content": "trace " * 200, "kind": "debug_log"},
        {"role": "assistant", "content": "draft " * 200, "kind": "intermediate"},
        *tool_round("c1", "found " * 200),
        {"role": "assistant", "content": "/src/app.py\n" + "new " * 200, "kind": "file_read"},
        {"role": "user", "content": "next"},
    ]
    items = parse_messages(msgs, TOK)
    assert superseded_reads(items) == {0}
    reasons = []
    for k in range(1, 5):
        edits, _ = run(items, total(items) - 150 * k)
        reasons.append(sorted(e.reason for e in edits.values()))
    assert reasons == [
        ["stale tool result"],
        ["stale tool result", "superseded file read"],
        ["debug log", "stale tool result", "superseded file read"],
        ["debug log", "intermediate output", "stale tool result", "superseded file read"],
    ]
    # The latest read of the path is never cleared as superseded.
    edits, _ = run(items, 0)
    assert 5 not in edits


@pytest.mark.parametrize("kind", sorted(STATE_KINDS))
def test_state_kinds_never_touched_even_when_nothing_fits(kind):
    msgs = [*tool_round("c1", "x " * 3000, kind=kind), {"role": "assistant", "content": "y " * 300, "kind": kind}]
    items = parse_messages(msgs, TOK)
    edits, after = run(items, 0, max_tool=100)
    assert edits == {} and after == items


def test_kept_messages_untouched():
    msgs = [*tool_round("c1", "alpha " * 300), *tool_round("c2", "beta " * 300)]
    items = parse_messages(msgs, TOK)
    edits, _ = run(items, 0, keep=[False, True, False, False])
    assert sorted(edits) == [3]


def test_apply_edits_prices_the_new_content_and_keeps_the_scoring_text():
    items = parse_messages([*tool_round("c1", "alpha " * 300), {"role": "user", "content": "q"}], TOK)
    edits, after = run(items, total(items) - 200)
    assert after[1].message["content"] == edits[1].content
    assert after[1].tokens == count_messages([after[1].message], tokenizer=TOK) - REPLY_PRIMING
    assert after[1].text == items[1].text and after[0] is items[0]
