"""`store.iterations`: iteration records, tool calls and syntheses."""

from __future__ import annotations

import ctxfold
import pytest
from ctxfold.errors import InvalidInputError
from ctxfold.memory import ToolCallRecord
from memory_stores import U1, U2


# --- iteration records -------------------------------------------------------------------
def test_iteration_records(store) -> None:
    log = store.iterations.log(scope=U1, log="task")
    log.record_call(ToolCallRecord(tool="search", params={"q": "x"}, raw_output="y" * 5000, relevance="low",
                                   outcome="nothing"))
    log.record_call(tool="read_file", params={"path": "a.py"}, relevance="high", learning="a.py holds the bug")
    log.record_call(tool="grep", relevance="medium", insights=["bug in parse()"], next_actions=["fix parse"])
    assert len(log.calls()[0].raw_output) == 1000 and {c.iteration for c in log.calls()} == {1}
    log.end_iteration("found the file", "advancing")
    assert log.current_iteration == 2
    text = log.reasoning_context("fix the bug", 1000)
    lines = text.splitlines()
    assert lines[0] == "Goal: fix the bug" and "advancing" in lines[1]
    assert [line.split()[2].split("(")[0] for line in lines[2:]] == ["read_file", "grep", "search"]
    short = log.reasoning_context("fix the bug", 40)
    assert "read_file" in short and "search(" not in short
    assert int(ctxfold.count_tokens(short + "\n")) <= 40 + 2
    assert not log.is_stuck()
    for progress in ("stuck", "regressing"):
        log.end_iteration("no luck", progress)
    assert not log.is_stuck()
    log.end_iteration("still no luck", "stuck")
    assert log.is_stuck() and "no progress for 3 iterations" in log.recovery_prompt()
    assert store.iterations.log(scope=U2, log="task").calls() == []
    with pytest.raises(InvalidInputError, match="progress"):
        log.end_iteration("?", "sideways")
