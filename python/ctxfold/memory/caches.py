"""The engine's caches (``store.caches``), kept in the store so a restarted
process does not recompute:

- **compaction summaries** keyed by (scope, message range, level, content
  hash), with the summary's token count: `put_compaction` / `get_compaction`
  / `compactions`; `get_summary` / `put_summary` are the engine's short form
  (``(content_hash, level)``, no conversation or range);
- a **memoisation cache** with TTL: `memo_get` / `memo_set` (`memo_set_many`) / `memoize`
  (values: anything msgpack encodes — str, numbers, lists, dicts, bytes);
- **embeddings** keyed by (content hash, model): `get_embeddings` /
  `put_embeddings`, or `embedding_cache(model)` for an object with the
  ``get_many``/``put_many`` API `ctxfold.Embedder(cache=...)` takes.

Summaries and memo values hold content, so they belong to a scope like every
other record (``scope=``; `clear` deletes them with the rest of the scope).
Without ``scope=`` a compaction summary is kept in ``Scope(conversation_id=...)``
and the short-form summaries and memo values in ``Scope()``: shared by every
caller that passes no scope, never seen by a scope with a user, agent or
session. The embedding cache is global: it is keyed by the hash of a text, so
only a caller who already has the text finds its vector.
"""

from __future__ import annotations

import functools
import hashlib
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import msgspec
import numpy as np
import numpy.typing as npt

from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.memory.backend import Part
from ctxfold.memory.checks import integer, positive_seconds, storable, text
from ctxfold.memory.embedding import from_blobs, to_blob
from ctxfold.memory.scope import Scope, check_scope

__all__ = ["Caches", "CompactionSummary", "StoreEmbeddingCache"]

F = TypeVar("F", bound=Callable[..., Any])
_MISSING = object()
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder().decode
_CHUNK = 500


class CompactionSummary(msgspec.Struct, kw_only=True):
    """A stored summary of messages ``start`` to ``end`` of a conversation, at a
    compaction ``level``, keyed by the hash of what it summarises."""

    conversation_id: str
    start: int
    end: int
    level: int
    content_hash: str
    summary: str
    tokens: int
    created_at: float
    scope: Scope = msgspec.field(default_factory=Scope)
    """The exact scope the summary is kept in."""


def _compaction_scope(conversation_id: Any, scope: Any, *, write: bool) -> Scope:
    """The scope a conversation's summaries live in: ``scope`` (whose
    conversation must be ``conversation_id``; a wide one is narrowed to it) or
    ``Scope(conversation_id=conversation_id)``."""
    conversation_id = text(conversation_id, "conversation_id", column=True, key=write)
    if scope is None:
        return Scope(conversation_id=conversation_id)
    check_scope(scope, write=write)
    if scope.conversation_id is None:
        scope = msgspec.structs.replace(scope, conversation_id=conversation_id)
    elif scope.conversation_id != conversation_id:
        raise InvalidInputError(
            f"conversation_id: {conversation_id!r} is not the conversation of scope {scope}. "
            "Fix: pass the scope's conversation_id, or a scope of that conversation"
        )
    return check_scope(scope, write=write)


def _default_scope(scope: Any, *, write: bool) -> Scope:
    return Scope() if scope is None else check_scope(scope, write=write)


def _exact(scope: Scope, what: str) -> Scope:
    """``scope``, refused when wide: a cached value is looked up in one scope."""
    if not scope.exact:
        raise InvalidInputError(
            f"scope: {scope} is a wide scope; {what} is kept in one exact scope. "
            "Fix: pass the Scope it was stored in (every field a str, empty allowed)"
        )
    return scope


