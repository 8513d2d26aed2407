"""negotiate_budget and plan_layers: the invariants on random layers and
situations, the input forms, the documented fixes, and every error path."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxfold as ce
from ctxfold import InvalidInputError, InvalidTypeError

STANDARD = ["identity", "preferences", "topic", "entity", "conversation_arc", "retrieval", "history", "user_message"]


@st.composite
def layer_specs(draw):
    lo = draw(st.integers(0, 2_000))
    ideal = lo + draw(st.integers(0, 2_000))
    hi = ideal + draw(st.integers(0, 2_000))
    priority = draw(st.one_of(st.integers(0, 100), st.floats(0, 100)))
    elasticity = draw(st.one_of(st.just(0.0), st.floats(0, 1)))
    if draw(st.booleans()):
        return (lo, ideal, hi, priority, elasticity, draw(st.booleans()))
    return (lo, ideal, hi, priority, elasticity)


def check_allocation(total, layers, alloc):
    tokens = alloc.allocations
    assert tokens.dtype == np.int64 and len(tokens) == len(layers) == len(alloc)
    assert alloc.allocated == int(tokens.sum()) <= total == alloc.budget
    assert alloc.unallocated == total - alloc.allocated
    for i, (spec, t, cut) in enumerate(zip(layers, tokens.tolist(), alloc.cut.tolist())):
        lo, ideal, hi = spec[0], spec[1], spec[2]
        fixed = spec[5] if len(spec) == 6 else spec[4] == 0
        assert 0 <= t <= hi, (i, t, spec)
        assert t == 0 or t >= lo, (i, t, spec)
        assert cut == ((t == 0 and lo > 0 and t < lo) or (fixed and t < ideal)), (i, t, spec, cut)
    if alloc.unallocated:
        for spec, t, cut in zip(layers, tokens.tolist(), alloc.cut.tolist()):
            dropped = cut and t == 0 and spec[0] > alloc.unallocated
            assert dropped or t == spec[2], "tokens left while a layer is below its max"


@settings(max_examples=400, deadline=None)
@given(st.lists(layer_specs(), max_size=9), st.integers(0, 15_000))
def test_never_above_total_and_every_allocation_within_bounds(layers, total):
    alloc = ce.negotiate_budget(total, layers)
    check_allocation(total, layers, alloc)
    fixed = [(s[5] if len(s) == 6 else s[4] == 0) for s in layers]
    first = sum(s[1] if f else s[0] for s, f in zip(layers, fixed))
    if first <= total:
        assert not alloc.cut.any()
        assert all(t >= s[0] for s, t in zip(layers, alloc.allocations.tolist()))
    if sum(s[1] for s in layers) <= total:
        assert all(t >= s[1] for s, t in zip(layers, alloc.allocations.tolist()))


@settings(max_examples=100, deadline=None)
@given(st.lists(layer_specs(), min_size=1, max_size=9), st.integers(0, 15_000))
def test_input_forms_agree(layers, total):
    as_list = ce.negotiate_budget(total, layers).allocations
    as_tuple = ce.negotiate_budget(total, tuple(list(s) for s in layers)).allocations
    names = [f"L{i}" for i in range(len(layers))]
    as_dict = ce.negotiate_budget(total, dict(zip(names, layers)))
    array = np.array([list(s[:5]) + [float(s[5] if len(s) == 6 else s[4] == 0)] for s in layers])
    as_array = ce.negotiate_budget(total, array).allocations
    assert as_list.tolist() == as_tuple.tolist() == as_dict.allocations.tolist() == as_array.tolist()
    assert as_dict.names == names
    assert as_dict.to_dict() == dict(zip(names, as_list.tolist()))


def test_phases():
    layers = [(10, 20, 30, 100, 0.0), (0, 50, 100, 50, 0.5), (0, 50, 60, 80, 0.5)]
    # Ideals first, then the highest priority up to its max.
    assert ce.negotiate_budget(130, layers).allocations.tolist() == [20, 50, 60]
    # Elastic layers reach their max before a fixed layer grows.
    assert ce.negotiate_budget(1000, layers).allocations.tolist() == [30, 100, 60]
    # Short of the ideals: shares by gap x priority.
    assert ce.negotiate_budget(90, [(0, 100, 100, 100, 0.5), (0, 100, 100, 50, 0.5)]).allocations.tolist() == [60, 30]
    # Minimums do not fit: the lowest priority is dropped and reported.
    alloc = ce.negotiate_budget(
        500, [(100, 100, 100, 100, 0.0), (300, 400, 500, 70, 0.6), (200, 300, 400, 60, 0.7), (50, 60, 400, 90, 0.2)]
    )
    assert alloc.allocations[2] == 0 and alloc.cut.tolist() == [False, False, True, False]
    assert alloc.allocated == 500
    # A fixed layer shrinks to its minimum before anything is dropped.
    alloc = ce.negotiate_budget(250, [(100, 300, 300, 100, 0.0), (100, 100, 100, 50, 0.5)])
    assert alloc.allocations.tolist() == [150, 100] and alloc.cut.tolist() == [True, False]
    # The sixth field overrides "fixed when elasticity is 0".
    assert ce.negotiate_budget(400, [(0, 100, 300, 50, 0.5, True), (0, 100, 300, 50, 0.0, False)]).allocations.tolist() == [100, 300]


def test_result_object():
    alloc = ce.negotiate_budget(100, {"a": (0, 40, 60, 90, 0.5), "b": (10, 10, 10, 100, 0.0)})
    assert alloc["a"] == 60 and alloc["b"] == 10 and alloc[0] == 60 and alloc[-1] == 10
    assert alloc.names == ["a", "b"] and alloc.budget == 100 and alloc.unallocated == 30
    assert alloc.layers == [(0, 40, 60, 90.0, 0.5, False), (10, 10, 10, 100.0, 0.0, True)]
    assert "a" in repr(alloc) and "unallocated=30" in repr(alloc)
    with pytest.raises(KeyError, match='no layer named "c"'):
        alloc["c"]
    with pytest.raises(IndexError):
        alloc[2]
    with pytest.raises(InvalidTypeError):
        alloc[1.5]
    unnamed = ce.negotiate_budget(10, [(0, 5, 5, 1, 0.5)], names=None)
    assert unnamed.names is None and unnamed.to_dict() == {0: 5}
    named = ce.negotiate_budget(10, [(0, 5, 5, 1, 0.5)], names=["x"])
    assert named["x"] == 5
    assert ce.negotiate_budget(0, []).allocations.tolist() == []


@pytest.mark.parametrize(
    ("args", "error", "pattern"),
    [
        ((-1, []), InvalidInputError, "budget: must be an int >= 0"),
        ((1.5, []), InvalidTypeError, "budget: expected int"),
        ((10, [(5, 1, 10, 1, 0.5)]), InvalidInputError, r"layers\[0\].ideal: needs min <= ideal <= max"),
        ((10, [(0, 1, 1, 1, 0.5), (0, 2, 1, 1, 0.5)]), InvalidInputError, r"layers\[1\].ideal"),
        ((10, [(0, 1, 1, 101, 0.5)]), InvalidInputError, r"layers\[0\].priority: must be in 0..=100"),
        ((10, [(0, 1, 1, float("nan"), 0.5)]), InvalidInputError, r"layers\[0\].priority"),
        ((10, [(0, 1, 1, 1, 1.5)]), InvalidInputError, r"layers\[0\].elasticity: must be in 0..=1"),
        ((10, [(0, 1, 1, 1)]), InvalidInputError, r"layers\[0\]: expected a tuple .* got 4 values"),
        ((10, [(-1, 1, 1, 1, 0.5)]), InvalidInputError, r"layers\[0\].min: must be an int >= 0"),
        ((10, [(0, 1.5, 2, 1, 0.5)]), InvalidTypeError, r"layers\[0\].ideal: expected int"),
        ((10, [(0, 1, 1, "high", 0.5)]), InvalidTypeError, r"layers\[0\].priority: expected a number"),
        ((10, [(0, 1, 1, True, 0.5)]), InvalidTypeError, r"layers\[0\].priority"),
        ((10, [(0, 1, 1, 1, 0.5, 1)]), InvalidTypeError, r"layers\[0\].fixed: expected bool"),
        ((10, [5]), InvalidTypeError, r"layers\[0\]: expected a tuple"),
        ((10, "layers"), InvalidTypeError, "layers: expected a list"),
        ((10, {1: (0, 1, 1, 1, 0.5)}), InvalidTypeError, r"layers \(a dict key\): expected str"),
        ((10, np.zeros((2, 4))), InvalidInputError, "layers: expected 5 or 6 columns"),
        ((10, np.array([[0, 0.5, 1, 1, 0.5]])), InvalidInputError, r"layers\[0\].ideal: must be a whole number"),
        ((10, np.array([[0, 1, np.inf, 1, 0.5]])), InvalidInputError, r"layers\[0\].max: must be a whole number"),
        ((10, np.zeros(5)), InvalidInputError, "layers: expected a 2-D array"),
        ((10, [(0, 1, 1, 1, 0.5)], ["a", "b"]), InvalidInputError, "names: 2 names for 1 layers"),
        ((10, [(0, 1, 1, 1, 0.5)], "a"), InvalidTypeError, "names: expected a list"),
        ((10, [(0, 1, 1, 1, 0.5)], [1]), InvalidTypeError, r"names\[0\]: expected str"),
        ((10, {"a": (0, 1, 1, 1, 0.5)}, ["a"]), InvalidInputError, "names: the layers are a dict"),
    ],
)
def test_negotiate_errors_name_the_argument(args, error, pattern):
    with pytest.raises(error, match=pattern):
        ce.negotiate_budget(*args)


@st.composite
def situations(draw):
    return {
        "message_count": draw(st.integers(0, 500)),
        "conversation_tokens": draw(st.integers(0, 300_000)),
        "user_message_tokens": draw(st.integers(0, 5_000)),
        "topic_count": draw(st.integers(0, 6)),
        "entity_count": draw(st.integers(0, 10)),
        "active_conversation": draw(st.sampled_from([None, True, False])),
        "knowledge_depth": draw(st.sampled_from(["minimal", "standard", "deep"])),
        "prioritize_history": draw(st.booleans()),
        "topic_bundle_tokens": draw(st.integers(0, 20_000)),
    }


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 200_000), situations())
def test_plan_layers_invariants(total, situation):
    alloc = ce.plan_layers(total, **situation)
    assert alloc.names == STANDARD
    check_allocation(total, alloc.layers, alloc)
    for lo, ideal, hi, priority, elasticity, _ in alloc.layers:
        assert lo <= ideal <= hi and 0 <= priority <= 100 and 0 <= elasticity <= 1
    # History never gets more than the conversation has.
    assert alloc["history"] <= situation["conversation_tokens"]
    assert alloc["entity"] <= 400 * situation["entity_count"]


def test_plan_layers_formulas():
    alloc = ce.plan_layers(
        12_000,
        message_count=40,
        conversation_tokens=20_000,
        user_message_tokens=120,
        topic_count=2,
        entity_count=3,
        prioritize_history=True,
        topic_bundle_tokens=500,
    )
    spec = dict(zip(alloc.names, alloc.layers))
    assert spec["identity"][:3] == (150, 240, 500)  # min(400, 2%)
    assert spec["preferences"][1] == 360  # 3%
    assert spec["topic"][1] == 1123 and spec["topic"][3] == 85  # 12% x 1.3 x (1 - 0.4)
    assert spec["entity"][1] == 1200  # 6% x 1.8 capped at 400 per entity
    assert spec["conversation_arc"][1] == 803  # 150 x log2(41)
    assert spec["retrieval"][1] == 866  # 10% x (1 - 500 / 1800)
    assert spec["history"][1] == 5616 and spec["history"][3] == 90  # 30% x 1.3 x 1.2
    assert spec["user_message"][:3] == (120, 120, 120)
    assert alloc.allocated == 12_000
    assert all(t >= s[1] for t, s in zip(alloc.allocations.tolist(), alloc.layers))


def test_plan_layers_fixes():
    # Identity's published ideal min(400, 2% of 5,000) = 100 is under its 150 floor.
    assert ce.plan_layers(5_000, message_count=3, conversation_tokens=400).layers[0][1] == 150
    # Nothing to put in entity, arc or history: they get nothing, even from leftovers.
    alloc = ce.plan_layers(200_000)
    assert alloc["entity"] == alloc["conversation_arc"] == alloc["history"] == 0
    assert alloc.unallocated > 0
    # A budget smaller than the fixed layers: cut, never over.
    alloc = ce.plan_layers(300, message_count=5, conversation_tokens=1_000, user_message_tokens=200)
    assert alloc.allocated <= 300 and alloc.cut.any()
    assert ce.plan_layers(0, message_count=5).allocated == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"budget": -5}, InvalidInputError, "budget: must be an int >= 0"),
        ({"budget": 100, "message_count": -1}, InvalidInputError, "message_count: must be an int >= 0"),
        ({"budget": 100, "conversation_tokens": 1.5}, InvalidTypeError, "conversation_tokens: expected int"),
        ({"budget": 100, "topic_count": True}, InvalidTypeError, "topic_count: expected int"),
        ({"budget": 100, "knowledge_depth": "shallow"}, InvalidInputError, "knowledge_depth: unknown depth"),
        ({"budget": 100, "knowledge_depth": 2}, InvalidTypeError, "knowledge_depth: expected str"),
        ({"budget": 100, "prioritize_history": "yes"}, InvalidTypeError, "prioritize_history: expected bool"),
        ({"budget": 100, "active_conversation": 1}, InvalidTypeError, "active_conversation: expected bool"),
    ],
)
def test_plan_layers_errors_name_the_argument(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        ce.plan_layers(**kwargs)
