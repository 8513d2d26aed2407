"""The per-scope embedding matrices searches run on, kept in memory.

Decoding a scope's float32 blobs costs far more than searching them, so a
store keeps each searched scope's matrix (unit rows, C-contiguous) with the
scope's *generation*: a counter in the database that every write to the scope
bumps in the same transaction. A search reads the generation first (one tiny
query) and rebuilds the matrix only when it changed, so writes by another
process or machine invalidate it; a write by this store appends in place.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

import numpy as np
import numpy.typing as npt

from ctxengine import _core

__all__ = ["CORE_TOP_K_MAX", "MatrixCache", "ScopeMatrix", "select_top"]

#: Up to this many matrix elements (rows x dim) the core's `top_k` ranks the
#: rows; above it numpy's BLAS GEMV on the already unit-norm matrix plus a
#: partial sort is used, because `top_k` re-normalises every row per call
#: (a 150 MB copy for 100,000 x 384) and could not answer within 20 ms.
CORE_TOP_K_MAX = 2_000_000


class ScopeMatrix:
    """The searchable part of a scope: keys, category codes, expiry times and
    unit embeddings, in growable arrays (appending is amortised O(rows))."""

    def __init__(self, dim: int, capacity: int = 0) -> None:
        self.dim = dim
        self.n = 0
        capacity = max(capacity, 16)
        self._vectors = np.zeros((capacity, dim), dtype=np.float32)
        self._scope_ids = np.zeros(capacity, dtype=np.int64)
        self._categories = np.zeros(capacity, dtype=np.int8)
        self._expires = np.full(capacity, np.inf, dtype=np.float64)
        self.ids: list[str] = []

    def append(
        self,
        scope_ids: npt.ArrayLike,
        ids: list[str],
        categories: npt.ArrayLike,
        expires: npt.ArrayLike,
        vectors: npt.NDArray[np.float32],
    ) -> None:
        m = len(ids)
        if self.n + m > len(self._vectors):
            capacity = max(self.n + m, 2 * len(self._vectors))
            for name in ("_vectors", "_scope_ids", "_categories", "_expires"):
                old = getattr(self, name)
                shape = (capacity, self.dim) if old.ndim == 2 else (capacity,)
                new = np.zeros(shape, dtype=old.dtype) if name != "_expires" else np.full(shape, np.inf)
                new[: self.n] = old[: self.n]
                setattr(self, name, new)
        end = self.n + m
        self._vectors[self.n : end] = vectors
        self._scope_ids[self.n : end] = scope_ids
        self._categories[self.n : end] = categories
        self._expires[self.n : end] = expires
        self.ids.extend(ids)
        self.n = end

    @property
    def vectors(self) -> npt.NDArray[np.float32]:
        return self._vectors[: self.n]

    @property
    def scope_ids(self) -> npt.NDArray[np.int64]:
        return self._scope_ids[: self.n]

    @property
    def categories(self) -> npt.NDArray[np.int8]:
        return self._categories[: self.n]

    @property
    def expires(self) -> npt.NDArray[np.float64]:
        return self._expires[: self.n]

    @property
    def nbytes(self) -> int:
        return int(self._vectors.nbytes + self._scope_ids.nbytes + self._expires.nbytes) + 64 * self.n


class MatrixCache:
    """An LRU of (generation, ScopeMatrix) by scope key, bounded in bytes."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._data: OrderedDict[Hashable, tuple[object, ScopeMatrix]] = OrderedDict()
        self.lock = threading.RLock()

    def get(self, key: Hashable, generation: object) -> ScopeMatrix | None:
        with self.lock:
            entry = self._data.get(key)
            if entry is None or entry[0] != generation:
                return None
            self._data.move_to_end(key)
            return entry[1]

    def put(self, key: Hashable, generation: object, matrix: ScopeMatrix) -> None:
        with self.lock:
            self._data[key] = (generation, matrix)
            self._data.move_to_end(key)
            total = sum(m.nbytes for _, m in self._data.values())
            while total > self.max_bytes and len(self._data) > 1:
                _, (_, dropped) = self._data.popitem(last=False)
                total -= dropped.nbytes

    def advance(self, key: Hashable, old: object, new: object) -> ScopeMatrix | None:
        """The matrix cached at generation ``old``, now re-keyed to ``new`` (the
        caller appends what it wrote); None if it was not at ``old``."""
        with self.lock:
            entry = self._data.get(key)
            if entry is None or entry[0] != old:
                self._data.pop(key, None)
                return None
            self._data[key] = (new, entry[1])
            return entry[1]

    def discard(self, key: Hashable) -> None:
        with self.lock:
            self._data.pop(key, None)

    def clear(self) -> None:
        with self.lock:
            self._data.clear()


def select_top(
    vectors: npt.NDArray[np.float32], query: npt.NDArray[np.float32], k: int, valid: npt.NDArray[np.bool_] | None
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Indices (into ``vectors``) and cosine scores of the ``k`` best valid
    rows, best first, ties to the lower index."""
    n = len(vectors)
    if k == 0 or n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    if n * vectors.shape[1] <= CORE_TOP_K_MAX:
        if valid is None or valid.all():
            idx, scores = _core.top_k(query, vectors, k)
            return np.asarray(idx, dtype=np.int64), np.asarray(scores, dtype=np.float32)
        rows = np.flatnonzero(valid)
        if len(rows) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        idx, scores = _core.top_k(query, np.ascontiguousarray(vectors[rows]), k)
        return rows[np.asarray(idx, dtype=np.int64)], np.asarray(scores, dtype=np.float32)
    sims = vectors @ query
    if valid is not None:
        sims[~valid] = -np.inf
    k = min(k, n)
    part = np.argpartition(-sims, k - 1)[:k] if k < n else np.arange(n)
    order = np.lexsort((part, -sims[part]))
    best = part[order]
    best = best[np.isfinite(sims[best])]
    return best.astype(np.int64), np.clip(sims[best], -1.0, 1.0).astype(np.float32)
