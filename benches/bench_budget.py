"""negotiate_budget and plan_layers per call from Python, 8 layers, against a
pure-Python transcription of the published OpenScroll negotiation (phases 2-3,
without ctxfold's fixes) in the same run. Target: under 10 µs per
call."""

from __future__ import annotations

import numpy as np
import pytest

import ctxfold

TOTAL = 12_000
# (min, ideal, max, priority, elasticity[, fixed]) for the eight standard layers.
LAYERS = [
    (150, 240, 500, 100, 0.0),
    (100, 360, 800, 95, 0.1, True),
    (300, 1123, 3000, 85, 0.6),
    (150, 1200, 1200, 65, 0.7),
    (200, 803, 2400, 88, 0.3),
    (200, 866, 2160, 75, 0.5),
    (500, 5616, 7200, 90, 0.4),
    (120, 120, 120, 100, 0.0),
]
NAMED = dict(zip(["identity", "preferences", "topic", "entity", "arc", "retrieval", "history", "user"], LAYERS))
ARRAY = np.array([list(layer[:5]) + [float(len(layer) == 6 or layer[4] == 0)] for layer in LAYERS])


def openscroll_reference(total: int, layers: list[tuple]) -> list[int]:
    """The published algorithm: fixed layers at min(ideal, max), elastic at
    their minimum, cut-to-fit from the lowest priority, then the
    priority-weighted ideal pass and leftovers by priority."""
    fixed = [len(layer) == 6 and layer[5] or layer[4] == 0 for layer in layers]
    alloc = [min(layer[1], layer[2]) if f else 0 for layer, f in zip(layers, fixed)]
    remaining = total - sum(alloc)
    elastic = [i for i, f in enumerate(fixed) if not f]
    for i in elastic:
        alloc[i] = layers[i][0]
        remaining -= layers[i][0]
    if remaining < 0:
        deficit = -remaining
        for i in sorted(elastic, key=lambda i: layers[i][3]):
            cut = min(deficit, alloc[i])
            alloc[i] -= cut
            deficit -= cut
        return alloc
    total_ideal = sum(max(0, layers[i][1] - layers[i][0]) for i in elastic)
    if total_ideal > 0:
        for i in elastic:
            delta = max(0, layers[i][1] - layers[i][0])
            weight = delta / total_ideal * layers[i][3] / 100
            extra = min(int(remaining * weight), layers[i][2] - alloc[i], delta)
            alloc[i] += extra
            remaining -= extra
            if remaining <= 0:
                break
    for i in sorted(elastic, key=lambda i: -layers[i][3]):
        if remaining <= 0:
            break
        take = min(remaining, layers[i][2] - alloc[i])
        alloc[i] += take
        remaining -= take
    return alloc


@pytest.mark.benchmark(group="negotiate_budget, 8 layers")
def test_negotiate_ctxfold(benchmark):
    alloc = benchmark(ctxfold.negotiate_budget, TOTAL, LAYERS)
    assert alloc.allocated == TOTAL


@pytest.mark.benchmark(group="negotiate_budget, 8 layers")
def test_negotiate_ctxfold_named(benchmark):
    benchmark(ctxfold.negotiate_budget, TOTAL, NAMED)


@pytest.mark.benchmark(group="negotiate_budget, 8 layers")
def test_negotiate_ctxfold_array(benchmark):
    benchmark(ctxfold.negotiate_budget, TOTAL, ARRAY)


@pytest.mark.benchmark(group="negotiate_budget, 8 layers")
def test_negotiate_python_reference(benchmark):
    assert sum(benchmark(openscroll_reference, TOTAL, LAYERS)) <= TOTAL


@pytest.mark.benchmark(group="plan_layers")
def test_plan_layers_ctxfold(benchmark):
    alloc = benchmark(
        ctxfold.plan_layers,
        TOTAL,
        message_count=40,
        conversation_tokens=20_000,
        user_message_tokens=120,
        topic_count=2,
        entity_count=3,
        prioritize_history=True,
    )
    assert alloc.allocated == TOTAL
