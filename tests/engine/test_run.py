"""The run context alone: one frozen value per call, built from the engine's own tools."""

from __future__ import annotations

import pytest

from ctxfold import ContextEngine
from ctxfold.engine.run import RunContext


def test_the_engine_hands_its_own_tools_and_the_call_facts():
    engine = ContextEngine(encoding="cl100k_base", embedder=None)
    run = engine._run(500, "where is the key?", question_is_current=False, protect_recent=False)
    assert isinstance(run, RunContext)
    assert (run.tokenizer, run.config, run.cache, run.summarizer) == (
        engine.tokenizer, engine.config, engine.cache, engine.summarizer)
    assert run.embedder is None
    assert (run.budget, run.query, run.question_is_current, run.protect_recent) == (500, "where is the key?", False, False)


def test_no_stage_can_change_it():
    run = ContextEngine(encoding="cl100k_base", embedder=None)._run(500, "q")
    with pytest.raises(AttributeError):
        run.budget = 10  # type: ignore[misc]
