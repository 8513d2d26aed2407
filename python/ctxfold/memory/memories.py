"""`Memories` (``store.memories``): the typed memories of each scope, their
knowledge updates (merge, supersede; the rules: `ctxfold.memory.updates`),
semantic search over them, effectiveness counts and YAML export.

An add or a supersede is one transaction; the memories it replaces move to
``store.archive`` in it (see `ctxfold.memory.archive`), and its rows join the
scope's search matrix once it commits (see `ctxfold.memory.index`).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from ctxfold.errors import InvalidInputError, InvalidTypeError, StoreError
from ctxfold.memory.archive import MemoryArchive
from ctxfold.memory.backend import Backend, Part
from ctxfold.memory.checks import check_memories, integer, number, text
from ctxfold.memory.embedding import embed_texts, to_blob, unit_rows
from ctxfold.memory.index import CATEGORY_CODES, SearchIndex
from ctxfold.memory.matrix import ScopeMatrix, select_top
from ctxfold.memory.records import Memory, decoder, encode
from ctxfold.memory.scope import Scope, check_scope
from ctxfold.memory.typed import CATEGORIES, merge_into, prepare
from ctxfold.memory.updates import CANDIDATES, MERGE_THRESHOLD, SUPERSEDE_THRESHOLD, AddResult, compare

__all__ = ["Memories", "check_options"]

_CHUNK = 500


def check_options(merge_threshold: Any, supersede_threshold: Any, matrix_cache_bytes: Any) -> None:
    """The memory options of a store's constructor, refused with the fix when out of range."""
    if merge_threshold is not None and (
        isinstance(merge_threshold, bool) or not isinstance(merge_threshold, (int, float))
        or not 0.0 < merge_threshold <= 1.0
    ):
        raise InvalidInputError(f"merge_threshold: must be in (0, 1] or None (never merge), got {merge_threshold!r}")
    if isinstance(matrix_cache_bytes, bool) or not isinstance(matrix_cache_bytes, int) or matrix_cache_bytes < 0:
        raise InvalidInputError(f"matrix_cache_bytes: must be an int >= 0, got {matrix_cache_bytes!r}")
    if supersede_threshold is not None and (
        isinstance(supersede_threshold, bool) or not isinstance(supersede_threshold, (int, float))
        or not 0.0 < supersede_threshold <= 1.0
    ):
        raise InvalidInputError(
            f"supersede_threshold: must be in (0, 1] or None (never supersede), got {supersede_threshold!r}"
        )


