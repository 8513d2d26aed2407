"""The run context alone: one frozen value per call, built from the engine's own tools."""

from __future__ import annotations

import datetime as dt

import pytest

from ctxfold import ContextEngine
from ctxfold.engine.messages import parse_messages
from ctxfold.engine.run import RunContext


def test_the_engine_hands_its_own_tools_and_the_call_facts():
    engine = ContextEngine(encoding="cl100k_base", embedder=None)
    run = engine._run([], 500, "where is the key?", question_is_current=False, protect_recent=False)
    assert isinstance(run, RunContext)
    assert (run.tokenizer, run.config, run.cache, run.summarizer) == (
        engine.tokenizer, engine.config, engine.cache, engine.summarizer)
    assert run.embedder is None
    assert (run.budget, run.query, run.question_is_current, run.protect_recent) == (500, "where is the key?", False, False)


def test_no_stage_can_change_it():
    run = ContextEngine(encoding="cl100k_base", embedder=None)._run([], 500, "q")
    with pytest.raises(AttributeError):
        run.budget = 10  # type: ignore[misc]


def test_it_finds_who_the_chat_is_between_and_when_it_is_asked_from_the_items():
    engine = ContextEngine(encoding="cl100k_base", embedder=None)
    items = parse_messages([
        {"role": "user", "content": "Ana: the trip is on", "timestamp": "2024-05-01T10:00:00"},
        {"role": "assistant", "content": "Ben: great, see you", "timestamp": "2024-05-03T09:30:00"},
    ], engine.tokenizer)
    run = engine._run(items, 500, "when is the trip?")
    assert run.people == ("Ana", "Ben")
    assert run.now == dt.datetime(2024, 5, 3, 9, 30, tzinfo=dt.timezone.utc)
    asked = dt.datetime(2024, 6, 1, tzinfo=dt.timezone.utc)
    assert engine._run(items, 500, "q", now=asked).now == asked
