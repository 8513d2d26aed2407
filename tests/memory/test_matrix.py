"""A scope's search matrix: the numpy path ranks as the core's `top_k`, a
matrix never changes once made, the cache never goes back a generation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from ctxfold.memory import Memory, matrix as matrix_module
from ctxfold.memory.matrix import MatrixCache, ScopeMatrix
from memory_stores import U1


DIM = 64  # random unit vectors this wide are far apart: no add merges into or supersedes another


def unit_rows(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_numpy_path_matches_core_top_k(store, monkeypatch) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((300, 16)).astype(np.float32)
    store.memories.add_many([Memory(content=f"row {i}") for i in range(300)], scope=U1, embeddings=vectors)
    q = rng.standard_normal(16).astype(np.float32)
    core = store.search(q, scope=U1, k=10)
    monkeypatch.setattr(matrix_module, "CORE_TOP_K_MAX", 0)
    blas = store.search(q, scope=U1, k=10)
    assert [h.id for h in core] == [h.id for h in blas]
    assert np.allclose([h.score for h in core], [h.score for h in blas], atol=1e-5)
    expected = np.argsort(-(vectors / np.linalg.norm(vectors, axis=1, keepdims=True)) @ (q / np.linalg.norm(q)))[:10]
    assert [h.content for h in core] == [f"row {i}" for i in expected]


# --- the matrix itself -----------------------------------------------------------------------------------------
def test_scope_matrix_never_changes_once_made() -> None:
    v = unit_rows(40, seed=6)

    def rows(a: int, b: int) -> tuple[Any, ...]:
        return ([1] * (b - a), [f"m{i}" for i in range(a, b)], [0] * (b - a), [np.inf] * (b - a), v[a:b])

    empty = ScopeMatrix(DIM)
    base = empty.appended(*rows(0, 10))
    assert empty.n == 0 and base.n == 10
    left = base.appended(*rows(10, 20))
    right = base.appended(*rows(20, 25))  # base is no longer the newest: copied
    assert (base.n, left.n, right.n) == (10, 20, 15)
    assert list(base.ids) == [f"m{i}" for i in range(10)]
    assert list(left.ids) == [f"m{i}" for i in range(20)]
    assert list(right.ids) == [f"m{i}" for i in range(10)] + [f"m{i}" for i in range(20, 25)]
    np.testing.assert_array_equal(left.vectors, v[:20])
    np.testing.assert_array_equal(right.vectors, np.concatenate([v[:10], v[20:25]]))
    grown = left
    for a in range(20, 40, 5):  # past the capacity: new buffers, the old matrices keep theirs
        grown = grown.appended(*rows(a, a + 5))
    np.testing.assert_array_equal(grown.vectors, v)
    np.testing.assert_array_equal(left.vectors, v[:20])
    assert len(grown.ids) == 40 and grown.ids[-1] == "m39" and grown.sketch[0].shape == (40, DIM)
    with pytest.raises(IndexError):
        left.ids[20]


def test_matrix_cache_never_goes_back_a_generation() -> None:
    cache = MatrixCache(1 << 30)
    old, new = ScopeMatrix(4), ScopeMatrix(4)
    assert cache.put("k", 5, new) is new
    assert cache.put("k", 4, old) is new and cache.get("k", 4) is None and cache.get("k", 5) is new
    cache.advance("k", 4, 5, lambda m: old)  # not at generation 4: left alone
    assert cache.get("k", 5) is new
    cache.advance("k", 5, 6, lambda m: old)
    assert cache.get("k", 6) is old
