"""The per-scope embedding matrices searches run on, kept in memory.

Decoding a scope's float32 blobs costs far more than searching them, so a
store keeps each searched scope's matrix (unit rows, C-contiguous) with the
scope's *generation*: a counter in the database that every write to the scope
bumps in the same transaction. A search reads the generation first (one tiny
query) and rebuilds the matrix only when it changed, so writes by another
process or machine invalidate it; a write by this store appends in place.

Searching is the core's `top_k_normalized`: exact dot products over the unit
rows, read in place, in parallel, GIL released. Alongside the float32 rows a
matrix keeps their int8 sketch (`quantize_rows`, built once per appended row):
for a large scope the first pass reads the 1-byte codes and only the few rows
whose proven error bound reaches the top k are rescored from the float32 rows,
so results are identical to scoring every float32 row. Memory: per row
``5 * dim + 8`` bytes of vectors and sketch (float32 + int8 + scale and bound),
plus ids and metadata; 100,000 x 384 is about 193 MB (154 MB float32, 39 MB
sketch).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable

import numpy as np
import numpy.typing as npt

from ctxfold import _core

__all__ = ["CORE_TOP_K_MAX", "MatrixCache", "ScopeMatrix", "select_top"]

#: Up to this many matrix elements (rows x dim) a search reads the float32
#: rows directly; above it the int8 sketch first (a quarter of the memory
#: traffic; 100,000 x 384 ranks in a few ms instead of ~25 ms). Both give the
#: same results.
CORE_TOP_K_MAX = 1 << 18


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
        self._codes = np.zeros((capacity, dim), dtype=np.int8)
        self._bounds = np.zeros((capacity, 2), dtype=np.float32)
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
            for name in ("_vectors", "_scope_ids", "_categories", "_expires", "_codes", "_bounds"):
                old = getattr(self, name)
                shape = (capacity, *old.shape[1:])
                new = np.zeros(shape, dtype=old.dtype) if name != "_expires" else np.full(shape, np.inf)
                new[: self.n] = old[: self.n]
                setattr(self, name, new)
        end = self.n + m
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(m, self.dim)
        if m:
            self._codes[self.n : end], self._bounds[self.n : end] = _core.quantize_rows(vectors)
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
    def sketch(self) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
        """The int8 sketch of `vectors` (see `ctxfold._core.quantize_rows`)."""
        return self._codes[: self.n], self._bounds[: self.n]

    @property
    def nbytes(self) -> int:
        arrays = (self._vectors, self._scope_ids, self._expires, self._codes, self._bounds, self._categories)
        return sum(int(a.nbytes) for a in arrays) + 64 * self.n


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
    vectors: npt.NDArray[np.float32],
    query: npt.NDArray[np.float32],
    k: int,
    valid: npt.NDArray[np.bool_] | None,
    sketch: tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]] | None = None,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Indices (into ``vectors``, unit rows) and cosine scores of the ``k``
    best valid rows, best first, ties to the lower index; ``sketch`` (of
    ``vectors``) is read first for large matrices, with the same results."""
    n = len(vectors)
    if k == 0 or n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    if sketch is not None and n * vectors.shape[1] <= CORE_TOP_K_MAX:
        sketch = None
    idx, scores = _core.top_k_normalized(
        np.ascontiguousarray(query, dtype=np.float32),
        np.ascontiguousarray(vectors, dtype=np.float32),
        k,
        valid=valid,
        sketch=sketch,
    )
    return np.asarray(idx, dtype=np.int64), np.asarray(scores, dtype=np.float32)
