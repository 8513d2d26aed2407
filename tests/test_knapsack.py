"""select_options: brute-force optimality on small inputs, the constraints,
ties, bounds of the core method, and every error path."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxfold as ce
from ctxfold import BudgetError, InvalidInputError, InvalidTypeError


def plan_value(costs, values, choices):
    rows = np.arange(len(choices))
    return float(values[rows, choices].sum()), int(costs[rows, choices].sum())


def brute_force(costs, values, budget, protected, groups):
    """The optimal value by enumeration (vectorised), or None if infeasible."""
    n, k = costs.shape
    if n == 0:
        return 0.0
    combos = np.array(list(itertools.product(range(k), repeat=n)), dtype=np.int64)
    rows = np.arange(n)
    ok = costs[rows, combos].sum(axis=1) <= budget
    ok &= (combos[:, protected] == 0).all(axis=1)
    for g in set(groups[groups >= 0].tolist()):
        members = np.flatnonzero(groups == g)
        ok &= (combos[:, members] == combos[:, members[:1]]).all(axis=1)
    if not ok.any():
        return None
    return float(values[rows, combos[ok]].sum(axis=1).max())


@st.composite
def instances(draw, max_items=10):
    k = draw(st.integers(1, 3))
    limit = {1: max_items, 2: max_items, 3: 9}[k]
    n = draw(st.integers(0, limit))
    costs = np.array(draw(st.lists(st.integers(0, 40), min_size=n * k, max_size=n * k)), dtype=np.int64).reshape(n, k)
    values = np.array(
        draw(st.lists(st.floats(-5, 20, allow_nan=False, allow_infinity=False), min_size=n * k, max_size=n * k)),
        dtype=np.float64,
    ).reshape(n, k)
    protected = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    if n and draw(st.booleans()):
        protected[:] = False
    groups = np.array(draw(st.lists(st.integers(-1, 2), min_size=n, max_size=n)), dtype=np.int64)
    budget = draw(st.integers(0, 40 * max(n, 1)))
    return costs, values, budget, protected, groups


def check_constraints(costs, values, budget, protected, groups, choices):
    assert choices.dtype == np.int64 and choices.shape == (costs.shape[0],)
    _, cost = plan_value(costs, values, choices)
    assert cost <= budget
    assert (choices[protected] == 0).all()
    for g in set(groups[groups >= 0].tolist()):
        assert len(set(choices[groups == g].tolist())) == 1


@settings(max_examples=300, deadline=None)
@given(instances())
def test_equals_brute_force_up_to_10_items(instance):
    costs, values, budget, protected, groups = instance
    best = brute_force(costs, values, budget, protected, groups)
    for method in ("auto", "dp", "core"):
        if best is None:
            with pytest.raises(BudgetError):
                ce.select_options(costs, values, budget, protected, groups, method=method)
            continue
        choices, info = ce.select_options(costs, values, budget, protected, groups, return_info=True, method=method)
        check_constraints(costs, values, budget, protected, groups, choices)
        value, cost = plan_value(costs, values, choices)
        tol = 1e-9 * (1 + np.abs(values).sum())
        assert value == pytest.approx(best, abs=tol), method
        assert info["value"] == pytest.approx(value, abs=tol) and info["cost"] == cost
        assert info["exact"] and info["gap"] == 0.0
        assert info["lp_bound"] >= best - tol


@settings(max_examples=100, deadline=None)
@given(instances(), st.integers(0, 60))
def test_larger_budget_never_lowers_the_optimum(instance, extra):
    costs, values, budget, protected, groups = instance
    try:
        _, small = ce.select_options(costs, values, budget, protected, groups, return_info=True)
    except BudgetError:
        return
    _, large = ce.select_options(costs, values, budget + extra, protected, groups, return_info=True)
    assert small["exact"] and large["exact"]
    assert large["value"] >= small["value"] - 1e-9 * (1 + np.abs(values).sum())


def random_context(rng, n, k=3):
    """Keep / summary / drop options with relevance-scaled values."""
    keep = rng.integers(20, 500, n)
    costs = np.zeros((n, k), dtype=np.int64)
    values = np.zeros((n, k))
    costs[:, 0] = keep
    relevance = rng.random(n)
    values[:, 0] = relevance * keep
    for j in range(1, k - 1):
        costs[:, j] = keep // (3 * j + 2) + 5
        values[:, j] = values[:, 0] * rng.uniform(0.2, 0.7, n) / j
    return costs, values


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(30, 400), st.integers(200, 20_000))
def test_core_gap_is_never_negative_and_never_exceeded(seed, n, budget):
    rng = np.random.default_rng(seed)
    costs, values = random_context(rng, n)
    protected = rng.random(n) < 0.05
    groups = np.where(rng.random(n) < 0.2, rng.integers(0, n // 4 + 1, n), -1)
    try:
        choices, info = ce.select_options(costs, values, budget, protected, groups, return_info=True, method="core")
    except BudgetError:
        with pytest.raises(BudgetError):
            ce.select_options(costs, values, budget, protected, groups, method="dp")
        return
    check_constraints(costs, values, budget, protected, groups, choices)
    value, _ = plan_value(costs, values, choices)
    tol = 1e-9 * (1 + np.abs(values).sum())
    assert info["gap"] >= 0
    assert value >= info["upper_bound"] - info["gap"] - tol
    assert info["lp_bound"] >= info["upper_bound"] - tol
    _, exact = ce.select_options(costs, values, budget, protected, groups, return_info=True, method="dp")
    assert exact["exact"]
    assert value <= exact["value"] + tol
    assert exact["value"] <= info["upper_bound"] + tol
    if info["exact"]:
        assert value == pytest.approx(exact["value"], abs=tol)


def test_large_instance_stays_within_half_a_percent_of_the_lp_bound():
    rng = np.random.default_rng(0)
    costs, values = random_context(rng, 10_000)
    choices, info = ce.select_options(costs, values, 128_000, return_info=True)
    assert info["cost"] <= 128_000
    assert info["method"] == "core"
    assert (info["lp_bound"] - info["value"]) / info["lp_bound"] < 0.005


def test_ties_prefer_recent_items():
    costs = np.array([[10, 0]] * 3)
    values = np.array([[1.0, 0.0]] * 3)
    assert ce.select_options(costs, values, 20).tolist() == [1, 0, 0]
    assert ce.select_options(costs, values, 20, prefer_recent=False).tolist() == [0, 0, 1]
    # 0.1 + 0.2 > 0.3 in floating point, but it is a tie.
    values = np.array([[0.1, 0.0], [0.2, 0.0], [0.3, 0.0]])
    costs = np.array([[1, 0], [1, 0], [2, 0]])
    assert ce.select_options(costs, values, 2).tolist() == [1, 1, 0]


def test_tool_call_and_result_move_together():
    costs = np.array([[5, 0], [100, 0], [50, 0]])
    values = np.array([[3.0, 0.0], [3.0, 0.0], [2.0, 0.0]])
    groups = np.array([7, 7, -1])
    assert ce.select_options(costs, values, 60, groups=groups).tolist() == [1, 1, 0]
    assert ce.select_options(costs, values, 60).tolist() == [0, 1, 0]
    protected = np.array([True, False, False])
    assert ce.select_options(costs, values, 105, protected, groups).tolist() == [0, 0, 1]


def test_lists_and_other_integer_dtypes_are_accepted():
    costs = [[10, 3, 0], [20, 5, 0]]
    values = [[3, 1, 0], [5, 2, 0]]
    expected = ce.select_options(np.array(costs), np.array(values, dtype=float), 15)
    assert ce.select_options(costs, values, 15).tolist() == expected.tolist()
    assert ce.select_options(np.array(costs, dtype=np.int32), np.array(values, dtype=np.float32), 15).tolist() == expected.tolist()
    assert ce.select_options(np.array(costs, dtype=np.uint16), values, 25, [False, True], [-1, -1]).tolist() == [1, 0]
    # Non-contiguous views are read in place.
    wide = np.array(costs, dtype=np.int64)[:, ::-1][:, ::-1]
    assert ce.select_options(wide, np.array(values, dtype=float), 15).tolist() == expected.tolist()
    assert ce.select_options(np.zeros((0, 3), dtype=np.int64), np.zeros((0, 3)), 0).tolist() == []


def test_info_reports_the_plan():
    costs = np.array([[10, 3, 0], [20, 5, 0], [5, 1, 0]])
    values = np.array([[3.0, 1, 0], [5, 2, 0], [1, 0.5, 0]])
    choices, info = ce.select_options(costs, values, 20, return_info=True)
    assert set(info) == {"value", "cost", "upper_bound", "gap", "lp_bound", "exact", "method"}
    assert info["value"] == plan_value(costs, values, choices)[0]
    assert info["exact"] and info["method"] == "dp" and info["upper_bound"] == info["value"]
    _, info = ce.select_options(costs, values, 1000, return_info=True)
    assert info["method"] == "trivial" and info["value"] == 9.0


def test_budget_error_says_by_how_much():
    costs = np.array([[30, 0], [40, 0]])
    values = np.ones((2, 2))
    with pytest.raises(BudgetError, match=r"70 tokens but the budget is 50 \(20 over\)"):
        ce.select_options(costs, values, 50, protected=np.array([True, True]))
    # A protected member drags its whole group to option 0.
    with pytest.raises(BudgetError, match="protected"):
        ce.select_options(costs, values, 50, protected=[True, False], groups=[1, 1])
    with pytest.raises(BudgetError, match="cheapest"):
        ce.select_options(np.array([[30, 10], [40, 10]]), values, 15)
    assert issubclass(BudgetError, ValueError)


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"values": np.zeros((2, 2))}, InvalidInputError, "values: shape"),
        ({"costs": np.array([1, 2])}, InvalidInputError, "costs: expected a 2-D"),
        ({"costs": np.array([[1.0, 0.0], [1.0, 0.0], [2.0, 0.0]])}, InvalidInputError, "costs: expected .* got dtype"),
        ({"costs": np.array([[1, 0], [-1, 0], [2, 0]])}, InvalidInputError, r"costs\[1, 0\] = -1 is negative"),
        ({"costs": np.array([[2**63, 0]] * 3, dtype=np.uint64)}, InvalidInputError, "costs: dtype .* without loss"),
        ({"costs": [[1, 0], [2]]}, InvalidInputError, "costs: cannot be read"),
        ({"costs": "abc"}, InvalidTypeError, "costs: expected"),
        ({"values": np.array([[1.0, 0], [np.nan, 0], [0, 0]])}, InvalidInputError, r"values\[1, 0\] = NaN"),
        ({"values": np.array([[1.0, 0], [0, 0], [np.inf, 0]])}, InvalidInputError, r"values\[2, 0\] = inf"),
        ({"values": np.array([["a", "b"]] * 3)}, InvalidInputError, "values: expected"),
        ({"budget": -1}, InvalidInputError, "budget: must be an int >= 0"),
        ({"budget": 1.5}, InvalidTypeError, "budget: expected int"),
        ({"protected": [True]}, InvalidInputError, "protected: has 1 flags but there are 3 items"),
        ({"protected": np.array([1, 0, 0])}, InvalidInputError, "protected: expected a 1-D bool"),
        ({"groups": [0, 0]}, InvalidInputError, "groups: has 2 ids"),
        ({"groups": [0, -2, 1]}, InvalidInputError, r"groups\[1\] = -2"),
        ({"groups": [0.5, 1, 1]}, InvalidInputError, "groups: expected"),
        ({"prefer_recent": 1}, InvalidTypeError, "prefer_recent: expected bool"),
        ({"return_info": "yes"}, InvalidTypeError, "return_info: expected bool"),
        ({"method": "greedy"}, InvalidInputError, "method: unknown method"),
        ({"method": 3}, InvalidTypeError, "method: expected str"),
    ],
)
def test_invalid_input_names_the_argument(kwargs, error, pattern):
    args = {"costs": np.array([[1, 0], [1, 0], [2, 0]]), "values": np.ones((3, 2)), "budget": 3}
    args.update(kwargs)
    with pytest.raises(error, match=pattern):
        ce.select_options(**args)


def test_zero_options_and_forced_dp_limits():
    with pytest.raises(InvalidInputError, match="at least one option"):
        ce.select_options(np.zeros((2, 0), dtype=np.int64), np.zeros((2, 0)), 5)
    # Random costs defeat the gcd reduction: 40,000 options x 1e9 tokens is refused.
    costs = np.random.default_rng(1).integers(10**5, 10**6, (20_000, 2))
    costs[:, 1] = 0
    with pytest.raises(InvalidInputError, match="method: the exact DP"):
        ce.select_options(costs, np.ones((20_000, 2)), 10**9, method="dp")
