"""spectral_clustering against scikit-learn (adjusted Rand index, and the very
same labels for the same seed), segment() against brute force over every
split with the objective transcribed from its docstring, its constraints,
and every validation path."""

from __future__ import annotations

import itertools
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.cluster import SpectralClustering
from sklearn.metrics import adjusted_rand_score

from ctxfold import CtxFoldError, InvalidInputError, InvalidTypeError, segment, spectral_clustering


def clustered(n: int, k: int, noise: float = 0.4, seed: int = 0, dim: int = 48) -> tuple[np.ndarray, np.ndarray]:
    """Non-negative cosine affinities of noisy points around k centres."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    centres = rng.normal(size=(k, dim))
    x = centres[labels] + noise * rng.normal(size=(n, dim))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return np.clip(x @ x.T, 0, None), labels


def sklearn_labels(a: np.ndarray, k: int, assign: str, seed: int = 0) -> np.ndarray:
    model = SpectralClustering(k, affinity="precomputed", assign_labels=assign, random_state=seed)
    return model.fit_predict(a)


# ---------------------------------------------------------------- spectral


@pytest.mark.parametrize("assign", ["discretize", "cluster_qr"])
@pytest.mark.parametrize(("n", "k"), [(40, 2), (200, 6), (500, 4), (1600, 5)])
def test_spectral_agrees_with_sklearn(n: int, k: int, assign: str) -> None:
    a, truth = clustered(n, k, seed=n)
    ours = spectral_clustering(a, k, assign_labels=assign)
    assert ours.dtype == np.int64 and ours.shape == (n,)
    assert adjusted_rand_score(sklearn_labels(a, k, assign), ours) >= 0.95
    assert adjusted_rand_score(truth, ours) >= 0.95


@pytest.mark.parametrize("seed", [0, 1, 7, 2**32 - 1])
def test_spectral_same_labels_as_sklearn_for_the_same_seed(seed: int) -> None:
    # Same eigenvectors, same random row for the discretisation: same labels,
    # not just the same partition.
    a, _ = clustered(300, 5, noise=0.5, seed=3)
    ours = spectral_clustering(a, 5, "discretize", seed)
    np.testing.assert_array_equal(ours, sklearn_labels(a, 5, "discretize", seed))


def test_spectral_float32_and_lists() -> None:
    a, truth = clustered(120, 3, seed=5)
    assert adjusted_rand_score(truth, spectral_clustering(a.astype(np.float32), 3)) >= 0.95
    small, _ = clustered(12, 2, noise=0.1, seed=2)
    np.testing.assert_array_equal(spectral_clustering(small.tolist(), 2), spectral_clustering(small, 2))
    # Fortran order and strided views are read correctly.
    np.testing.assert_array_equal(spectral_clustering(np.asfortranarray(a), 3), spectral_clustering(a, 3))
    big = np.zeros((240, 240))
    big[::2, ::2] = a
    np.testing.assert_array_equal(spectral_clustering(big[::2, ::2], 3), spectral_clustering(a, 3))


def test_spectral_disconnected_components() -> None:
    n = 90
    a = np.kron(np.eye(3), np.ones((30, 30)))
    for assign in ("discretize", "cluster_qr"):
        labels = spectral_clustering(a, 3, assign)
        assert adjusted_rand_score(np.repeat([0, 1, 2], 30), labels) == 1.0
    assert spectral_clustering(a, 1).tolist() == [0] * n
    assert spectral_clustering(np.ones((1, 1)), 1).tolist() == [0]


def test_spectral_releases_the_gil() -> None:
    a, _ = clustered(600, 4, seed=9)
    expected = spectral_clustering(a, 4)
    results = []
    threads = [threading.Thread(target=lambda: results.append(spectral_clustering(a, 4))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all((r == expected).all() for r in results)


@pytest.mark.parametrize(
    ("affinity", "n_clusters", "kwargs", "error", "fragment"),
    [
        (np.ones((3, 4)), 2, {}, InvalidInputError, "square"),
        (np.ones((0, 0)), 1, {}, InvalidInputError, "empty"),
        (np.ones(4), 1, {}, InvalidInputError, "2-D"),
        (np.ones((2, 2, 2)), 1, {}, InvalidInputError, "2-D"),
        (np.ones((3, 3), dtype=np.int64), 2, {}, InvalidInputError, "dtype"),
        ("nope", 2, {}, InvalidTypeError, "affinity"),
        (np.array([[1.0, np.nan], [np.nan, 1.0]]), 1, {}, InvalidInputError, "finite"),
        (np.array([[1.0, np.inf], [np.inf, 1.0]]), 1, {}, InvalidInputError, "finite"),
        (np.array([[1.0, 0.5], [0.2, 1.0]]), 1, {}, InvalidInputError, "(A + A.T) / 2"),
        (np.array([[1.0, -0.5], [-0.5, 1.0]]), 1, {}, InvalidInputError, "np.clip"),
        (np.ones((3, 3)), 0, {}, InvalidInputError, "between 1 and 3"),
        (np.ones((3, 3)), 4, {}, InvalidInputError, "between 1 and 3"),
        (np.ones((3, 3)), -1, {}, InvalidInputError, "n_clusters"),
        (np.ones((3, 3)), 2.0, {}, InvalidTypeError, "n_clusters"),
        (np.ones((3, 3)), True, {}, InvalidTypeError, "n_clusters"),
        (np.ones((3, 3)), 2, {"assign_labels": "kmeans"}, InvalidInputError, "cluster_qr"),
        (np.ones((3, 3)), 2, {"assign_labels": 1}, InvalidTypeError, "assign_labels"),
        (np.ones((3, 3)), 2, {"seed": -1}, InvalidInputError, "seed"),
        (np.ones((3, 3)), 2, {"seed": 2**32}, InvalidInputError, "seed"),
        (np.ones((3, 3)), 2, {"seed": "0"}, InvalidTypeError, "seed"),
    ],
)
def test_spectral_rejects_bad_input(affinity, n_clusters, kwargs, error, fragment) -> None:
    with pytest.raises(error) as info:
        spectral_clustering(affinity, n_clusters, **kwargs)
    assert fragment in str(info.value)
    assert isinstance(info.value, CtxFoldError)


# ---------------------------------------------------------------- segment

LENGTH_EXPONENT, THRESHOLD, SHRINK = 0.3, 0.5, 0.3


def objective(s: np.ndarray, boundaries) -> float:
    """The objective segment() documents, transcribed directly."""
    n = len(s)
    off = ~np.eye(n, dtype=bool)
    others = max(n - 1, 1)
    mean = np.where(off, s, 0).sum(1) / others
    var = np.maximum(np.where(off, s * s, 0).sum(1) / others - mean**2, 0)
    scale = np.sqrt(var + SHRINK * var.mean())
    inv = np.where(scale > 1e-12, 1 / np.where(scale > 1e-12, scale, 1), 0)
    z = 0.5 * ((s - mean[:, None]) * inv[:, None] + (s - mean[None, :]) * inv[None, :])
    w = np.maximum(z, 0) - THRESHOLD
    total, start = 0.0, 0
    for end in [*boundaries, n]:
        block = w[start:end, start:end]
        total += (block.sum() - np.trace(block)) / (end - start) ** LENGTH_EXPONENT
        start = end
    return total


def objective_with_costs(s: np.ndarray, boundaries, costs) -> float:
    """The objective less the cost of each boundary placed (boundary_costs)."""
    return objective(s, boundaries) - float(sum(costs[b] for b in boundaries))


def splits(n: int, k: int):
    return itertools.combinations(range(1, n), k - 1)


def sizes(boundaries, tokens) -> list[int]:
    edges = [0, *boundaries, len(tokens)]
    return [int(sum(tokens[a:b])) for a, b in zip(edges, edges[1:])]


similarities = st.integers(2, 8).flatmap(
    lambda n: st.lists(st.floats(0, 1, width=32), min_size=n * n, max_size=n * n).map(
        lambda v: (lambda m: (m + m.T) / 2)(np.array(v, dtype=np.float64).reshape(n, n))
    )
)


@settings(max_examples=60, deadline=None)
@given(s=similarities, data=st.data())
def test_segment_is_optimal_against_brute_force(s: np.ndarray, data) -> None:
    n = len(s)
    k = data.draw(st.integers(1, n))
    got = segment(s, n_segments=k)
    assert got.dtype == np.int64 and len(got) == k - 1
    assert all(0 < b < n for b in got) and list(got) == sorted(set(got.tolist()))
    best = max(objective(s, b) for b in splits(n, k))
    assert objective(s, got.tolist()) >= best - 1e-9 * (1 + abs(best))


@settings(max_examples=60, deadline=None)
@given(s=similarities, data=st.data())
def test_segment_with_token_limits_is_optimal_and_feasible(s: np.ndarray, data) -> None:
    n = len(s)
    tokens = np.array(data.draw(st.lists(st.integers(0, 30), min_size=n, max_size=n)))
    k = data.draw(st.integers(1, n))
    cap = data.draw(st.integers(int(tokens.max()), int(tokens.sum()) + 1))
    floor = data.draw(st.integers(0, max(0, int(tokens.sum()) // k)))
    feasible = [b for b in splits(n, k) if all(floor <= t <= cap for t in sizes(b, tokens))]
    if not feasible:
        with pytest.raises(InvalidInputError):
            segment(s, tokens, n_segments=k, min_tokens=floor, max_tokens=cap)
        return
    got = segment(s, tokens, n_segments=k, min_tokens=floor, max_tokens=cap).tolist()
    assert len(got) == k - 1
    assert all(floor <= t <= cap for t in sizes(got, tokens))
    best = max(objective(s, b) for b in feasible)
    assert objective(s, got) >= best - 1e-9 * (1 + abs(best))


@settings(max_examples=60, deadline=None)
@given(s=similarities, data=st.data())
def test_segment_with_boundary_costs_is_optimal_against_brute_force(s: np.ndarray, data) -> None:
    n = len(s)
    k = data.draw(st.integers(1, n))
    costs = np.array(data.draw(st.lists(st.floats(-3, 3), min_size=n, max_size=n)))
    got = segment(s, n_segments=k, boundary_costs=costs).tolist()
    assert len(got) == k - 1
    best = max(objective_with_costs(s, b, costs) for b in splits(n, k))
    assert objective_with_costs(s, got, costs) >= best - 1e-9 * (1 + abs(best))


def test_segment_boundary_costs_many_segments_against_brute_force() -> None:
    # More than 24 segments: the Lagrangian search must weigh the costs too.
    rng = np.random.default_rng(8)
    n = 27
    m = rng.random((n, n))
    s = (m + m.T) / 2
    costs = rng.normal(0, 2, n)
    for k in range(25, n + 1):
        got = segment(s, n_segments=k, boundary_costs=costs).tolist()
        best = max(objective_with_costs(s, b, costs) for b in splits(n, k))
        assert objective_with_costs(s, got, costs) >= best - 1e-9 * (1 + abs(best))


def test_segment_boundary_costs_move_boundaries_and_zeros_change_nothing() -> None:
    s = planted([5, 5, 5])
    plain = segment(s, n_segments=3).tolist()
    assert segment(s, n_segments=3, boundary_costs=np.zeros(15)).tolist() == plain
    assert segment(s, n_segments=3, boundary_costs=[0] * 15).tolist() == plain
    costs = np.zeros(15)
    costs[plain[0]] = 1e6
    assert plain[0] not in segment(s, n_segments=3, boundary_costs=costs).tolist()
    # A large bonus pulls a boundary to a gap the similarities do not favour.
    bonus = np.zeros(15)
    bonus[2] = -1e6
    assert 2 in segment(s, n_segments=3, boundary_costs=bonus).tolist()


def test_segment_many_segments_against_brute_force() -> None:
    # More than 24 segments: the Lagrangian search (or its exact fallback).
    rng = np.random.default_rng(4)
    for n in (27, 28):
        m = rng.random((n, n))
        s = (m + m.T) / 2
        for k in range(25, n + 1):
            got = segment(s, n_segments=k).tolist()
            best = max(objective(s, b) for b in splits(n, k))
            assert objective(s, got) >= best - 1e-9 * (1 + abs(best))


def reference_best(s: np.ndarray, k: int, tokens=None, floor: int = 0, cap: int | None = None) -> float | None:
    """The best objective over splits into k segments within the token
    limits, by the textbook O(k n^2) DP over the transcribed objective."""
    n = len(s)
    off = ~np.eye(n, dtype=bool)
    others = max(n - 1, 1)
    mean = np.where(off, s, 0).sum(1) / others
    var = np.maximum(np.where(off, s * s, 0).sum(1) / others - mean**2, 0)
    scale = np.sqrt(var + SHRINK * var.mean())
    inv = np.where(scale > 1e-12, 1 / np.where(scale > 1e-12, scale, 1), 0)
    w = np.maximum(0.5 * ((s - mean[:, None]) * inv[:, None] + (s - mean[None, :]) * inv[None, :]), 0) - THRESHOLD
    np.fill_diagonal(w, 0)
    box = np.zeros((n + 1, n + 1))
    box[1:, 1:] = w.cumsum(0).cumsum(1)
    i, j = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    within = box[j, j] - box[i, j] - box[j, i] + box[i, i]
    score = np.where(j > i, within / np.maximum(j - i, 1) ** LENGTH_EXPONENT, -np.inf)
    prefix = np.concatenate([[0], np.cumsum(np.ones(n) if tokens is None else tokens)])
    size = prefix[None, :] - prefix[:, None]
    score = np.where((size >= floor) & (size <= (np.inf if cap is None else cap)), score, -np.inf)
    best = np.full(n + 1, -np.inf)
    best[0] = 0.0
    for _ in range(k):
        best = np.max(best[:, None] + score, axis=0)
    return None if best[n] == -np.inf else float(best[n])


def test_segment_matches_a_reference_dp_on_larger_inputs() -> None:
    # Sizes where the batched score stream, the Lagrangian search on a cached
    # band of short segments (k > 24) and its full check all run.
    rng = np.random.default_rng(11)
    for n in (120, 181):
        lengths = rng.integers(2, 12, n)
        lengths = lengths[np.cumsum(lengths) <= n]
        lengths = np.append(lengths, n - lengths.sum()) if lengths.sum() < n else lengths
        s = planted(lengths.tolist(), seed=n, strength=0.3) + 0.2 * (lambda m: (m + m.T) / 2)(rng.random((n, n)))
        tokens = rng.integers(1, 40, n)
        for k in (3, 24, 25, 40, 60):
            best = reference_best(s, k)
            got = segment(s, n_segments=k).tolist()
            assert len(got) == k - 1 and abs(objective(s, got) - best) <= 1e-9 * (1 + abs(best))
            cap, floor = 3 * int(tokens.sum()) // k + 40, int(tokens.sum()) // (3 * k)
            best = reference_best(s, k, tokens, floor, cap)
            if best is None:
                with pytest.raises(InvalidInputError):
                    segment(s, tokens, n_segments=k, min_tokens=floor, max_tokens=cap)
                continue
            got = segment(s, tokens, n_segments=k, min_tokens=floor, max_tokens=cap).tolist()
            assert all(floor <= t <= cap for t in sizes(got, tokens))
            assert abs(objective(s, got) - best) <= 1e-9 * (1 + abs(best))


@pytest.mark.parametrize(
    ("edits", "fragment"),
    [
        ({(100, 650): 0.5}, "similarity[100, 650]"),  # asymmetric, mirror in another step
        ({(70, 71): -0.25, (500, 500): np.inf}, "similarity[70, 71]"),  # asymmetric first
        ({(50, 50): np.nan, (400, 690): 0.5}, "entry [50, 50] is NaN"),  # non-finite first
        ({(600, 600): np.nan, (100, 650): 0.5}, "similarity[100, 650]"),
    ],
)
def test_segment_large_input_reports_the_first_problem_in_row_order(edits, fragment) -> None:
    # 700 rows: the tiled scan, in parallel; the error is the first in row order.
    s = planted([100] * 7)
    for (i, j), delta in edits.items():
        s[i, j] = delta if not np.isfinite(delta) else s[i, j] + delta
    for a in (s, s.astype(np.float32)):
        with pytest.raises(InvalidInputError) as info:
            segment(a, n_segments=3)
        assert fragment in str(info.value)


def planted(lengths, seed: int = 0, strength: float = 0.5) -> np.ndarray:
    rng = np.random.default_rng(seed)
    topic = np.repeat(np.arange(len(lengths)), lengths)
    s = np.where(topic[:, None] == topic[None, :], strength, 0.05) + 0.1 * rng.random((len(topic),) * 2)
    return (s + s.T) / 2


def test_segment_finds_planted_topics() -> None:
    lengths = [7, 12, 5, 9, 15, 6]
    s = planted(lengths)
    expected = np.cumsum(lengths)[:-1].tolist()
    assert segment(s, n_segments=len(lengths)).tolist() == expected
    assert segment(s.astype(np.float32), n_segments=len(lengths)).tolist() == expected
    assert segment(s.tolist(), n_segments=len(lengths)).tolist() == expected
    # target_tokens: round(54 / 9) = 6 segments with one token per block.
    assert segment(s, target_tokens=9).tolist() == expected


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 30), min_size=1, max_size=12),
    tokens_seed=st.integers(0, 10**6),
    cap_factor=st.floats(1.0, 4.0),
)
def test_segment_never_exceeds_max_tokens(lengths, tokens_seed, cap_factor) -> None:
    s = planted(lengths, seed=tokens_seed)
    tokens = np.random.default_rng(tokens_seed).integers(1, 200, len(s))
    cap = int(tokens.max() * cap_factor)
    got = segment(s, tokens, max_tokens=cap).tolist()
    assert all(t <= cap for t in sizes(got, tokens))
    # Only a cap: the fewest segments that respect it, i.e. what a greedy
    # left-to-right packing needs.
    greedy, run = 1, 0
    for t in tokens:
        if run + t > cap:
            greedy, run = greedy + 1, 0
        run += t
    assert len(got) + 1 == greedy
    k = min(len(s), greedy + 3)
    got = segment(s, tokens, n_segments=k, max_tokens=cap).tolist()
    assert len(got) == k - 1 and all(t <= cap for t in sizes(got, tokens))


def test_segment_target_tokens_moves_into_the_feasible_range() -> None:
    s = planted([10, 10, 10])
    tokens = np.full(30, 100)
    # round(3000 / 2000) = 2 segments, but a cap of 1000 needs 3.
    assert len(segment(s, tokens, target_tokens=2000, max_tokens=1000)) == 2
    # round(3000 / 100) = 30 segments, but a floor of 500 allows 6 at most.
    got = segment(s, tokens, target_tokens=100, min_tokens=500).tolist()
    assert len(got) == 5 and all(t >= 500 for t in sizes(got, tokens))


def test_segment_large_input_is_fast_enough_to_test() -> None:
    lengths = np.random.default_rng(1).integers(5, 60, 60)
    s = planted(lengths, strength=0.3)
    expected = np.cumsum(lengths)[:-1].tolist()
    assert segment(s, n_segments=len(lengths)).tolist() == expected
    assert segment(s.astype(np.float32), n_segments=len(lengths)).tolist() == expected


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "fragment"),
    [
        ((np.ones((3, 4)),), {"n_segments": 1}, InvalidInputError, "square"),
        ((np.ones((0, 0)),), {"n_segments": 1}, InvalidInputError, "empty"),
        ((np.ones((3, 3), dtype=np.int32),), {"n_segments": 1}, InvalidInputError, "dtype"),
        ((None,), {"n_segments": 1}, InvalidTypeError, "similarity"),
        ((np.array([[1.0, np.nan], [np.nan, 1.0]]),), {"n_segments": 1}, InvalidInputError, "finite"),
        ((np.array([[1.0, 0.9], [0.1, 1.0]]),), {"n_segments": 1}, InvalidInputError, "symmetric"),
        ((np.eye(4),), {}, InvalidInputError, "n_segments, target_tokens or max_tokens"),
        ((np.eye(4),), {"n_segments": 0}, InvalidInputError, "between 1 and 4"),
        ((np.eye(4),), {"n_segments": 5}, InvalidInputError, "between 1 and 4"),
        ((np.eye(4),), {"n_segments": -2}, InvalidInputError, "n_segments"),
        ((np.eye(4),), {"n_segments": 2.5}, InvalidTypeError, "n_segments"),
        ((np.eye(4),), {"n_segments": 2, "target_tokens": 2}, InvalidInputError, "not both"),
        ((np.eye(4),), {"target_tokens": 0}, InvalidInputError, "target_tokens"),
        ((np.eye(4), [1, 2, 3]), {"n_segments": 2}, InvalidInputError, "one count per block"),
        ((np.eye(4), [1, 2, -3, 4]), {"n_segments": 2}, InvalidInputError, ">= 0"),
        ((np.eye(4), [1.5, 2, 3, 4]), {"n_segments": 2}, InvalidTypeError, "tokens"),
        ((np.eye(4), [[1, 2], [3, 4]]), {"n_segments": 2}, InvalidInputError, "1-D"),
        ((np.eye(4), "abcd"), {"n_segments": 2}, InvalidTypeError, "tokens"),
        ((np.eye(4), [1, 50, 1, 1]), {"max_tokens": 10}, InvalidInputError, "block 1 alone has 50 tokens"),
        ((np.eye(4), [5, 5, 5, 5]), {"n_segments": 1, "max_tokens": 10}, InvalidInputError, "at least 2"),
        ((np.eye(4), [5, 5, 5, 5]), {"n_segments": 4, "min_tokens": 10}, InvalidInputError, "min_tokens"),
        ((np.eye(4), [5, 5, 5, 5]), {"n_segments": 1, "min_tokens": 30}, InvalidInputError, "fewer than min_tokens"),
        ((np.eye(4),), {"n_segments": 2, "min_tokens": 3, "max_tokens": 2}, InvalidInputError, "larger than max_tokens"),
        ((np.eye(4),), {"max_tokens": -1}, InvalidInputError, "max_tokens"),
        ((np.eye(4),), {"n_segments": 2, "min_tokens": True}, InvalidTypeError, "min_tokens"),
        ((np.eye(4),), {"n_segments": 2, "boundary_costs": [0.0, 1.0, 2.0]}, InvalidInputError, "one cost per block"),
        ((np.eye(4),), {"n_segments": 2, "boundary_costs": [0.0, np.nan, 0.0, 0.0]}, InvalidInputError, "finite"),
        ((np.eye(4),), {"n_segments": 2, "boundary_costs": np.zeros((2, 2))}, InvalidInputError, "1-D"),
        ((np.eye(4),), {"n_segments": 2, "boundary_costs": ["a", "b", "c", "d"]}, InvalidTypeError, "boundary_costs"),
    ],
)
def test_segment_rejects_bad_input(args, kwargs, error, fragment) -> None:
    with pytest.raises(error) as info:
        segment(*args, **kwargs)
    assert fragment in str(info.value)
    assert isinstance(info.value, CtxFoldError)


def test_segment_single_block_and_trivial_counts() -> None:
    assert segment(np.ones((1, 1)), n_segments=1).tolist() == []
    s = planted([3, 3])
    assert segment(s, n_segments=1).tolist() == []
    assert segment(s, n_segments=6).tolist() == [1, 2, 3, 4, 5]
    # Zero-token blocks count toward nothing but still belong to a segment.
    got = segment(s, [0, 10, 0, 0, 10, 0], max_tokens=10).tolist()
    assert len(got) == 1 and all(t <= 10 for t in sizes(got, [0, 10, 0, 0, 10, 0]))
