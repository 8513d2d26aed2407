"""The conversation arc's cost on bench_engine's 500-message, ~100,000-token
conversation, beside the engine call it belongs to (the peer: the same
`optimize` without reading the arc).

Groups (compare the rows of a group):
- ``arc-warm``: a warm engine's `optimize` and then `report.arc` read
  (per-message facts and vectors from the engine's caches: the topic
  segmentation, question matching and rendering run) against the same
  `optimize` alone;
- ``arc-incremental``: the same with one new 500-token turn;
- ``arc-cold``: `build_arc` on the messages with nothing cached (static
  embedder loaded and every message read) against a cold `optimize`.

Run: python -m pytest benches/bench_arc.py --benchmark-enable -p no:cacheprovider
"""

from __future__ import annotations

import pytest
from ctxfold import ContextEngine, build_arc

from bench_engine import BUDGET, MESSAGES_IN, NEW_TURN, QUERY


def _warm_engine() -> ContextEngine:
    engine = ContextEngine(model="gpt-4o")
    assert engine.optimize(MESSAGES_IN, query=QUERY, budget=BUDGET).report.arc is not None
    return engine


@pytest.mark.benchmark(group="arc-warm")
def test_optimize_and_arc_warm(benchmark) -> None:
    engine = _warm_engine()
    arc = benchmark.pedantic(lambda: engine.optimize(MESSAGES_IN, query=QUERY, budget=BUDGET).report.arc, rounds=10, iterations=1)
    assert arc.topics


@pytest.mark.benchmark(group="arc-warm")
def test_optimize_alone_warm(benchmark) -> None:
    engine = _warm_engine()
    benchmark.pedantic(lambda: engine.optimize(MESSAGES_IN, query=QUERY, budget=BUDGET), rounds=10, iterations=1)


GROWN = [*MESSAGES_IN, NEW_TURN]


@pytest.mark.benchmark(group="arc-incremental")
def test_optimize_and_arc_incremental(benchmark) -> None:
    engine = _warm_engine()
    arc = benchmark.pedantic(lambda: engine.optimize(GROWN, query=QUERY, budget=BUDGET).report.arc, rounds=10, iterations=1)
    assert arc.message_count == len(GROWN)


@pytest.mark.benchmark(group="arc-incremental")
def test_optimize_alone_incremental(benchmark) -> None:
    engine = _warm_engine()
    benchmark.pedantic(lambda: engine.optimize(GROWN, query=QUERY, budget=BUDGET), rounds=10, iterations=1)


@pytest.mark.benchmark(group="arc-cold")
def test_build_arc_cold(benchmark) -> None:
    arc = benchmark.pedantic(lambda: build_arc(MESSAGES_IN), rounds=3, iterations=1, warmup_rounds=1)
    assert arc.topics


@pytest.mark.benchmark(group="arc-cold")
def test_optimize_cold(benchmark) -> None:
    benchmark.pedantic(lambda: ContextEngine(model="gpt-4o").optimize(MESSAGES_IN, query=QUERY, budget=BUDGET),
                       rounds=3, iterations=1, warmup_rounds=1)
