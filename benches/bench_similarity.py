"""cosine_similarity on 2,000 x 384 float32 (MiniLM-sized rows) against
scikit-learn's cosine_similarity and numpy's normalise-then-matmul (the BLAS
limit), same run. Targets (issue 3): no slower than scikit-learn, within 1.5x
of numpy. BM25 scoring against a pure-Python transcription."""

from __future__ import annotations

import numpy as np
import pytest

import ctxfold

sklearn_pairwise = pytest.importorskip("sklearn.metrics.pairwise")
X = np.random.default_rng(0).normal(size=(2000, 384)).astype(np.float32)


def numpy_cosine(x):
    n = x / np.linalg.norm(x, axis=1, keepdims=True)
    return n @ n.T


@pytest.mark.benchmark(group="cosine 2000x384 float32")
def test_cosine_ctxfold(benchmark):
    out = benchmark(ctxfold.cosine_similarity, X)
    np.testing.assert_allclose(out[:5], numpy_cosine(X)[:5], atol=1e-5)


@pytest.mark.benchmark(group="cosine 2000x384 float32")
def test_cosine_sklearn(benchmark):
    benchmark(sklearn_pairwise.cosine_similarity, X)


@pytest.mark.benchmark(group="cosine 2000x384 float32")
def test_cosine_numpy(benchmark):
    benchmark(numpy_cosine, X)