class Memories(Part):
    """Typed memories by scope: add, get, list, search, update history."""

    idempotent = frozenset({"add", "add_many", "supersede", "import_yaml", "export_yaml"})

    def __init__(
        self,
        backend: Backend,
        archive: MemoryArchive,
        *,
        merge_threshold: float | None = MERGE_THRESHOLD,
        supersede_threshold: float | None = SUPERSEDE_THRESHOLD,
        matrix_cache_bytes: int = 1 << 30,
    ) -> None:
        super().__init__(backend)
        check_options(merge_threshold, supersede_threshold, matrix_cache_bytes)
        self._archive = archive
        self._index = SearchIndex(backend, matrix_cache_bytes)
        #: The cosine from which an added memory that restates a stored one in other words merges into it.
        self.merge_threshold = merge_threshold
        #: The cosine from which an added memory that restates a stored one with another value supersedes it.
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
            self._index.presearch(scope, vectors)
        with self.backend.write() as cur:
            self.backend.check_dim(cur, vectors.shape[1], "embeddings" if embeddings is not None else "embedder")
            sid = self.backend.scope_id(cur, scope, create=True)
            assert sid is not None
            self._archive._expire(cur, [sid], now)
            existing = self._existing_ids(cur, sid, [m.id for m in prepared])
            ids, fresh, rows, retire = self._plan_adds(
                cur, scope, sid, prepared, vectors, existing, merge, now, _replace
            )
            if fresh:
                self.backend.executemany(
                    cur,
                    "INSERT INTO memories (scope_id, id, category, created_at, expires_at, record, embedding) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope_id, id) DO NOTHING",
                    [
                        (sid, m.id, m.category, m.created_at, m.expires_at, encode(m), to_blob(vectors[i]))
                        for i, m in fresh
                    ],
                )
                self._index.appended(cur, sid, fresh, vectors)
            for mid, record in rows:
                self.backend.execute(cur, "UPDATE memories SET record = ? WHERE scope_id = ? AND id = ?", (encode(record), sid, mid))
            self._retire(cur, sid, [m.id for _, m in fresh], retire, now)
        return ids

    def _existing_ids(self, cur: Any, sid: int, ids: list[str]) -> set[str]:
        found: set[str] = set()
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start : start + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            rows = self.backend.execute(cur, f"SELECT id FROM memories WHERE scope_id = ? AND id IN ({marks})", (sid, *chunk))
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
        matrix = self._index.matrix(cur, scope, [sid]) if floor is not None else None
        if replace and self._get_record(cur, sid, replace) is None:
            row = self.backend.execute(cur, "SELECT record FROM archive WHERE scope_id = ? AND id = ?", (sid, replace)).fetchone()
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
            sims = self._index.similarities(matrix, vectors, i)
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
        rows = self.backend.execute(cur, f"SELECT id, record FROM memories WHERE scope_id = ? AND id IN ({marks})", (sid, *ids))
        return {r[0]: decoder.decode(r[1]) for r in rows.fetchall()}

    def _retire(self, cur: Any, sid: int, added: list[str], retire: list[tuple[str, str]], now: float) -> None:
        """After the inserts of an add: memories stored again leave the
        archive (they are current again) and the superseded ones enter it,
        each linked to its successor."""
        for start in range(0, len(added), _CHUNK):
            chunk = added[start : start + _CHUNK]
            marks = ", ".join("?" * len(chunk))
            self.backend.execute(cur, f"DELETE FROM archive WHERE scope_id = ? AND id IN ({marks})", (sid, *chunk))
        successors: dict[str, list[str]] = {}
        for old, new in retire:
            successors.setdefault(new, []).append(old)
        for new, olds in successors.items():
            self._archive._move(cur, sid, olds, "superseded", now, superseded_by=new)

    def _get_record(self, cur: Any, sid: int, mid: str) -> Memory | None:
        row = self.backend.execute(cur, "SELECT record FROM memories WHERE scope_id = ? AND id = ?", (sid, mid)).fetchone()
        return None if row is None else decoder.decode(row[0])

    def get(self, memory_id: str, *, scope: Scope) -> Memory | None:
        """The active memory ``memory_id`` in ``scope`` (None if absent, expired
        or archived: see ``store.archive.get``). A wide scope returns the first match."""
        check_scope(scope, write=False)
        check_memory_id(memory_id)
        with self.backend.read() as cur:
            where, params = self.backend.scope_filter(cur, scope)
            row = self.backend.execute(
                cur,
                f"SELECT record FROM memories WHERE {where} AND id = ? AND (expires_at IS NULL OR expires_at > ?) "
                "ORDER BY rid LIMIT 1",
                (*params, memory_id, time.time()),
            ).fetchone()
        return None if row is None else decoder.decode(row[0])

    def all(self, *, scope: Scope, category: str | None = None) -> list[Memory]:
        """Every active (unexpired) memory in ``scope``, oldest first."""
        check_scope(scope, write=False)
        text(category, "category", column=True, optional=True)
        with self.backend.read() as cur:
            where, params = self.backend.scope_filter(cur, scope)
            sql = f"SELECT record FROM memories WHERE {where} AND (expires_at IS NULL OR expires_at > ?)"
            args: list[Any] = [*params, time.time()]
            if category is not None:
                sql += " AND category = ?"
                args.append(category)
            rows = self.backend.execute(cur, sql + " ORDER BY created_at, rid", args).fetchall()
        return [decoder.decode(r[0]) for r in rows]

    def count(self, *, scope: Scope) -> int:
        """How many active memories ``scope`` holds."""
        check_scope(scope, write=False)
        with self.backend.read() as cur:
            where, params = self.backend.scope_filter(cur, scope)
            row = self.backend.execute(
                cur, f"SELECT COUNT(*) FROM memories WHERE {where} AND (expires_at IS NULL OR expires_at > ?)",
                (*params, time.time()),
            ).fetchone()
        return int(row[0])

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
            q = embed_texts(self.backend.embedder, [query])[0]
        else:
            q = unit_rows(query, "query")
            if len(q) != 1:
                raise InvalidInputError(f"query: expected one vector, got {len(q)} rows")
            q = q[0]
        now = time.time()
        with self.backend.read() as cur:
            sids = self.backend.scope_ids_of(cur, scope)
            if not sids or k == 0:
                return []
            dim = self.backend.stored_dim(cur)
            if dim is None:
                return []
            if len(q) != dim:
                raise StoreError(
                    f"query: {len(q)}-dimensional embedding, but the store {self.backend.location} holds {dim}-dimensional "
                    "ones. Fix: search with the embedder the store was filled with (embedder=...)"
                )
            matrix = self._index.matrix(cur, scope, sids)
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
            rows = self.backend.execute(cur, f"SELECT id, record FROM memories WHERE scope_id = ? AND id IN ({marks})", (sid, *ids))
            records.update(((sid, r[0]), r[1]) for r in rows.fetchall())
        out = []
        for i, score in hits:
            raw = records.get((int(matrix.scope_ids[i]), matrix.ids[i]))
            if raw is not None:
                memory = decoder.decode(raw)
                memory.score = score
                out.append(memory)
        return out

    def record_application(self, memory_id: str, *, scope: Scope, success: bool) -> Memory:
        """Count one application of the memory (and whether it worked); the updated memory."""
        check_scope(scope, write=True)
        text(memory_id, "memory_id", column=True)
        with self.backend.write() as cur:
            sid = self.backend.scope_id(cur, scope, create=False)
            record = None if sid is None else self._get_record(cur, sid, memory_id)
            if record is None:
                raise StoreError(f"memory_id: no memory {memory_id!r} in {scope}. Fix: pass the id add() returned")
            record.effectiveness.record(success)
            record.updated_at = time.time()
            self.backend.execute(cur, "UPDATE memories SET record = ? WHERE scope_id = ? AND id = ?", (encode(record), sid, memory_id))
        return record

    def supersede(self, memory_id: str, new: Memory, *, scope: Scope, embedding: Any = None) -> AddResult:
        """Replace the active memory ``memory_id`` by ``new`` whatever their
        texts say, in one transaction: ``new`` is stored with ``supersedes``
        = ``memory_id``, which moves to the archive as superseded by it (see
        `history`). ``"superseded"`` with the new id (``"merged"``, nothing
        changed, when ``new`` is that same memory). Raises `StoreError` when
        ``memory_id`` is not active in ``scope``."""
        check_memory_id(memory_id)
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
        check_memory_id(memory_id)
        with self.backend.read() as cur:
            where, params = self.backend.scope_filter(cur, scope)
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
            row = self.backend.execute(
                cur, f"SELECT scope_id, record FROM {table} WHERE {where} AND id = ? ORDER BY rid LIMIT 1",
                (*params, mid),
            ).fetchone()
            if row is not None:
                return int(row[0]), decoder.decode(row[1])
        return None

    def delete(self, memory_id: str, *, scope: Scope) -> bool:
        """Delete a memory for good (not archived); False if it was not there."""
        check_scope(scope, write=True)
        text(memory_id, "memory_id", column=True)
        with self.backend.write() as cur:
            sid = self.backend.scope_id(cur, scope, create=False)
            if sid is None:
                return False
            gone = self.backend.execute(cur, "DELETE FROM memories WHERE scope_id = ? AND id = ? RETURNING id", (sid, memory_id)).fetchall()
            if gone:
                self.backend.bump(cur, sid)
            return bool(gone)

    def _vectors(self, texts: list[str], given: Any, argument: str) -> npt.NDArray[np.float32]:
        if given is None:
            return embed_texts(self.backend.embedder, texts)
        vectors = unit_rows(given, argument)
        if len(vectors) != len(texts):
            raise InvalidInputError(f"{argument}: {len(vectors)} rows for {len(texts)} memories; pass one row each")
        return vectors


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


def check_memory_id(memory_id: object) -> None:
    """The checks of a `memory_id` argument: a str, valid as a column value."""
    if not isinstance(memory_id, str):
        raise InvalidTypeError(f"memory_id: expected str, got {type(memory_id).__name__}")
    text(memory_id, "memory_id", column=True)
