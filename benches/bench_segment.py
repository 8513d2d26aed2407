"""spectral_clustering against scikit-learn's SpectralClustering(affinity=
"precomputed") on n = 200, 500, 2,000 (both assign_labels), same run; target
at least 10x faster at every size, with the same labels.

segment() on 2,000 blocks (target: under 50 ms) for a few ways of asking:
10 and 50 segments, and target_tokens under a max_tokens cap; a numpy
TextTiling-style depth scoring (block comparison, deepest gaps) on the same
matrix is timed alongside as a reference point, not as a peer to beat."""

from __future__ import annotations

import numpy as np
import pytest

import ctxfold

cluster = pytest.importorskip("sklearn.cluster")
metrics = pytest.importorskip("sklearn.metrics")


def affinity(n: int, k: int = 6, seed: int = 0) -> np.ndarray:
    """The external check's input: 6 noisy clusters, clipped cosines."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, k, n)
    centres = rng.normal(size=(k, 48))
    x = centres[labels] + 0.4 * rng.normal(size=(n, 48))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return np.clip(x @ x.T, 0, None)


AFFINITY = {n: affinity(n) for n in (200, 500, 2000)}
CASES = [(n, assign) for n in (200, 500, 2000) for assign in ("discretize", "cluster_qr")]


def sklearn_fit(a: np.ndarray, assign: str) -> np.ndarray:
    model = cluster.SpectralClustering(6, affinity="precomputed", assign_labels=assign, random_state=0)
    return model.fit_predict(a)


# scikit-learn's labels, computed before anything is timed: right after a
# fit, its BLAS threads keep spinning for a while, and a fit between two of
# our benchmarks made the next one's first rounds compete with them for the
# cores.
REFERENCE = {case: sklearn_fit(AFFINITY[case[0]], case[1]) for case in CASES}


@pytest.mark.parametrize(("n", "assign"), CASES)
def test_spectral_ctxfold(benchmark, n: int, assign: str) -> None:
    benchmark.group = f"spectral n={n} {assign}"
    labels = benchmark(ctxfold.spectral_clustering, AFFINITY[n], 6, assign)
    assert metrics.adjusted_rand_score(REFERENCE[(n, assign)], labels) >= 0.95


@pytest.mark.parametrize(("n", "assign"), CASES)
def test_spectral_sklearn(benchmark, n: int, assign: str) -> None:
    benchmark.group = f"spectral n={n} {assign}"
    benchmark.pedantic(sklearn_fit, args=(AFFINITY[n], assign), rounds=5, warmup_rounds=1)


def blocks(n: int = 2000, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Cosine similarities of 2,000 sparse-ish 'message' vectors in topic runs
    of 5-80 blocks (float32, as cosine_similarity returns), and token counts."""
    rng = np.random.default_rng(seed)
    lengths = []
    while sum(lengths) < n:
        lengths.append(int(rng.integers(5, 80)))
    lengths[-1] -= sum(lengths) - n
    topic = np.repeat(np.arange(len(lengths)), lengths)
    centres = rng.normal(size=(len(lengths), 128))
    x = 0.6 * centres[topic] + rng.normal(size=(n, 128))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    tokens = rng.integers(20, 400, n)
    return (x @ x.T).astype(np.float32), tokens, np.cumsum(lengths)[:-1].tolist()


SIM, TOKENS, GOLD = blocks()


def texttiling(s: np.ndarray, k: int, w: int = 6) -> list[int]:
    n = len(s)
    p = np.zeros((n + 1, n + 1))
    p[1:, 1:] = s.astype(np.float64).cumsum(0).cumsum(1)
    t = np.arange(1, n)
    a0, b1 = np.maximum(t - w, 0), np.minimum(t + w, n)
    box = lambda r0, r1, c0, c1: p[r1, c1] - p[r0, c1] - p[r1, c0] + p[r0, c0]  # noqa: E731
    gap = box(a0, t, t, b1) / np.sqrt(np.maximum(box(a0, t, a0, t) * box(t, b1, t, b1), 1e-12))
    left = np.maximum.accumulate(gap)
    right = np.maximum.accumulate(gap[::-1])[::-1]
    depth = left + right - 2 * gap
    return sorted((np.argsort(-depth, kind="stable")[: k - 1] + 1).tolist())


@pytest.mark.parametrize(
    "kwargs",
    [
        {"n_segments": 10},
        {"n_segments": 50},
        {"tokens": TOKENS, "target_tokens": 8000, "max_tokens": 16000},
        {"tokens": TOKENS, "max_tokens": 4000},
    ],
    ids=["n_segments=10", "n_segments=50", "target_tokens=8000,max_tokens=16000", "max_tokens=4000"],
)
def test_segment_ctxfold(benchmark, kwargs) -> None:
    label = ",".join(f"{k}={v}" for k, v in kwargs.items() if k != "tokens")
    benchmark.group = f"segment 2000 blocks {label}"
    out = benchmark(ctxfold.segment, SIM, **kwargs)
    assert (np.diff(out) > 0).all()


def test_segment_texttiling_numpy(benchmark) -> None:
    benchmark.group = "segment 2000 blocks n_segments=50"
    benchmark(texttiling, SIM, 50)
