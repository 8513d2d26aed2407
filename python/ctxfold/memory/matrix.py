"""The per-scope embedding matrices searches run on, kept in memory.

Decoding a scope's float32 blobs costs far more than searching them, so a
store keeps each searched scope's matrix (unit rows, C-contiguous) with the
scope's *generation*: a counter in the database that every write to the scope
bumps in the same transaction. A search reads the generation first (one tiny
query) and uses the cached matrix only when it is the same, so writes by
another process or machine are seen. A store changes its cache only after a
write has committed (a rolled-back write leaves it as it was); a matrix that
is behind is brought up to date with the rows appended since (the store
stamps each row with its generation), or rebuilt when rows were removed.

A `ScopeMatrix` never changes once made: a reader takes one and can use it
while writers swap in new ones (`MatrixCache`). Appending makes a new matrix
that shares the column buffers of the old one when it extends the newest
matrix cut from them (the rows past the old one's end are written once and
never read through it), and copies them otherwise, so appending stays
amortised O(rows added).

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
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from ctxfold import _core

__all__ = ["CORE_TOP_K_MAX", "MatrixCache", "ScopeMatrix", "select_top"]

#: Up to this many matrix elements (rows x dim) a search reads the float32
#: rows directly; above it the int8 sketch first (a quarter of the memory
#: traffic; timings in docs/benchmarks.md). Both give the same results.
CORE_TOP_K_MAX = 1 << 18


class _Columns:
    """Fixed-capacity column buffers; rows below `filled` are never written again."""

    def __init__(self, dim: int, capacity: int) -> None:
        self.vectors = np.zeros((capacity, dim), dtype=np.float32)
        self.scope_ids = np.zeros(capacity, dtype=np.int64)
        self.categories = np.zeros(capacity, dtype=np.int8)
        self.expires = np.full(capacity, np.inf, dtype=np.float64)
        self.codes = np.zeros((capacity, dim), dtype=np.int8)
        self.bounds = np.zeros((capacity, 2), dtype=np.float32)
        self.ids: list[str] = []
        self.filled = 0
        self.lock = threading.Lock()

    @property
    def capacity(self) -> int:
        return len(self.vectors)

    @property
    def nbytes(self) -> int:
        arrays = (self.vectors, self.scope_ids, self.categories, self.expires, self.codes, self.bounds)
        return sum(int(a.nbytes) for a in arrays)

    def copy(self, n: int, capacity: int) -> _Columns:
        out = _Columns(self.vectors.shape[1], capacity)
        for name in ("vectors", "scope_ids", "categories", "expires", "codes", "bounds"):
            getattr(out, name)[:n] = getattr(self, name)[:n]
        out.ids = self.ids[:n]
        out.filled = n
        return out


class _Ids(Sequence[str]):
    """The first ``n`` ids of a shared, append-only list."""

    __slots__ = ("_ids", "_n")

    def __init__(self, ids: list[str], n: int) -> None:
        self._ids = ids
        self._n = n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, i: int) -> str: ...

    @overload
    def __getitem__(self, i: slice) -> list[str]: ...

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._ids[j] for j in range(*i.indices(self._n))]
        j = int(i)
        if j < 0:
            j += self._n
        if not 0 <= j < self._n:
            raise IndexError("ScopeMatrix.ids index out of range")
        return self._ids[j]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids[: self._n])


class ScopeMatrix:
    """The searchable part of a scope at one moment: keys, category codes,
    expiry times and unit embeddings of ``n`` rows. Never changes;
    `appended` gives a new matrix with more rows."""

    def __init__(self, dim: int, capacity: int = 0) -> None:
        self.dim = dim
        self.n = 0
        self._columns = _Columns(dim, max(capacity, 16))

    def appended(
        self,
        scope_ids: npt.ArrayLike,
        ids: Sequence[str],
        categories: npt.ArrayLike,
        expires: npt.ArrayLike,
        vectors: npt.ArrayLike,
    ) -> ScopeMatrix:
        """A new matrix: these rows followed by ``ids`` and their columns
        (``vectors``: unit rows). This one is left as it is."""
        m = len(ids)
        if m == 0:
            return self
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(m, self.dim)
        codes, bounds = _core.quantize_rows(vectors)
        n, end = self.n, self.n + m
        columns = self._columns
        with columns.lock:
            if columns.filled != n or columns.capacity < end:
                # Not the newest matrix of these buffers (rows past n belong to
                # another one) or no room: copy, leaving every earlier matrix intact.
                columns = columns.copy(n, max(end, 2 * columns.capacity, 16))
            columns.vectors[n:end] = vectors
            columns.codes[n:end], columns.bounds[n:end] = codes, bounds
            columns.scope_ids[n:end] = scope_ids
            columns.categories[n:end] = categories
            columns.expires[n:end] = expires
            columns.ids.extend(ids)
            columns.filled = end
        out = ScopeMatrix.__new__(ScopeMatrix)
        out.dim, out.n, out._columns = self.dim, end, columns
        return out

    def prefix_of(self, other: ScopeMatrix) -> bool:
        """Whether ``other`` starts with exactly these rows (it was appended to this one)."""
        # Rows of a buffer are written once, so two matrices on one buffer are prefixes of each other.
        return other._columns is self._columns and self.n <= other.n

    @property
    def ids(self) -> Sequence[str]:
        return _Ids(self._columns.ids, self.n)

    @property
    def vectors(self) -> npt.NDArray[np.float32]:
        return self._columns.vectors[: self.n]

    @property
    def scope_ids(self) -> npt.NDArray[np.int64]:
        return self._columns.scope_ids[: self.n]

    @property
    def categories(self) -> npt.NDArray[np.int8]:
        return self._columns.categories[: self.n]

    @property
    def expires(self) -> npt.NDArray[np.float64]:
        return self._columns.expires[: self.n]

    @property
    def sketch(self) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
        """The int8 sketch of `vectors` (see `ctxfold._core.quantize_rows`)."""
        return self._columns.codes[: self.n], self._columns.bounds[: self.n]

    @property
    def nbytes(self) -> int:
        return self._columns.nbytes + 64 * self.n


def _newer(a: Any, b: Any) -> bool:
    """Whether generation ``a`` is later than ``b`` (ints, or tuples of ints for wide scopes)."""
    try:
        return bool(a > b)
    except TypeError:
        return False


class MatrixCache:
    """An LRU of (generation, ScopeMatrix) by scope key, bounded in bytes.

    Entries are swapped, never changed in place, under `lock`; a generation
    never goes back (an older matrix does not replace a newer one). `building`
    gives one lock per key, so threads that need the same matrix build it once."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._data: OrderedDict[Hashable, tuple[object, ScopeMatrix]] = OrderedDict()
        self._building: dict[Hashable, threading.Lock] = {}
        self.lock = threading.RLock()

    def get(self, key: Hashable, generation: object) -> ScopeMatrix | None:
        with self.lock:
            entry = self._data.get(key)
            if entry is None or entry[0] != generation:
                return None
            self._data.move_to_end(key)
            return entry[1]

    def entry(self, key: Hashable) -> tuple[object, ScopeMatrix] | None:
        """The cached (generation, matrix) of ``key`` at whatever generation."""
        with self.lock:
            return self._data.get(key)

    def put(self, key: Hashable, generation: object, matrix: ScopeMatrix) -> ScopeMatrix:
        """Cache ``matrix`` at ``generation`` unless a later one is cached; the matrix now cached."""
        with self.lock:
            entry = self._data.get(key)
            if entry is not None and _newer(entry[0], generation):
                self._data.move_to_end(key)
                return entry[1]
            self._data[key] = (generation, matrix)
            self._data.move_to_end(key)
            total = sum(m.nbytes for _, m in self._data.values())
            while total > self.max_bytes and len(self._data) > 1:
                _, (_, dropped) = self._data.popitem(last=False)
                total -= dropped.nbytes
            return matrix

    def advance(
        self, key: Hashable, old: object, new: object, update: Callable[[ScopeMatrix], ScopeMatrix]
    ) -> None:
        """Replace the matrix cached at generation ``old`` by ``update(matrix)``
        at ``new`` (a committed write's rows); anything else is left alone
        (a later search brings it up to date)."""
        with self.lock:
            entry = self._data.get(key)
            if entry is None or entry[0] != old:
                return
            matrix = entry[1]
        updated = update(matrix)
        with self.lock:
            entry = self._data.get(key)
            if entry is not None and entry[0] == old and entry[1] is matrix:
                self._data[key] = (new, updated)

    def building(self, key: Hashable) -> threading.Lock:
        """The lock held while the matrix of ``key`` is built or brought up to date."""
        with self.lock:
            found = self._building.get(key)
            if found is None:
                if len(self._building) > 4 * len(self._data) + 64:
                    self._building = {k: v for k, v in self._building.items() if v.locked()}
                found = self._building[key] = threading.Lock()
            return found

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
