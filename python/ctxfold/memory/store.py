"""What both backends share: scopes, typed memories, search, archive.

`SqlStore` speaks a small SQL subset that SQLite and PostgreSQL both accept
(``?`` placeholders rewritten to ``%s`` for psycopg, ``ON CONFLICT``,
``RETURNING``); a backend supplies only connections and transactions
(`_transaction`). Every public write is one transaction. The tiers, caches,
iteration records and agent messages are mixins in their own files.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from ctxfold.errors import InvalidInputError, InvalidTypeError, StoreError
from ctxfold.memory.caches import CachesMixin
from ctxfold.memory.embedding import (
    default_embedder,
    embed_texts,
    from_blobs,
    to_blob,
    unit_rows,
)
from ctxfold.memory.iterations import IterationsMixin
from ctxfold.memory.matrix import MatrixCache, ScopeMatrix, select_top
from ctxfold.memory.messages import AgentMessagesMixin
from ctxfold.memory.records import Memory, decoder, encode
from ctxfold.memory.schema import MIGRATIONS, SCHEMA_VERSION, SCOPED_TABLES, render
from ctxfold.memory.scope import SCOPE_FIELDS, Scope, check_scope
from ctxfold.memory.tiers import TiersMixin
from ctxfold.memory.typed import CATEGORIES, merge_into, prepare

__all__ = ["SqlStore"]

CATEGORY_CODES = {name: i for i, name in enumerate(CATEGORIES)}
_CHUNK = 500


@functools.lru_cache(maxsize=512)
def _pg_sql(sql: str) -> str:
    return sql.replace("?", "%s")


class SqlStore(TiersMixin, CachesMixin, IterationsMixin, AgentMessagesMixin):
    """The `MemoryStore` implementation over a SQL connection (see `SqliteStore`
    and `PostgresStore` for the constructors)."""

    dialect = "sqlite"
    #: The path or the DSN (password masked), for messages.
    location = ""

    def _setup(self, embedder: Any, merge_threshold: float | None, matrix_cache_bytes: int) -> None:
        if merge_threshold is not None and (
            isinstance(merge_threshold, bool) or not isinstance(merge_threshold, (int, float))
            or not 0.0 < merge_threshold <= 1.0
        ):
            raise InvalidInputError(f"merge_threshold: must be in (0, 1] or None (never merge), got {merge_threshold!r}")
        if isinstance(matrix_cache_bytes, bool) or not isinstance(matrix_cache_bytes, int) or matrix_cache_bytes < 0:
            raise InvalidInputError(f"matrix_cache_bytes: must be an int >= 0, got {matrix_cache_bytes!r}")
        self._embedder = embedder
        self.merge_threshold = merge_threshold
        self._matrices = MatrixCache(matrix_cache_bytes)
        self._scope_ids: dict[tuple[str | None, ...], int] = {}
        self._dim: int | None = None
        self._closed = False

    # --- backend hooks -------------------------------------------------------------------

    def _transaction(self, write: bool) -> contextlib.AbstractContextManager[Any]:  # pragma: no cover
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _sql(self, sql: str) -> str:
        return sql if self.dialect == "sqlite" else _pg_sql(sql)

    def _x(self, cur: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        return cur.execute(self._sql(sql), params)

    def _write(self) -> contextlib.AbstractContextManager[Any]:
        self._check_open()
        return self._forgetting_on_rollback(self._transaction(True))

    @contextlib.contextmanager
    def _forgetting_on_rollback(self, transaction: contextlib.AbstractContextManager[Any]) -> Iterator[Any]:
        """A write that fails rolls back; what this store learnt inside it (a
        scope's row id, the embedding dimension) may not exist any more, and a
        reused row id would hand one scope's records to another, so those
        caches are dropped and read again from the database."""
        try:
            with transaction as cur:
                yield cur
        except BaseException:
            self._scope_ids.clear()
            self._dim = None
            raise

    def _read(self) -> contextlib.AbstractContextManager[Any]:
        self._check_open()
        return self._transaction(False)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the store {self.location} is closed. Fix: open a new store (or use it in a with block)")

    def _migrate(self, cur: Any) -> None:
        self._x(cur, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = self._x(cur, "SELECT MAX(version) FROM schema_version").fetchone()
        current = int(row[0] or 0)
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"the store {self.location} has schema version {current}, newer than this ctxfold "
                f"supports ({SCHEMA_VERSION}). Fix: upgrade ctxfold, or use another store"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version - 1]:
                self._x(cur, render(statement, self.dialect))
            self._x(cur, "INSERT INTO schema_version (version) VALUES (?)", (version,))

    @property
    def embedder(self) -> Any:
        """The embedder texts are searched with (the shared `StaticEmbedder` by default)."""
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    # --- scopes ------------------------------------------------------------------------------

    def _scope_id(self, cur: Any, scope: Scope, create: bool) -> int | None:
        key = scope.values()
        sid = self._scope_ids.get(key)
        if sid is not None:
            return sid
        where = "user_id = ? AND agent_id = ? AND session_id = ? AND conversation_id = ?"
        row = self._x(cur, f"SELECT id FROM scopes WHERE {where}", key).fetchone()
        if row is None and create:
            self._x(
                cur,
                "INSERT INTO scopes (user_id, agent_id, session_id, conversation_id, gen) VALUES (?, ?, ?, ?, 0) "
                "ON CONFLICT (user_id, agent_id, session_id, conversation_id) DO NOTHING",
                key,
            )
            row = self._x(cur, f"SELECT id FROM scopes WHERE {where}", key).fetchone()
            # Not cached yet: the transaction that created the row may still roll back.
            return None if row is None else int(row[0])
        if row is None:
            return None
        self._scope_ids[key] = int(row[0])
        return int(row[0])

    def _bump(self, cur: Any, sid: int) -> int:
        """Mark the scope's searchable rows changed; the new generation."""
        return int(self._x(cur, "UPDATE scopes SET gen = gen + 1 WHERE id = ? RETURNING gen", (sid,)).fetchone()[0])

    def _scope_ids_of(self, cur: Any, scope: Scope) -> list[int]:
        """The ids of the stored scopes ``scope`` covers (one at most when exact)."""
        if scope.exact:
            sid = self._scope_id(cur, scope, create=False)
            return [] if sid is None else [sid]
        where, params = _wide_filter(scope)
        return [int(r[0]) for r in self._x(cur, f"SELECT id FROM scopes WHERE {where}", params).fetchall()]

    def _generation(self, cur: Any, scope: Scope, sids: list[int]) -> object:
        if scope.exact:
            row = self._x(cur, "SELECT gen FROM scopes WHERE id = ?", (sids[0],)).fetchone()
            return int(row[0]) if row else -1
        where, params = _wide_filter(scope)
        row = self._x(cur, f"SELECT COALESCE(SUM(gen), 0), COUNT(*) FROM scopes WHERE {where}", params).fetchone()
        return (int(row[0]), int(row[1]))

    # --- embeddings ------------------------------------------------------------------------

    def _check_dim(self, cur: Any, dim: int, what: str) -> None:
        if self._dim is None:
            self._x(cur, "INSERT INTO meta (key, value) VALUES ('dim', ?) ON CONFLICT (key) DO NOTHING", (str(dim),))
            self._dim = int(self._x(cur, "SELECT value FROM meta WHERE key = 'dim'").fetchone()[0])
        if dim != self._dim:
            raise StoreError(
                f"{what}: {dim}-dimensional embedding, but the store {self.location} holds "
                f"{self._dim}-dimensional ones. Fix: use the embedder the store was filled with "
                "(embedder=...), or a new store for this embedder"
            )

    def _stored_dim(self, cur: Any) -> int | None:
        if self._dim is None:
            row = self._x(cur, "SELECT value FROM meta WHERE key = 'dim'").fetchone()
            self._dim = None if row is None else int(row[0])
        return self._dim

    def _vectors(self, texts: list[str], given: Any, argument: str) -> npt.NDArray[np.float32]:
        if given is None:
            return embed_texts(self.embedder, texts)
        vectors = unit_rows(given, argument)
        if len(vectors) != len(texts):
            raise InvalidInputError(f"{argument}: {len(vectors)} rows for {len(texts)} memories; pass one row each")
        return vectors

    # --- typed memories ------------------------------------------------------------------

    def add(self, memory: Memory, *, scope: Scope, embedding: Any = None, merge: bool = True) -> str:
        """Store ``memory`` in ``scope``; its id. Adding the same memory again
        (same id: same category and content) changes nothing; a memory whose
        cosine to one of the same category in the scope is at least
        ``merge_threshold`` merges into it (tags united, higher confidence)
        and that memory's id is returned. ``embedding``: a precomputed vector
        (else the content is embedded). Confidence below the category's
        minimum raises `InvalidInputError`; a wrong dimension `StoreError`."""
        return self.add_many([memory], scope=scope, embeddings=None if embedding is None else [embedding], merge=merge)[0]

    def add_many(
        self, memories: Iterable[Memory], *, scope: Scope, embeddings: Any = None, merge: bool = False
    ) -> list[str]:
        """Store many memories in one transaction (the bulk path); their ids in
        order. As `add`, except that near-duplicate merging is off unless
        ``merge=True``: it costs a scan of the scope per batch (exact
        duplicates are still stored once)."""
        check_scope(scope, write=True)
        if isinstance(memories, Memory):
            raise InvalidTypeError("memories: expected a list of Memory, got one Memory. Fix: use add() or [memory]")
        now = time.time()
        prepared = [prepare(m, scope, now, argument=f"memories[{i}]") for i, m in enumerate(memories)]
        if not prepared:
            return []
        vectors = self._vectors([m.content for m in prepared], embeddings, "embeddings")
        with self._write() as cur:
            self._check_dim(cur, vectors.shape[1], "embeddings" if embeddings is not None else "embedder")
            sid = self._scope_id(cur, scope, create=True)
            assert sid is not None
            self._archive_expired(cur, [sid], now)
            existing = self._existing_ids(cur, sid, [m.id for m in prepared])
            ids, fresh, rows = self._plan_adds(cur, scope, sid, prepared, vectors, existing, merge, now)
            if fresh:
                cur.executemany(
                    self._sql(
                        "INSERT INTO memories (scope_id, id, category, created_at, expires_at, record, embedding) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope_id, id) DO NOTHING"
                    ),
                    [
                        (sid, m.id, m.category, m.created_at, m.expires_at, encode(m), to_blob(vectors[i]))
                        for i, m in fresh
                    ],
                )
                gen = self._bump(cur, sid)
                cached = self._matrices.advance(("exact", sid), gen - 1, gen)
                if cached is not None:
                    cached.append(
                        [sid] * len(fresh),
                        [m.id for _, m in fresh],
                        [CATEGORY_CODES[m.category] for _, m in fresh],
                        [m.expires_at or math.inf for _, m in fresh],
                        vectors[[i for i, _ in fresh]],
                    )
            for mid, record in rows:
                self._x(cur, "UPDATE memories SET record = ? WHERE scope_id = ? AND id = ?", (encode(record), sid, mid))
        return ids

    def _existing_ids(self, cur: Any, sid: int, ids: list[str]) -> set[str]:
        found: set[str] = set()
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start : start + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            rows = self._x(cur, f"SELECT id FROM memories WHERE scope_id = ? AND id IN ({marks})", (sid, *chunk))
            found.update(r[0] for r in rows.fetchall())
        return found

    def _plan_adds(
        self, cur: Any, scope: Scope, sid: int, prepared: list[Memory], vectors: npt.NDArray[np.float32],
        existing: set[str], merge: bool, now: float,
    ) -> tuple[list[str], list[tuple[int, Memory]], list[tuple[str, Memory]]]:
        """Which memories are new, which merge into what (ids in input order,
        new (index, memory) pairs, merged records to update)."""
        threshold = self.merge_threshold if merge else None
        matrix = self._matrix(cur, scope, [sid]) if threshold is not None else None
        ids: list[str] = []
        fresh: list[tuple[int, Memory]] = []
        merged: dict[str, Memory] = {}
        batch: dict[str, int] = {}
        for i, m in enumerate(prepared):
            if m.id in existing or m.id in batch:
                ids.append(m.id)
                continue
            target = None
            if threshold is not None:
                target = self._near_duplicate(cur, sid, m, vectors, i, matrix, fresh, threshold, now)
            if target is None:
                batch[m.id] = i
                fresh.append((i, m))
                ids.append(m.id)
                continue
            if isinstance(target, Memory):  # an earlier memory of this batch
                j = next(k for k, (_, f) in enumerate(fresh) if f.id == target.id)
                fresh[j] = (fresh[j][0], merge_into(target, m, now))
                ids.append(target.id)
            else:
                base = merged.get(target) or self._get_record(cur, sid, target)
                if base is None:
                    fresh.append((i, m))
                    ids.append(m.id)
                    continue
                merged[target] = merge_into(base, m, now)
                ids.append(target)
        return ids, fresh, list(merged.items())

    def _near_duplicate(
        self, cur: Any, sid: int, m: Memory, vectors: npt.NDArray[np.float32], i: int,
        matrix: ScopeMatrix | None, fresh: list[tuple[int, Memory]], threshold: float, now: float,
    ) -> str | Memory | None:
        code = CATEGORY_CODES[m.category]
        if matrix is not None and matrix.n:
            sims = matrix.vectors @ vectors[i]
            sims[(matrix.categories != code) | (matrix.expires <= now)] = -np.inf
            best = int(np.argmax(sims))
            if sims[best] >= threshold:
                return matrix.ids[best]
        same = [(j, f) for j, f in fresh if f.category == m.category]
        if same:
            sims = vectors[[j for j, _ in same]] @ vectors[i]
            best = int(np.argmax(sims))
            if sims[best] >= threshold:
                return same[best][1]
        return None

    def _get_record(self, cur: Any, sid: int, mid: str) -> Memory | None:
        row = self._x(cur, "SELECT record FROM memories WHERE scope_id = ? AND id = ?", (sid, mid)).fetchone()
        return None if row is None else decoder.decode(row[0])

    def get(self, memory_id: str, *, scope: Scope) -> Memory | None:
        """The active memory ``memory_id`` in ``scope`` (None if absent, expired
        or archived: see `get_archived`). A wide scope returns the first match."""
        check_scope(scope, write=False)
        if not isinstance(memory_id, str):
            raise InvalidTypeError(f"memory_id: expected str, got {type(memory_id).__name__}")
        with self._read() as cur:
            where, params = self._scope_filter(cur, scope)
            row = self._x(
                cur,
                f"SELECT record FROM memories WHERE {where} AND id = ? AND (expires_at IS NULL OR expires_at > ?) "
                "ORDER BY rid LIMIT 1",
                (*params, memory_id, time.time()),
            ).fetchone()
        return None if row is None else decoder.decode(row[0])

    def memories(self, *, scope: Scope, category: str | None = None) -> list[Memory]:
        """Every active (unexpired) memory in ``scope``, oldest first."""
        check_scope(scope, write=False)
        with self._read() as cur:
            where, params = self._scope_filter(cur, scope)
            sql = f"SELECT record FROM memories WHERE {where} AND (expires_at IS NULL OR expires_at > ?)"
            args: list[Any] = [*params, time.time()]
            if category is not None:
                sql += " AND category = ?"
                args.append(category)
            rows = self._x(cur, sql + " ORDER BY created_at, rid", args).fetchall()
        return [decoder.decode(r[0]) for r in rows]

    def count(self, *, scope: Scope) -> int:
        """How many active memories ``scope`` holds."""
        check_scope(scope, write=False)
        with self._read() as cur:
            where, params = self._scope_filter(cur, scope)
            row = self._x(
                cur, f"SELECT COUNT(*) FROM memories WHERE {where} AND (expires_at IS NULL OR expires_at > ?)",
                (*params, time.time()),
            ).fetchone()
        return int(row[0])

    def _scope_filter(self, cur: Any, scope: Scope, column: str = "scope_id") -> tuple[str, tuple[Any, ...]]:
        if scope.exact:
            sid = self._scope_id(cur, scope, create=False)
            return f"{column} = ?", (-1 if sid is None else sid,)
        where, params = _wide_filter(scope)
        return f"{column} IN (SELECT id FROM scopes WHERE {where})", params

    # --- search ------------------------------------------------------------------------------

    def search(
        self,
        query: str | npt.ArrayLike,
        *,
        scope: Scope,
        k: int = 10,
        threshold: float | None = None,
        categories: Sequence[str] | None = None,
    ) -> list[Memory]:
        """The ``k`` active memories of ``scope`` most similar to ``query`` (a
        text, embedded with the store's embedder, or a vector), best first,
        each with ``.score`` (cosine); those below ``threshold`` are left out.
        A wide scope (``scope.widen()``) searches every scope it covers."""
        check_scope(scope, write=False)
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise InvalidInputError(f"k: must be an int >= 0, got {k!r}")
        codes = None
        if categories is not None:
            unknown = set(categories) - set(CATEGORIES)
            if unknown:
                raise InvalidInputError(f"categories: unknown {sorted(unknown)}; use {sorted(CATEGORIES)}")
            codes = np.array([CATEGORY_CODES[c] for c in categories], dtype=np.int8)
        if isinstance(query, str):
            q = embed_texts(self.embedder, [query])[0]
        else:
            q = unit_rows(query, "query")
            if len(q) != 1:
                raise InvalidInputError(f"query: expected one vector, got {len(q)} rows")
            q = q[0]
        now = time.time()
        with self._read() as cur:
            sids = self._scope_ids_of(cur, scope)
            if not sids or k == 0:
                return []
            dim = self._stored_dim(cur)
            if dim is None:
                return []
            if len(q) != dim:
                raise StoreError(
                    f"query: {len(q)}-dimensional embedding, but the store {self.location} holds {dim}-dimensional "
                    "ones. Fix: search with the embedder the store was filled with (embedder=...)"
                )
            matrix = self._matrix(cur, scope, sids)
            valid = matrix.expires > now
            if codes is not None:
                valid &= np.isin(matrix.categories, codes)
            idx, scores = select_top(matrix.vectors, q, k, None if valid.all() else valid, matrix.sketch)
            keep = [(int(i), float(s)) for i, s in zip(idx, scores) if threshold is None or s >= threshold]
            return self._fetch(cur, matrix, keep)

    def _fetch(self, cur: Any, matrix: ScopeMatrix, hits: list[tuple[int, float]]) -> list[Memory]:
        by_scope: dict[int, list[str]] = {}
        for i, _ in hits:
            by_scope.setdefault(int(matrix.scope_ids[i]), []).append(matrix.ids[i])
        records: dict[tuple[int, str], bytes] = {}
        for sid, ids in by_scope.items():
            marks = ", ".join("?" * len(ids))
            rows = self._x(cur, f"SELECT id, record FROM memories WHERE scope_id = ? AND id IN ({marks})", (sid, *ids))
            records.update(((sid, r[0]), r[1]) for r in rows.fetchall())
        out = []
        for i, score in hits:
            raw = records.get((int(matrix.scope_ids[i]), matrix.ids[i]))
            if raw is not None:
                memory = decoder.decode(raw)
                memory.score = score
                out.append(memory)
        return out

    def _matrix(self, cur: Any, scope: Scope, sids: list[int]) -> ScopeMatrix:
        key: Any = ("exact", sids[0]) if scope.exact else ("wide", scope.values())
        generation = self._generation(cur, scope, sids)
        with self._matrices.lock:
            cached = self._matrices.get(key, generation)
            if cached is not None:
                return cached
            where, params = self._scope_filter(cur, scope)
            rows = self._x(
                cur, f"SELECT scope_id, id, category, expires_at, embedding FROM memories WHERE {where} ORDER BY rid",
                params,
            ).fetchall()
            dim = self._stored_dim(cur) or 1
            matrix = ScopeMatrix(dim, len(rows))
            if rows:
                matrix.append(
                    [r[0] for r in rows],
                    [r[1] for r in rows],
                    [CATEGORY_CODES.get(r[2], -1) for r in rows],
                    [math.inf if r[3] is None else r[3] for r in rows],
                    from_blobs([bytes(r[4]) for r in rows], dim),
                )
            self._matrices.put(key, generation, matrix)
            return matrix

    # --- effectiveness, archive, deletion ------------------------------------------------

    def record_application(self, memory_id: str, *, scope: Scope, success: bool) -> Memory:
        """Count one application of the memory (and whether it worked); the updated memory."""
        check_scope(scope, write=True)
        with self._write() as cur:
            sid = self._scope_id(cur, scope, create=False)
            record = None if sid is None else self._get_record(cur, sid, memory_id)
            if record is None:
                raise StoreError(f"memory_id: no memory {memory_id!r} in {scope}. Fix: pass the id add() returned")
            record.effectiveness.record(success)
            record.updated_at = time.time()
            self._x(cur, "UPDATE memories SET record = ? WHERE scope_id = ? AND id = ?", (encode(record), sid, memory_id))
        return record

    def supersede(self, memory_id: str, new: Memory, *, scope: Scope, embedding: Any = None) -> str:
        """Add ``new`` and move ``memory_id`` to the archive as superseded by it; the new id."""
        check_scope(scope, write=True)
        new_id = self.add(new, scope=scope, embedding=embedding, merge=False)
        with self._write() as cur:
            sid = self._scope_id(cur, scope, create=False)
            if sid is not None and new_id != memory_id:
                self._move_to_archive(cur, sid, [memory_id], "superseded", time.time(), superseded_by=new_id)
        return new_id

    def archive(self, memory_id: str, *, scope: Scope, reason: str = "archived") -> bool:
        """Move a memory to the archive; False if it was not active in ``scope``."""
        check_scope(scope, write=True)
        with self._write() as cur:
            sid = self._scope_id(cur, scope, create=False)
            return sid is not None and self._move_to_archive(cur, sid, [memory_id], reason, time.time()) > 0

    def archive_expired(self, *, scope: Scope | None = None) -> int:
        """Move every expired memory (of ``scope``, default all) to the archive;
        how many. Writes do this for their own scope on the way."""
        with self._write() as cur:
            if scope is None:
                sids = [int(r[0]) for r in self._x(cur, "SELECT id FROM scopes").fetchall()]
            else:
                check_scope(scope, write=False)
                sids = self._scope_ids_of(cur, scope)
            return self._archive_expired(cur, sids, time.time())

    def _archive_expired(self, cur: Any, sids: list[int], now: float) -> int:
        moved = 0
        for sid in sids:
            ids = [r[0] for r in self._x(
                cur, "SELECT id FROM memories WHERE scope_id = ? AND expires_at <= ?", (sid, now)
            ).fetchall()]
            if ids:
                moved += self._move_to_archive(cur, sid, ids, "expired", now)
        return moved

    def _move_to_archive(
        self, cur: Any, sid: int, ids: list[str], reason: str, now: float, superseded_by: str = ""
    ) -> int:
        moved = 0
        for mid in ids:
            record = self._get_record(cur, sid, mid)
            if record is None:
                continue
            record = msgspec.structs.replace(
                record, status="archived", archived_reason=reason, archived_at=now, superseded_by=superseded_by
            )
            self._x(cur, "DELETE FROM archive WHERE scope_id = ? AND id = ?", (sid, mid))
            self._x(
                cur,
                "INSERT INTO archive (scope_id, id, category, reason, archived_at, record) VALUES (?, ?, ?, ?, ?, ?)",
                (sid, mid, record.category, reason, now, encode(record)),
            )
            self._x(cur, "DELETE FROM memories WHERE scope_id = ? AND id = ?", (sid, mid))
            moved += 1
        if moved:
            self._bump(cur, sid)
        return moved

    def archived(self, *, scope: Scope, category: str | None = None) -> list[Memory]:
        """The archived memories of ``scope`` (``status == "archived"``, with the reason)."""
        check_scope(scope, write=False)
        with self._read() as cur:
            where, params = self._scope_filter(cur, scope)
            sql, args = f"SELECT record FROM archive WHERE {where}", list(params)
            if category is not None:
                sql += " AND category = ?"
                args.append(category)
            rows = self._x(cur, sql + " ORDER BY archived_at, rid", args).fetchall()
        return [decoder.decode(r[0]) for r in rows]

    def get_archived(self, memory_id: str, *, scope: Scope) -> Memory | None:
        check_scope(scope, write=False)
        with self._read() as cur:
            where, params = self._scope_filter(cur, scope)
            row = self._x(cur, f"SELECT record FROM archive WHERE {where} AND id = ? LIMIT 1", (*params, memory_id)).fetchone()
        return None if row is None else decoder.decode(row[0])

    def delete(self, memory_id: str, *, scope: Scope) -> bool:
        """Delete a memory for good (not archived); False if it was not there."""
        check_scope(scope, write=True)
        with self._write() as cur:
            sid = self._scope_id(cur, scope, create=False)
            if sid is None:
                return False
            gone = self._x(cur, "DELETE FROM memories WHERE scope_id = ? AND id = ? RETURNING id", (sid, memory_id)).fetchall()
            if gone:
                self._bump(cur, sid)
            return bool(gone)

    def clear(self, scope: Scope) -> int:
        """Delete every record of ``scope`` (memories, archive, messages, working
        memory, episodes, iteration records, agent messages) and nothing else;
        how many rows went. A wide scope clears every scope it covers."""
        check_scope(scope, write=False)
        with self._write() as cur:
            sids = self._scope_ids_of(cur, scope)
            removed = 0
            for sid in sids:
                for table in SCOPED_TABLES:
                    removed += len(self._x(cur, f"DELETE FROM {table} WHERE scope_id = ? RETURNING scope_id", (sid,)).fetchall())
                self._bump(cur, sid)
        return removed

    # --- export --------------------------------------------------------------------------------

    def export_yaml(self, directory: Any, *, scope: Scope) -> list[Any]:
        """Write the active memories of ``scope`` as one YAML file per category; the paths."""
        from ctxfold.memory.export import export_yaml

        return export_yaml(self, directory, scope=scope)

    def import_yaml(self, directory: Any, *, scope: Scope) -> list[str]:
        """Add the memories of the YAML files `export_yaml` wrote; their ids."""
        from ctxfold.memory.export import import_yaml

        return import_yaml(self, directory, scope=scope)


def _wide_filter(scope: Scope) -> tuple[str, tuple[Any, ...]]:
    parts, params = [], []
    for name in SCOPE_FIELDS:
        value = getattr(scope, name)
        if value is not None:
            parts.append(f"{name} = ?")
            params.append(value)
    return (" AND ".join(parts) or "1 = 1"), tuple(params)
