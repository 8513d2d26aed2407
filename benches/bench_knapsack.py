"""select_options on 10,000 items x (keep, summary, drop) under a 128,000-token
budget, against a vectorised numpy greedy (value per token over each item's
increments, the usual quick answer) in the same run. Target: under
20 ms with a gap to the LP bound under 0.5%. The greedy's own gap is printed
next to ours (run with -s to see the lines).

Also the exact dense DP on a small instance (400 items, 6,000 tokens)."""

from __future__ import annotations

import numpy as np
import pytest

import ctxfold

BUDGET = 128_000


def context_items(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Keep / summary / drop: keep costs 20-500 tokens and is worth
    relevance x tokens; a summary costs a fifth and keeps 30-70% of the value."""
    rng = np.random.default_rng(seed)
    keep = rng.integers(20, 500, n)
    relevance = rng.random(n)
    costs = np.zeros((n, 3), dtype=np.int64)
    values = np.zeros((n, 3))
    costs[:, 0] = keep
    costs[:, 1] = keep // 5 + 5
    values[:, 0] = relevance * keep
    values[:, 1] = values[:, 0] * rng.uniform(0.3, 0.7, n)
    return costs, values


COSTS, VALUES = context_items(10_000)


def numpy_greedy(costs: np.ndarray, values: np.ndarray, budget: int) -> np.ndarray:
    """Greedy by value per token over increments drop -> summary -> keep (a
    non-concave pair is taken as one step drop -> keep), cut at the first
    increment that does not fit."""
    n = len(costs)
    s_gain, s_cost = values[:, 1] - values[:, 2], costs[:, 1] - costs[:, 2]
    k_gain, k_cost = values[:, 0] - values[:, 1], costs[:, 0] - costs[:, 1]
    s_eff = s_gain / np.maximum(s_cost, 1)
    k_eff = k_gain / np.maximum(k_cost, 1)
    concave = k_eff <= s_eff
    eff = np.concatenate([np.where(concave, s_eff, (s_gain + k_gain) / np.maximum(s_cost + k_cost, 1)), k_eff])
    cost = np.concatenate([np.where(concave, s_cost, s_cost + k_cost), k_cost])
    item = np.concatenate([np.arange(n), np.arange(n)])
    level = np.concatenate([np.where(concave, 1, 2), np.full(n, 2)])
    valid = np.concatenate([np.ones(n, bool), concave])
    order = np.argsort(-eff[valid], kind="stable")
    cost, item, level = cost[valid][order], item[valid][order], level[valid][order]
    room = budget - costs[:, 2].sum()
    taken = np.cumsum(cost) <= room  # costs >= 0: a prefix
    reached = np.zeros(n, dtype=np.int64)
    np.maximum.at(reached, item[taken], level[taken])
    return np.array([2, 1, 0])[reached]


def value_of(choices: np.ndarray) -> float:
    return float(VALUES[np.arange(len(choices)), choices].sum())


@pytest.mark.benchmark(group="knapsack 10,000 x 3, 128k budget")
def test_select_options_ctxfold(benchmark):
    choices, info = benchmark(ctxfold.select_options, COSTS, VALUES, BUDGET, return_info=True)
    gap = (info["lp_bound"] - info["value"]) / info["lp_bound"]
    greedy = numpy_greedy(COSTS, VALUES, BUDGET)
    greedy_gap = (info["lp_bound"] - value_of(greedy)) / info["lp_bound"]
    benchmark.extra_info.update(gap_to_lp=gap, exact=info["exact"], method=info["method"], greedy_gap_to_lp=greedy_gap)
    print(
        f"\nselect_options: gap to LP bound {gap:.2e} ({info['method']}, exact={info['exact']}); "
        f"numpy greedy: gap {greedy_gap:.2e}; value ratio {info['value'] / value_of(greedy):.5f}"
    )
    assert info["cost"] <= BUDGET and gap < 0.005


@pytest.mark.benchmark(group="knapsack 10,000 x 3, 128k budget")
def test_select_options_numpy_greedy(benchmark):
    choices = benchmark(numpy_greedy, COSTS, VALUES, BUDGET)
    assert COSTS[np.arange(len(choices)), choices].sum() <= BUDGET


SMALL_COSTS, SMALL_VALUES = context_items(400, seed=1)


@pytest.mark.benchmark(group="knapsack 400 x 3, 6k budget (exact DP)")
def test_select_options_dp_ctxfold(benchmark):
    _, info = benchmark(ctxfold.select_options, SMALL_COSTS, SMALL_VALUES, 6_000, return_info=True, method="dp")
    assert info["exact"]


@pytest.mark.benchmark(group="knapsack 400 x 3, 6k budget (exact DP)")
def test_select_options_dp_numpy_greedy(benchmark):
    benchmark(numpy_greedy, SMALL_COSTS, SMALL_VALUES, 6_000)