class Caches(Part):
    """Compaction summaries, embeddings and memoised values (``store.caches``)."""

    idempotent = frozenset({"put_compaction", "put_summary", "put_embeddings", "memo_set", "memo_set_many"})

    # --- compaction summaries -------------------------------------------------------

    def put_compaction(
        self, conversation_id: str, start: int, end: int, level: int, content_hash: str, summary: str, tokens: int,
        *, scope: Scope | None = None,
    ) -> None:
        """Keep the summary of messages ``start..end`` of a conversation at a
        compaction ``level`` (replacing one with the same key), in ``scope``
        (default ``Scope(conversation_id=conversation_id)``)."""
        start, end, level, tokens = (integer(v, n) for v, n in
                                     ((start, "start"), (end, "end"), (level, "level"), (tokens, "tokens")))
        content_hash = text(content_hash, "content_hash", key=True)
        summary = text(summary, "summary", column=True)
        target = _compaction_scope(conversation_id, scope, write=True)
        with self.backend.write() as cur:
            sid = self.backend.scope_id(cur, target, create=True)
            self.backend.execute(
                cur,
                "INSERT INTO summaries (scope_id, range_start, range_end, level, content_hash, summary, tokens, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope_id, range_start, range_end, "
                "level, content_hash) DO UPDATE SET summary = excluded.summary, tokens = excluded.tokens, "
                "created_at = excluded.created_at",
                (sid, start, end, level, content_hash, summary, tokens, time.time()),
            )

    def get_compaction(
        self, conversation_id: str, start: int, end: int, level: int, content_hash: str, *, scope: Scope | None = None
    ) -> CompactionSummary | None:
        """The summary `put_compaction` kept under that key in ``scope`` (exact), or None."""
        start, end, level = (integer(v, n) for v, n in ((start, "start"), (end, "end"), (level, "level")))
        content_hash = text(content_hash, "content_hash", column=True)
        target = _exact(_compaction_scope(conversation_id, scope, write=False), "a compaction summary")
        with self.backend.read() as cur:
            sid = self.backend.scope_id(cur, target, create=False)
            row = None if sid is None else self.backend.execute(
                cur,
                "SELECT summary, tokens, created_at FROM summaries WHERE scope_id = ? AND range_start = ? "
                "AND range_end = ? AND level = ? AND content_hash = ?",
                (sid, start, end, level, content_hash),
            ).fetchone()
        if row is None:
            return None
        return CompactionSummary(
            conversation_id=conversation_id, start=start, end=end, level=level, content_hash=content_hash,
            summary=row[0], tokens=int(row[1]), created_at=float(row[2]), scope=target,
        )

    def compactions(self, conversation_id: str, *, scope: Scope | None = None) -> list[CompactionSummary]:
        """Every cached summary of a conversation in ``scope`` (a wide scope:
        in every scope of it that has this conversation), by range."""
        target = _compaction_scope(conversation_id, scope, write=False)
        with self.backend.read() as cur:
            where, params = self.backend.scope_filter(cur, target, "m.scope_id")
            rows = self.backend.execute(
                cur,
                "SELECT m.range_start, m.range_end, m.level, m.content_hash, m.summary, m.tokens, m.created_at, "
                "s.user_id, s.agent_id, s.session_id FROM summaries m JOIN scopes s ON s.id = m.scope_id "
                f"WHERE {where} ORDER BY m.range_start, m.range_end, m.level, m.scope_id",
                params,
            ).fetchall()
        return [
            CompactionSummary(conversation_id=conversation_id, start=int(r[0]), end=int(r[1]), level=int(r[2]),
                              content_hash=r[3], summary=r[4], tokens=int(r[5]), created_at=float(r[6]),
                              scope=Scope(user_id=r[7], agent_id=r[8], session_id=r[9], conversation_id=conversation_id))
            for r in rows
        ]

    def get_summary(self, content_hash: str, level: int, *, scope: Scope | None = None) -> str | None:
        """The engine's summary cache: the summary of a text (by hash) at a
        level/target, in ``scope`` (default ``Scope()``)."""
        target = _exact(_default_scope(scope, write=False), "a summary")
        found = self.get_compaction(target.conversation_id or "", 0, 0, level, content_hash, scope=target)
        return None if found is None else found.summary

    def put_summary(
        self, content_hash: str, level: int, summary: str, tokens: int = 0, *, scope: Scope | None = None
    ) -> None:
        target = _default_scope(scope, write=True)
        self.put_compaction(target.conversation_id or "", 0, 0, level, content_hash, summary, tokens, scope=target)

    # --- embeddings -----------------------------------------------------------------------

    def get_embeddings(self, hashes: Sequence[str], model: str) -> dict[str, npt.NDArray[np.float32]]:
        """The cached vectors of ``hashes`` for ``model`` (missing ones are absent)."""
        found: dict[str, npt.NDArray[np.float32]] = {}
        model = text(model, "model", column=True)
        keys = list(dict.fromkeys(_hashes(hashes, write=False)))
        with self.backend.read() as cur:
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start : start + _CHUNK]
                marks = ", ".join("?" * len(chunk))
                rows = self.backend.execute(
                    cur, f"SELECT content_hash, dim, vector FROM embeddings WHERE model = ? AND content_hash IN ({marks})",
                    (model, *chunk),
                ).fetchall()
                for h, dim, blob in rows:
                    found[h] = from_blobs([bytes(blob)], int(dim))[0].copy()
        return found

    def put_embeddings(self, hashes: Sequence[str], model: str, vectors: npt.ArrayLike) -> None:
        """Cache one vector per hash for ``model`` (one transaction)."""
        model = text(model, "model", key=True)
        hashes = _hashes(hashes, write=True)
        array = np.asarray(vectors, dtype=np.float32)
        if array.ndim != 2 or len(array) != len(hashes):
            raise InvalidInputError(
                f"vectors: expected shape ({len(hashes)}, dim) (one row per hash), got {array.shape}"
            )
        if not len(hashes):
            return
        if not np.isfinite(array).all():
            raise InvalidInputError("vectors: hold NaN or infinite values. Fix: cache only finite embeddings")
        with self.backend.write() as cur:
            self.backend.executemany(
                cur,
                "INSERT INTO embeddings (content_hash, model, dim, vector) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (content_hash, model) DO UPDATE SET dim = excluded.dim, vector = excluded.vector",
                [(h, model, array.shape[1], to_blob(v)) for h, v in zip(hashes, array)],
            )

    def embedding_cache(self, model: str) -> StoreEmbeddingCache:
        """An `ctxfold.EmbeddingCache` (``get_many``/``put_many``) in this store for one model."""
        return StoreEmbeddingCache(self, model)

    # --- memoisation ----------------------------------------------------------------------

    def memo_get(self, namespace: str, key: Any, default: Any = None, *, scope: Scope | None = None) -> Any:
        """The value cached under (namespace, key) in ``scope`` (default
        ``Scope()``), or ``default`` if absent or expired."""
        target = _exact(_default_scope(scope, write=False), "a memo value")
        namespace = text(namespace, "namespace", column=True)
        memo_key = _memo_key(key, write=False)
        with self.backend.read() as cur:
            sid = self.backend.scope_id(cur, target, create=False)
            row = None if sid is None else self.backend.execute(
                cur, "SELECT value, expires_at FROM memo WHERE scope_id = ? AND namespace = ? AND key = ?",
                (sid, namespace, memo_key),
            ).fetchone()
        if row is None or (row[1] is not None and row[1] <= time.time()):
            return default
        return _decode(bytes(row[0]))

    def memo_set(self, namespace: str, key: Any, value: Any, *, ttl: float | None = None, scope: Scope | None = None) -> None:
        """Cache ``value`` in ``scope`` (default ``Scope()``) for ``ttl`` seconds
        (``None``: until replaced or purged)."""
        ttl = None if ttl is None else positive_seconds(ttl, "ttl")
        target = _default_scope(scope, write=True)
        namespace = text(namespace, "namespace", key=True)
        row_key = _memo_key(key, write=True)
        blob = _encode(storable(value, "value"))
        now = time.time()
        expires = None if ttl is None or math.isinf(ttl) else now + ttl
        self._memo_write(target, [(namespace, row_key, blob, now, expires)])

    def memo_set_many(self, namespace: str, values: Mapping[Any, Any], *, scope: Scope | None = None) -> None:
        """`memo_set` (no TTL) for each key and value of ``values``, in one transaction."""
        target = _default_scope(scope, write=True)
        namespace = text(namespace, "namespace", key=True)
        if not isinstance(values, Mapping):
            raise InvalidTypeError(f"values: expected a dict of key to value, got {type(values).__name__}")
        now = time.time()
        rows = [(namespace, _memo_key(k, write=True), _encode(storable(v, f"values[{k!r}]")), now, None)
                for k, v in values.items()]
        if rows:
            self._memo_write(target, rows)

    def _memo_write(self, scope: Scope, rows: list[tuple[Any, ...]]) -> None:
        with self.backend.write() as cur:
            sid = self.backend.scope_id(cur, scope, create=True)
            self.backend.executemany(
                cur,
                "INSERT INTO memo (scope_id, namespace, key, value, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (scope_id, namespace, key) DO UPDATE SET value = excluded.value, "
                "created_at = excluded.created_at, expires_at = excluded.expires_at",
                [(sid, *row) for row in rows],
            )

    def memo_purge(self, namespace: str | None = None, *, scope: Scope | None = None) -> int:
        """Delete entries; how many. ``memo_purge()``: the expired ones of every
        scope (they can no longer be read); ``memo_purge(namespace)``: all of
        ``namespace`` in ``scope`` (default ``Scope()``; a wide scope: in every
        scope it covers); ``memo_purge(scope=...)``: the expired ones of ``scope``."""
        namespace = text(namespace, "namespace", column=True, optional=True)
        with self.backend.write() as cur:
            if namespace is None and scope is None:
                rows = self.backend.execute(cur, "DELETE FROM memo WHERE expires_at <= ? RETURNING key", (time.time(),))
                return len(rows.fetchall())
            where, params = self.backend.scope_filter(cur, _default_scope(scope, write=False))
            if namespace is None:
                sql, args = f"DELETE FROM memo WHERE {where} AND expires_at <= ?", (*params, time.time())
            else:
                sql, args = f"DELETE FROM memo WHERE {where} AND namespace = ?", (*params, namespace)
            return len(self.backend.execute(cur, sql + " RETURNING key", args).fetchall())

    def memoize(self, namespace: str, *, ttl: float | None = None, scope: Scope | None = None) -> Callable[[F], F]:
        """A decorator caching a function's results in the store (in ``scope``) by its arguments."""
        target = _default_scope(scope, write=True)
        namespace = text(namespace, "namespace", key=True)
        ttl = None if ttl is None else positive_seconds(ttl, "ttl")

        def decorate(fn: F) -> F:
            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                key = [list(args), sorted(kwargs.items())]
                found = self.memo_get(namespace, key, _MISSING, scope=target)
                if found is not _MISSING:
                    return found
                value = fn(*args, **kwargs)
                self.memo_set(namespace, key, value, ttl=ttl, scope=target)
                return value

            return wrapper  # type: ignore[return-value]

        return decorate


