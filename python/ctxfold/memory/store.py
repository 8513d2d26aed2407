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
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from ctxfold.errors import InvalidInputError, InvalidTypeError, StoreError
from ctxfold.memory.caches import CachesMixin
from ctxfold.memory.checks import check_memories, integer, number, text
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
from ctxfold.memory.updates import CANDIDATES, SUPERSEDE_THRESHOLD, AddResult, compare

__all__ = ["SqlStore"]

CATEGORY_CODES = {name: i for i, name in enumerate(CATEGORIES)}
_CHUNK = 500
#: Most scores (rows x memories) a `_presearch` keeps (16 MB of float32).
_PRESEARCH_MAX = 1 << 22


@functools.lru_cache(maxsize=512)
def _pg_sql(sql: str) -> str:
    return sql.replace("?", "%s")


class SqlStore(TiersMixin, CachesMixin, IterationsMixin, AgentMessagesMixin):
    """The `MemoryStore` implementation over a SQL connection (see `SqliteStore`
    and `PostgresStore` for the constructors)."""

    dialect = "sqlite"
    #: The path or the DSN (password masked), for messages.
    location = ""
    #: The cosine from which an added memory that restates a stored one with
    #: another value supersedes it (None: never); see `add`.
    supersede_threshold: float | None = SUPERSEDE_THRESHOLD

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

    def _writer_turn(self) -> contextlib.AbstractContextManager[Any]:
        """Writers of one SQLite file take turns (see `ctxfold.memory.gate`);
        PostgreSQL queues them itself."""
        path = getattr(self, "path", None)
        if self.dialect != "sqlite" or path is None:
            return contextlib.nullcontext()
        from ctxfold.memory.gate import writer_gate

        return writer_gate(path).held(getattr(self, "timeout", 30.0))

    @contextlib.contextmanager
    def _forgetting_on_rollback(self, transaction: contextlib.AbstractContextManager[Any]) -> Iterator[Any]:
        """A write that fails rolls back; what this store learnt inside it (a
        scope's row id, the embedding dimension) may not exist any more, and a
        reused row id would hand one scope's records to another, so those
        caches are dropped and read again from the database. What the write
        registered with `_after_commit` runs only once it has committed."""
        local = self._local()
        stack = local.__dict__.setdefault("pending", [])
        actions: list[Callable[[], None]] = []
        stack.append(actions)
        try:
            with self._writer_turn(), transaction as cur:
                yield cur
        except BaseException:
            self._scope_ids.clear()
            self._dim = None
            raise
        finally:
            stack.pop()
            if not stack:
                local.presearch = None
        for action in actions:
            action()

    def _local(self) -> threading.local:
        """This store's per-thread state (pending after-commit actions, the presearch)."""
        local: threading.local = self.__dict__.get("_tx_local") or self.__dict__.setdefault("_tx_local", threading.local())
        return local

    def _presearch(self, scope: Scope, vectors: npt.NDArray[np.float32]) -> None:
        """Before a write that compares ``vectors`` with the scope (the
        duplicate check): score them against the scope's current search
        matrix now, outside the write lock; under it, `_similarities` then
        scores only the rows written in between. Skipped when the scores
        would take more than a few MB, and on PostgreSQL, where the check
        runs before the scope's row is locked anyway."""
        local = self._local()
        local.presearch = None
        if self.dialect != "sqlite":
            return
        try:
            with self._read() as cur:
                sid = self._scope_id(cur, scope, create=False)
                if sid is None or self._stored_dim(cur) != vectors.shape[1]:
                    return
                matrix = self._matrix(cur, scope, [sid])
        except StoreError:
            return  # the write itself reports what is wrong
        if matrix.n and matrix.n * len(vectors) <= _PRESEARCH_MAX:
            local.presearch = (matrix, vectors, np.ascontiguousarray((matrix.vectors @ vectors.T).T))

    def _similarities(self, matrix: ScopeMatrix, vectors: npt.NDArray[np.float32], i: int) -> npt.NDArray[np.float32]:
        """``matrix.vectors @ vectors[i]`` (a new array), from the `_presearch`
        scores of the rows it already had and a product over the rest."""
        found = getattr(self._local(), "presearch", None)
        if found is not None:
            before, given, scores = found
            if given is vectors and before.prefix_of(matrix):
                joined: npt.NDArray[np.float32] = np.concatenate([scores[i], matrix.vectors[before.n :] @ vectors[i]])
                return joined
        fresh: npt.NDArray[np.float32] = matrix.vectors @ vectors[i]
        return fresh

    def _after_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` when the write transaction of this thread commits (never if it rolls back)."""
        stack = self._local().__dict__.get("pending")
        if not stack:
            raise RuntimeError("_after_commit outside a write transaction")
        stack[-1].append(action)

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
        """Mark the scope's searchable rows changed (removed or replaced: cached
        matrices are rebuilt, see `_appended` for rows only added); the new generation."""
        row = self._x(cur, "UPDATE scopes SET gen = gen + 1, cut_gen = gen + 1 WHERE id = ? RETURNING gen", (sid,))
        return int(row.fetchone()[0])

    def _scope_ids_of(self, cur: Any, scope: Scope) -> list[int]:
        """The ids of the stored scopes ``scope`` covers (one at most when exact)."""
        if scope.exact:
            sid = self._scope_id(cur, scope, create=False)
            return [] if sid is None else [sid]
        where, params = _wide_filter(scope)
        return [int(r[0]) for r in self._x(cur, f"SELECT id FROM scopes WHERE {where}", params).fetchall()]

    def _generation(self, cur: Any, scope: Scope, sids: list[int]) -> tuple[object, int | None]:
        """The generation of the scope's searchable rows (a wide scope: of every
        scope it covers) and, for an exact scope, the last one that removed rows."""
        if scope.exact:
            row = self._x(cur, "SELECT gen, cut_gen FROM scopes WHERE id = ?", (sids[0],)).fetchone()
            return (int(row[0]), int(row[1])) if row else (-1, None)
        where, params = _wide_filter(scope)
        row = self._x(cur, f"SELECT COALESCE(SUM(gen), 0), COUNT(*) FROM scopes WHERE {where}", params).fetchone()
        return (int(row[0]), int(row[1])), None

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

    def _setup_updates(self, supersede_threshold: float | None) -> None:
        if supersede_threshold is not None and (
            isinstance(supersede_threshold, bool) or not isinstance(supersede_threshold, (int, float))
            or not 0.0 < supersede_threshold <= 1.0
        ):
            raise InvalidInputError(
                f"supersede_threshold: must be in (0, 1] or None (never supersede), got {supersede_threshold!r}"
            )
        self.supersede_threshold = supersede_threshold

    def add(self, memory: Memory, *, scope: Scope, embedding: Any = None, merge: bool = True) -> AddResult:
        """Store ``memory`` in ``scope``; what that did, as an `AddResult`:
        the id of the memory that is current afterwards, with ``.action``
        (``"added"``, ``"merged"`` or ``"superseded"``) and ``.replaced``.

        Knowledge updates (the rules: `ctxfold.memory.updates`): the memory
        is compared with the most similar active memories of the same
        category in the same scope.

        - One that says the same in other words, at a cosine of at least
          ``merge_threshold``, absorbs it (tags united, the higher confidence
          kept): ``"merged"``, with that memory's id. Adding the very same
          memory again (same category and content) merges it into itself and
          changes nothing.
        - One that makes the same statement with another value (negated, or
          another number, version, date or name), at a cosine of at least
          ``supersede_threshold``, is replaced: the new memory is stored with
          ``supersedes`` = the old id, the old one moves to the archive with
          ``archived_reason == "superseded"`` and ``superseded_by`` = the new
          id: ``"superseded"``, ``.replaced`` = the old id. Every such memory
          among the closest goes the same way (``.replaced`` names the
          closest). Search and `get` see only the current memory; `history`
          gives the chain.
        - The closest memory that is either decides between the two.
        - Anything else is stored as it is: ``"added"``.

        ``merge=False`` skips the comparison (neither merge nor supersede;
        an exact duplicate is still stored once). The result is a ``str``
        subclass rather than a result object because callers keep using the
        return value as the id (store it, compare it, pass it to `get`).
        ``embedding``: a precomputed vector (else the content is embedded).
        Confidence below the category's minimum raises `InvalidInputError`;
        a wrong dimension `StoreError`."""
        return self.add_many([memory], scope=scope, embeddings=None if embedding is None else [embedding], merge=merge)[0]

    def add_many(
        self, memories: Iterable[Memory], *, scope: Scope, embeddings: Any = None, merge: bool = False,
        _replace: str = "",
    ) -> list[AddResult]:
        """Store many memories in one transaction (the bulk path); an
        `AddResult` for each, in order. As `add`, except that the comparison
        (merge or supersede) is off unless ``merge=True``: it costs a scan of
        the scope per batch (exact duplicates are still stored once). With
        ``merge=True`` a memory is also compared with the earlier ones of its
        batch."""
        check_scope(scope, write=True)
        if isinstance(memories, Memory):
            raise InvalidTypeError("memories: expected a list of Memory, got one Memory. Fix: use add() or [memory]")
        memories = check_memories(memories)
        now = time.time()
        prepared = [prepare(m, scope, now, argument=f"memories[{i}]") for i, m in enumerate(memories)]
        if not prepared:
            return []
        vectors = self._vectors([m.content for m in prepared], embeddings, "embeddings")
        if merge:
            self._presearch(scope, vectors)
        with self._write() as cur:
            self._check_dim(cur, vectors.shape[1], "embeddings" if embeddings is not None else "embedder")
            sid = self._scope_id(cur, scope, create=True)
            assert sid is not None
            self._archive_expired(cur, [sid], now)
            existing = self._existing_ids(cur, sid, [m.id for m in prepared])
            ids, fresh, rows, retire = self._plan_adds(
                cur, scope, sid, prepared, vectors, existing, merge, now, _replace
            )
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
                self._appended(cur, sid, fresh, vectors)
            for mid, record in rows:
                self._x(cur, "UPDATE memories SET record = ? WHERE scope_id = ? AND id = ?", (encode(record), sid, mid))
            self._retire(cur, sid, [m.id for _, m in fresh], retire, now)
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
        existing: set[str], merge: bool, now: float, replace: str = "",
    ) -> tuple[list[AddResult], list[tuple[int, Memory]], list[tuple[str, Memory]], list[tuple[str, str]]]:
        """What each memory does (see `add`): the results in input order, the
        new (index, memory) pairs to insert, the merged records to update and
        the (old id, new id) pairs to archive as superseded. ``replace``: the
        id the (single) memory supersedes whatever it says (`supersede`)."""
        merge_at = self.merge_threshold if merge else None
        supersede_at = self.supersede_threshold if merge else None
        floor = min((t for t in (merge_at, supersede_at) if t is not None), default=None)
        matrix = self._matrix(cur, scope, [sid]) if floor is not None else None
        if replace and self._get_record(cur, sid, replace) is None:
            row = self._x(cur, "SELECT record FROM archive WHERE scope_id = ? AND id = ?", (sid, replace)).fetchone()
            done = None if row is None else decoder.decode(row[0])
            new_id = prepared[0].id if len(prepared) == 1 else ""
            if done is not None and done.superseded_by == new_id and new_id in existing:
                # The same supersede again (a retry after a lost connection): already done.
                return [AddResult(new_id, "superseded", replace)], [], [], []
            raise StoreError(
                f"memory_id: no active memory {replace!r} in {scope}. Fix: pass the id add() returned "
                "(history() shows what replaced an archived one)"
            )
        results: list[AddResult] = []
        fresh: list[tuple[int, Memory]] = []
        merged: dict[str, Memory] = {}
        retire: list[tuple[str, str]] = []
        batch: set[str] = set()
        gone: set[str] = set()  # superseded by an earlier memory of this batch
        for i, m in enumerate(prepared):
            if m.superseded_by or m.archived_reason or m.archived_at is not None:
                # An archived record added again is current again.
                m = msgspec.structs.replace(m, superseded_by="", archived_reason="", archived_at=None)
            if replace:
                if m.id == replace:
                    results.append(AddResult(m.id, "merged", m.id))
                    continue
                if m.id in existing:
                    base = merged.get(m.id) or self._get_record(cur, sid, m.id)
                    if base is not None:
                        merged[m.id] = msgspec.structs.replace(base, supersedes=replace, updated_at=now)
                else:
                    fresh.append((i, msgspec.structs.replace(m, supersedes=replace)))
                    batch.add(m.id)
                retire.append((replace, m.id))
                results.append(AddResult(m.id, "superseded", replace))
                continue
            if m.id in existing or m.id in batch:
                results.append(AddResult(m.id, "merged", m.id))
                continue
            decision = None
            if floor is not None:
                decision = self._decide(
                    cur, sid, m, vectors, i, matrix, fresh, merged, gone, merge_at, supersede_at, floor, now
                )
            if decision is None:
                fresh.append((i, m))
                batch.add(m.id)
                results.append(AddResult(m.id, "added"))
                continue
            action, target = decision
            if action == "merged":
                if isinstance(target, int):  # an earlier memory of this batch
                    into = fresh[target][1]
                    fresh[target] = (fresh[target][0], merge_into(into, m, now))
                    results.append(AddResult(into.id, "merged", into.id))
                else:
                    base = merged.get(target) or self._get_record(cur, sid, target)
                    assert base is not None  # _decide read it in this transaction
                    merged[target] = merge_into(base, m, now)
                    results.append(AddResult(target, "merged", target))
                continue
            olds = [fresh[t][1].id if isinstance(t, int) else t for t in target]
            fresh.append((i, msgspec.structs.replace(m, supersedes=olds[0])))
            batch.add(m.id)
            for old in olds:
                gone.add(old)
                retire.append((old, m.id))
            results.append(AddResult(m.id, "superseded", olds[0]))
        return results, fresh, list(merged.items()), retire

    def _decide(
        self, cur: Any, sid: int, m: Memory, vectors: npt.NDArray[np.float32], i: int, matrix: ScopeMatrix | None,
        fresh: list[tuple[int, Memory]], merged: dict[str, Memory], gone: set[str],
        merge_at: float | None, supersede_at: float | None, floor: float, now: float,
    ) -> tuple[str, Any] | None:
        """Whether ``m`` merges into or supersedes the most similar active
        memories of its category: (``"merged"``, the one it merges into) or
        (``"superseded"``, every candidate it updates, closest first), each
        a stored id or a position in ``fresh``; None when it is new. The
        closest candidate that is either decides. The cosine only picks the
        candidates; `compare` reads the texts."""
        code = CATEGORY_CODES[m.category]
        candidates: list[tuple[float, str | int]] = []
        if matrix is not None and matrix.n:
            sims = self._similarities(matrix, vectors, i)
            sims[(matrix.categories != code) | (matrix.expires <= now)] = -np.inf
            above = np.flatnonzero(sims >= floor)
            if len(above) > CANDIDATES + len(gone):
                above = above[np.argpartition(-sims[above], CANDIDATES + len(gone) - 1)[: CANDIDATES + len(gone)]]
            ids = matrix.ids
            candidates += [(float(sims[k]), ids[int(k)]) for k in above if ids[int(k)] not in gone]
        same = [p for p, (_, f) in enumerate(fresh) if f.category == m.category and f.id not in gone]
        if same:
            sims = vectors[[fresh[p][0] for p in same]] @ vectors[i]
            candidates += [(float(c), p) for c, p in zip(sims, same) if c >= floor]
        if not candidates:
            return None
        candidates.sort(key=lambda c: -c[0])
        candidates = candidates[:CANDIDATES]
        stored = self._records(cur, sid, [t for _, t in candidates if isinstance(t, str) and t not in merged])
        updated: list[str | int] = []
        for cosine, target in candidates:
            old = fresh[target][1] if isinstance(target, int) else merged.get(target) or stored.get(target)
            if old is None:
                continue
            kind = compare(old.content, m.content).kind
            if kind == "same" and merge_at is not None and cosine >= merge_at and not updated:
                return "merged", target
            if kind == "update" and supersede_at is not None and cosine >= supersede_at:
                # Every stored statement of the old value goes, not only the closest.
                updated.append(target)
        return ("superseded", updated) if updated else None

    def _records(self, cur: Any, sid: int, ids: list[str]) -> dict[str, Memory]:
        if not ids:
            return {}
        marks = ", ".join("?" * len(ids))
        rows = self._x(cur, f"SELECT id, record FROM memories WHERE scope_id = ? AND id IN ({marks})", (sid, *ids))
        return {r[0]: decoder.decode(r[1]) for r in rows.fetchall()}

    def _retire(self, cur: Any, sid: int, added: list[str], retire: list[tuple[str, str]], now: float) -> None:
        """After the inserts of an add: memories stored again leave the
        archive (they are current again) and the superseded ones enter it,
        each linked to its successor."""
        for start in range(0, len(added), _CHUNK):
            chunk = added[start : start + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            self._x(cur, f"DELETE FROM archive WHERE scope_id = ? AND id IN ({marks})", (sid, *chunk))
        successors: dict[str, list[str]] = {}
        for old, new in retire:
            successors.setdefault(new, []).append(old)
        for new, olds in successors.items():
            self._move_to_archive(cur, sid, olds, "superseded", now, superseded_by=new)

    def _get_record(self, cur: Any, sid: int, mid: str) -> Memory | None:
        row = self._x(cur, "SELECT record FROM memories WHERE scope_id = ? AND id = ?", (sid, mid)).fetchone()
        return None if row is None else decoder.decode(row[0])

    def get(self, memory_id: str, *, scope: Scope) -> Memory | None:
        """The active memory ``memory_id`` in ``scope`` (None if absent, expired
        or archived: see `get_archived`). A wide scope returns the first match."""
        check_scope(scope, write=False)
        if not isinstance(memory_id, str):
            raise InvalidTypeError(f"memory_id: expected str, got {type(memory_id).__name__}")
        text(memory_id, "memory_id", column=True)
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
        text(category, "category", column=True, optional=True)
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
        k, threshold = integer(k, "k"), number(threshold, "threshold", optional=True)
        if isinstance(query, str):
            text(query, "query")
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
        """The scope's search matrix as of its generation now (cached; a matrix
        that is behind gets the rows appended since, or is rebuilt when rows
        were removed). The result never changes: hold it for as long as needed."""
        key: Any = ("exact", sids[0]) if scope.exact else ("wide", scope.values())
        generation, cut = self._generation(cur, scope, sids)
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
                    rows = self._x(
                        cur,
                        "SELECT scope_id, id, category, expires_at, embedding FROM memories "
                        "WHERE scope_id = ? AND gen > ? AND gen <= ? ORDER BY gen, rid",
                        (sids[0], held_generation, generation),
                    ).fetchall()
                    return self._matrices.put(key, generation, self._with_rows(held, rows))
            # The ids in hand, not `_scope_filter`: inside the write that created the scope that would
            # cache its id for other threads before the row is committed.
            where, params = ("scope_id = ?", (sids[0],)) if scope.exact else self._scope_filter(cur, scope)
            sql = f"SELECT scope_id, id, category, expires_at, embedding FROM memories WHERE {where}"
            if cut is not None:
                # Rows committed after the generation was read wait for the next catch-up.
                sql, params = sql + " AND gen <= ?", (*params, generation)
            rows = self._x(cur, sql + " ORDER BY rid", params).fetchall()
            # Room to append the next writes in place (a copy would also lose a `_presearch`).
            capacity = len(rows) + len(rows) // 8 + 16
            matrix = self._with_rows(ScopeMatrix(self._stored_dim(cur) or 1, capacity), rows)
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

    def _appended(self, cur: Any, sid: int, fresh: list[tuple[int, Memory]], vectors: npt.NDArray[np.float32]) -> int:
        """Record that ``fresh`` (index into ``vectors``, memory) were just
        inserted into scope ``sid``: bump its generation, stamp the rows with
        it and, once the transaction commits, append them to this store's
        cached matrix of the scope; the new generation. The rows are
        stamped only if this transaction inserted them (``gen = 0``), so a
        row another writer inserted first is never appended twice."""
        gen = int(self._x(cur, "UPDATE scopes SET gen = gen + 1 WHERE id = ? RETURNING gen", (sid,)).fetchone()[0])
        by_id = {m.id: (i, m) for i, m in fresh}
        stamped: list[tuple[int, str]] = []
        ids = list(by_id)
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            stamped += self._x(
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

        self._after_commit(after_commit)
        return gen

    # --- effectiveness, archive, deletion ------------------------------------------------

    def record_application(self, memory_id: str, *, scope: Scope, success: bool) -> Memory:
        """Count one application of the memory (and whether it worked); the updated memory."""
        check_scope(scope, write=True)
        text(memory_id, "memory_id", column=True)
        with self._write() as cur:
            sid = self._scope_id(cur, scope, create=False)
            record = None if sid is None else self._get_record(cur, sid, memory_id)
            if record is None:
                raise StoreError(f"memory_id: no memory {memory_id!r} in {scope}. Fix: pass the id add() returned")
            record.effectiveness.record(success)
            record.updated_at = time.time()
            self._x(cur, "UPDATE memories SET record = ? WHERE scope_id = ? AND id = ?", (encode(record), sid, memory_id))
        return record

    def supersede(self, memory_id: str, new: Memory, *, scope: Scope, embedding: Any = None) -> AddResult:
        """Replace the active memory ``memory_id`` by ``new`` whatever their
        texts say, in one transaction: ``new`` is stored with ``supersedes``
        = ``memory_id``, which moves to the archive as superseded by it (see
        `history`). ``"superseded"`` with the new id (``"merged"``, nothing
        changed, when ``new`` is that same memory). Raises `StoreError` when
        ``memory_id`` is not active in ``scope``."""
        if not isinstance(memory_id, str):
            raise InvalidTypeError(f"memory_id: expected str, got {type(memory_id).__name__}")
        text(memory_id, "memory_id", column=True)
        if not isinstance(new, Memory):
            raise InvalidTypeError(f"new: expected a ctxfold.memory.Memory, got {type(new).__name__}")
        embeddings = None if embedding is None else [embedding]
        return self.add_many([new], scope=scope, embeddings=embeddings, _replace=str(memory_id))[0]

    def history(self, memory_id: str, *, scope: Scope) -> list[Memory]:
        """The knowledge updates ``memory_id`` belongs to, oldest first: the
        memories it superseded, itself, and those that superseded it, up to
        the current one. Search and `get` return only current memories; this
        is how to ask for the superseded ones (archived: ``status ==
        "archived"``, ``archived_reason == "superseded"``, ``superseded_by``
        = the next one's id). ``[]`` when ``memory_id`` is neither active nor
        archived in ``scope`` (a wide scope: the first scope holding it)."""
        check_scope(scope, write=False)
        if not isinstance(memory_id, str):
            raise InvalidTypeError(f"memory_id: expected str, got {type(memory_id).__name__}")
        text(memory_id, "memory_id", column=True)
        with self._read() as cur:
            where, params = self._scope_filter(cur, scope)
            found = self._any_record(cur, where, params, memory_id)
            if found is None:
                return []
            sid, record = found
            chain, seen = [record], {record.id}
            # Each link is one lookup in the scope the chain started in; ``seen`` stops a cycle
            # (a memory superseded and later added again).
            for backwards in (True, False):
                while True:
                    link = chain[0].supersedes if backwards else chain[-1].superseded_by
                    step = None if not link or link in seen else self._any_record(cur, "scope_id = ?", (sid,), link)
                    if step is None:
                        break
                    seen.add(step[1].id)
                    if backwards:
                        chain.insert(0, step[1])
                    else:
                        chain.append(step[1])
        return chain

    def _any_record(self, cur: Any, where: str, params: tuple[Any, ...], mid: str) -> tuple[int, Memory] | None:
        """(scope id, record) of ``mid``, active or archived."""
        for table in ("memories", "archive"):
            row = self._x(
                cur, f"SELECT scope_id, record FROM {table} WHERE {where} AND id = ? ORDER BY rid LIMIT 1",
                (*params, mid),
            ).fetchone()
            if row is not None:
                return int(row[0]), decoder.decode(row[1])
        return None

    def archive(self, memory_id: str, *, scope: Scope, reason: str = "archived") -> bool:
        """Move a memory to the archive; False if it was not active in ``scope``."""
        check_scope(scope, write=True)
        text(memory_id, "memory_id", column=True)
        text(reason, "reason", column=True)
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
        text(category, "category", column=True, optional=True)
        with self._read() as cur:
            where, params = self._scope_filter(cur, scope)
            sql, args = f"SELECT record FROM archive WHERE {where}", list(params)
            if category is not None:
                sql += " AND category = ?"
                args.append(category)
            rows = self._x(cur, sql + " ORDER BY archived_at, rid", args).fetchall()
        return [decoder.decode(r[0]) for r in rows]

    def get_archived(self, memory_id: str, *, scope: Scope) -> Memory | None:
        """The archived memory ``memory_id`` of ``scope`` (None if it is not
        archived): ``archived_reason`` says why, ``superseded_by`` names the
        memory that replaced a superseded one."""
        check_scope(scope, write=False)
        text(memory_id, "memory_id", column=True)
        with self._read() as cur:
            where, params = self._scope_filter(cur, scope)
            row = self._x(cur, f"SELECT record FROM archive WHERE {where} AND id = ? LIMIT 1", (*params, memory_id)).fetchone()
        return None if row is None else decoder.decode(row[0])

    def delete(self, memory_id: str, *, scope: Scope) -> bool:
        """Delete a memory for good (not archived); False if it was not there."""
        check_scope(scope, write=True)
        text(memory_id, "memory_id", column=True)
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
        memory, episodes, iteration records, agent messages, compaction
        summaries, memo values: every table in `SCOPED_TABLES`) and nothing
        else; how many rows went. A wide scope clears every scope it covers."""
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
        """Write the active memories of ``scope`` as one YAML file per category,
        each with a record count and sha256, replaced atomically; the paths."""
        from ctxfold.memory.export import export_yaml

        return export_yaml(self, directory, scope=scope)

    def import_yaml(self, directory: Any, *, scope: Scope, verify: bool = True) -> list[str]:
        """Add the memories of the YAML files `export_yaml` wrote; their ids. All
        or nothing: a cut-short, changed or old-format file raises `StoreError`
        (``verify=False`` skips the count and digest check)."""
        from ctxfold.memory.export import import_yaml

        return import_yaml(self, directory, scope=scope, verify=verify)


def _later(a: object, b: object) -> bool:
    """Whether generation ``a`` comes after ``b`` (generations never go back)."""
    try:
        return bool(a > b)  # type: ignore[operator]
    except TypeError:
        return False


def _wide_filter(scope: Scope) -> tuple[str, tuple[Any, ...]]:
    parts, params = [], []
    for name in SCOPE_FIELDS:
        value = getattr(scope, name)
        if value is not None:
            parts.append(f"{name} = ?")
            params.append(value)
    return (" AND ".join(parts) or "1 = 1"), tuple(params)
