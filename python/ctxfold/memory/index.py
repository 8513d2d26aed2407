"""`SearchIndex`: the search matrices of the memories of each scope, kept in
memory over the database (see `ctxfold.memory.matrix` for how they follow
the writes of other processes).

Searches read a scope's matrix as of its generation; adds append their rows
to it once their transaction commits; a `presearch` scores a batch against a
scope before its write, so the duplicate check under the write lock scores
only the rows written in between.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxfold.errors import StoreError
from ctxfold.memory.backend import Backend
from ctxfold.memory.embedding import from_blobs
from ctxfold.memory.matrix import MatrixCache, ScopeMatrix
from ctxfold.memory.records import Memory
from ctxfold.memory.scope import Scope
from ctxfold.memory.typed import CATEGORIES

__all__ = ["CATEGORY_CODES", "SearchIndex"]

CATEGORY_CODES = {name: i for i, name in enumerate(CATEGORIES)}
_CHUNK = 500
#: Most scores (rows x memories) a `presearch` keeps (16 MB of float32).
_PRESEARCH_MAX = 1 << 22


class SearchIndex:
    """The memories' search matrices of one backend's scopes, within ``max_bytes``."""

    def __init__(self, backend: Backend, max_bytes: int) -> None:
        self.backend = backend
        self._matrices = MatrixCache(max_bytes)

    def clear(self) -> None:
        self._matrices.clear()

    def matrix(self, cur: Any, scope: Scope, sids: list[int]) -> ScopeMatrix:
        """The scope's search matrix as of its generation now (cached; a matrix
        that is behind gets the rows appended since, or is rebuilt when rows
        were removed). The result never changes: hold it for as long as needed."""
        db = self.backend
        key: Any = ("exact", sids[0]) if scope.exact else ("wide", scope.values())
        generation, cut = db.generation(cur, scope, sids)
        cached = self._matrices.get(key, generation)
        if cached is not None:
            return cached
        with self._matrices.building(key):
            entry = self._matrices.entry(key)
            if entry is not None:
                held_generation, held = entry
                if held_generation == generation or _later(held_generation, generation):
                    return held
                if cut is not None and isinstance(held_generation, int) and cut <= held_generation:
                    rows = db.execute(
                        cur,
                        "SELECT scope_id, id, category, expires_at, embedding FROM memories "
                        "WHERE scope_id = ? AND gen > ? AND gen <= ? ORDER BY gen, rid",
                        (sids[0], held_generation, generation),
                    ).fetchall()
                    return self._matrices.put(key, generation, self._with_rows(held, rows))
            # The ids in hand, not `scope_filter`: inside the write that created the scope that would
            # cache its id for other threads before the row is committed.
            where, params = ("scope_id = ?", (sids[0],)) if scope.exact else db.scope_filter(cur, scope)
            sql = f"SELECT scope_id, id, category, expires_at, embedding FROM memories WHERE {where}"
            if cut is not None:
                # Rows committed after the generation was read wait for the next catch-up.
                sql, params = sql + " AND gen <= ?", (*params, generation)
            rows = db.execute(cur, sql + " ORDER BY rid", params).fetchall()
            # Room to append the next writes in place (a copy would also lose a `presearch`).
            capacity = len(rows) + len(rows) // 8 + 16
            matrix = self._with_rows(ScopeMatrix(db.stored_dim(cur) or 1, capacity), rows)
            return self._matrices.put(key, generation, matrix)

    def _with_rows(self, matrix: ScopeMatrix, rows: list[Any]) -> ScopeMatrix:
        if not rows:
            return matrix
        return matrix.appended(
            [r[0] for r in rows],
            [r[1] for r in rows],
            [CATEGORY_CODES.get(r[2], -1) for r in rows],
            [math.inf if r[3] is None else r[3] for r in rows],
            from_blobs([bytes(r[4]) for r in rows], matrix.dim),
        )

    def appended(self, cur: Any, sid: int, fresh: list[tuple[int, Memory]], vectors: npt.NDArray[np.float32]) -> int:
        """Record that ``fresh`` (index into ``vectors``, memory) were just
        inserted into scope ``sid``: bump its generation, stamp the rows with
        it and, once the transaction commits, append them to the cached
        matrix of the scope; the new generation. The rows are stamped only if
        this transaction inserted them (``gen = 0``), so a row another writer
        inserted first is never appended twice."""
        db = self.backend
        gen = int(db.execute(cur, "UPDATE scopes SET gen = gen + 1 WHERE id = ? RETURNING gen", (sid,)).fetchone()[0])
        by_id = {m.id: (i, m) for i, m in fresh}
        stamped: list[tuple[int, str]] = []
        ids = list(by_id)
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            stamped += db.execute(
                cur,
                f"UPDATE memories SET gen = ? WHERE scope_id = ? AND gen = 0 AND id IN ({marks}) RETURNING rid, id",
                (gen, sid, *chunk),
            ).fetchall()
        stamped.sort()
        rows = [by_id[mid] for _, mid in stamped]
        key = ("exact", sid)

        def extend(matrix: ScopeMatrix) -> ScopeMatrix:
            return matrix.appended(
                [sid] * len(rows),
                [m.id for _, m in rows],
                [CATEGORY_CODES[m.category] for _, m in rows],
                [math.inf if m.expires_at is None else m.expires_at for _, m in rows],
                vectors[[i for i, _ in rows]].reshape(len(rows), vectors.shape[1]),
            )

        def after_commit() -> None:
            try:
                self._matrices.advance(key, gen - 1, gen, extend)
            except Exception:
                # The write is committed; a matrix that could not follow is rebuilt on the next search.
                self._matrices.discard(key)

        db.after_commit(after_commit)
        return gen

    def presearch(self, scope: Scope, vectors: npt.NDArray[np.float32]) -> None:
        """Before a write that compares ``vectors`` with the scope (the
        duplicate check): score them against the scope's current search
        matrix now, outside the write lock; under it, `similarities` then
        scores only the rows written in between. Skipped when the scores
        would take more than a few MB, and on PostgreSQL, where the check
        runs before the scope's row is locked anyway."""
        db = self.backend
        scratch = db.scratch()
        scratch.pop("presearch", None)
        if db.dialect != "sqlite":
            return
        try:
            with db.read() as cur:
                sid = db.scope_id(cur, scope, create=False)
                if sid is None or db.stored_dim(cur) != vectors.shape[1]:
                    return
                matrix = self.matrix(cur, scope, [sid])
        except StoreError:
            return  # the write itself reports what is wrong
        if matrix.n and matrix.n * len(vectors) <= _PRESEARCH_MAX:
            scratch["presearch"] = (matrix, vectors, np.ascontiguousarray((matrix.vectors @ vectors.T).T))

    def presearched(self) -> Any:
        """What the last `presearch` of this thread left for its write (None: nothing)."""
        return self.backend.scratch().get("presearch")

    def similarities(self, matrix: ScopeMatrix, vectors: npt.NDArray[np.float32], i: int) -> npt.NDArray[np.float32]:
        """``matrix.vectors @ vectors[i]`` (a new array), from the `presearch`
        scores of the rows it already had and a product over the rest."""
        found = self.presearched()
        if found is not None:
            before, given, scores = found
            if given is vectors and before.prefix_of(matrix):
                joined: npt.NDArray[np.float32] = np.concatenate([scores[i], matrix.vectors[before.n :] @ vectors[i]])
                return joined
        fresh: npt.NDArray[np.float32] = matrix.vectors @ vectors[i]
        return fresh


def _later(a: object, b: object) -> bool:
    """Whether generation ``a`` comes after ``b`` (generations never go back)."""
    try:
        return bool(a > b)  # type: ignore[operator]
    except TypeError:
        return False