def _memo_key(key: Any, *, write: bool) -> str:
    """A memo key as stored: a str as it is, anything else by the hash of its JSON."""
    if isinstance(key, str):
        return str(text(key, "key", column=True, key=write))
    try:
        raw = msgspec.json.encode(storable(key, "key"), order="deterministic")
    except (TypeError, msgspec.EncodeError) as e:
        raise InvalidTypeError(f"key: cannot be used as a cache key ({e}). Fix: use a str or a JSON-like value") from e
    return "h:" + hashlib.blake2b(raw, digest_size=16).hexdigest()


def _hashes(hashes: Any, *, write: bool) -> list[str]:
    if isinstance(hashes, (str, bytes)) or not isinstance(hashes, Sequence):
        raise InvalidTypeError(f"hashes: expected a list of str, got {type(hashes).__name__}")
    return [text(h, f"hashes[{i}]", column=True, key=write) for i, h in enumerate(hashes)]


class StoreEmbeddingCache:
    """`ctxfold.EmbeddingCache` over a store's embedding table, for one model."""

    def __init__(self, caches: Caches, model: str) -> None:
        if not isinstance(model, str) or not model:
            raise InvalidInputError("model: pass the name of the embedding model the vectors come from")
        text(model, "model", key=True)
        self.caches = caches
        self.model = model

    def get_many(self, keys: Sequence[str]) -> Mapping[str, npt.NDArray[np.float32]]:
        found: Mapping[str, npt.NDArray[np.float32]] = self.caches.get_embeddings(list(keys), self.model)
        return found

    def put_many(self, items: Mapping[str, npt.NDArray[np.float32]]) -> None:
        if items:
            self.caches.put_embeddings(list(items), self.model, np.stack([np.asarray(v, np.float32) for v in items.values()]))
