"""The engine's caches, kept in the store so a restarted process does not
recompute (global tables keyed by content, not by scope):

- **compaction summaries** keyed by (conversation, message range, level,
  content hash), with the summary's token count: `put_compaction` /
  `get_compaction`; `get_summary` / `put_summary` are the engine's short form
  (``(content_hash, level)``, no conversation or range);
- **embeddings** keyed by (content hash, model): `get_embeddings` /
  `put_embeddings`, or `embedding_cache(model)` for an object with the
  ``get_many``/``put_many`` API `ctxfold.Embedder(cache=...)` takes;
- a **memoisation cache** with TTL: `memo_get` / `memo_set` (`memo_set_many`) / `memoize`
  (values: anything msgpack encodes — str, numbers, lists, dicts, bytes).
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

from ctxfold.errors import InvalidInputError, StoreError
from ctxfold.memory.embedding import from_blobs, to_blob

__all__ = ["CachesMixin", "CompactionSummary", "StoreEmbeddingCache"]

F = TypeVar("F", bound=Callable[..., Any])
_MISSING = object()
_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder().decode
_CHUNK = 500


class CompactionSummary(msgspec.Struct, kw_only=True):
    conversation_id: str
    start: int
    end: int
    level: int
    content_hash: str
    summary: str
    tokens: int
    created_at: float


class CachesMixin:
    """Compaction, embedding and memoisation caches of `SqlStore`."""

    # --- compaction summaries -------------------------------------------------------

    def put_compaction(
        self, conversation_id: str, start: int, end: int, level: int, content_hash: str, summary: str, tokens: int
    ) -> None:
        """Keep the summary of messages ``start..end`` of a conversation at a
        compaction ``level`` (replacing one with the same key)."""
        for name, value in (("start", start), ("end", end), ("level", level), ("tokens", tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidInputError(f"{name}: must be an int >= 0, got {value!r}")
        with self._write() as cur:  # type: ignore[attr-defined]
            self._x(  # type: ignore[attr-defined]
                cur,
                "INSERT INTO summaries (conversation_id, range_start, range_end, level, content_hash, summary, tokens, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (conversation_id, range_start, range_end, "
                "level, content_hash) DO UPDATE SET summary = excluded.summary, tokens = excluded.tokens, "
                "created_at = excluded.created_at",
                (conversation_id, start, end, level, content_hash, summary, tokens, time.time()),
            )

    def get_compaction(
        self, conversation_id: str, start: int, end: int, level: int, content_hash: str
    ) -> CompactionSummary | None:
        with self._read() as cur:  # type: ignore[attr-defined]
            row = self._x(  # type: ignore[attr-defined]
                cur,
                "SELECT summary, tokens, created_at FROM summaries WHERE conversation_id = ? AND range_start = ? "
                "AND range_end = ? AND level = ? AND content_hash = ?",
                (conversation_id, start, end, level, content_hash),
            ).fetchone()
        if row is None:
            return None
        return CompactionSummary(
            conversation_id=conversation_id, start=start, end=end, level=level, content_hash=content_hash,
            summary=row[0], tokens=int(row[1]), created_at=float(row[2]),
        )

    def compactions(self, conversation_id: str) -> list[CompactionSummary]:
        """Every cached summary of a conversation, by range."""
        with self._read() as cur:  # type: ignore[attr-defined]
            rows = self._x(  # type: ignore[attr-defined]
                cur,
                "SELECT range_start, range_end, level, content_hash, summary, tokens, created_at FROM summaries "
                "WHERE conversation_id = ? ORDER BY range_start, range_end, level",
                (conversation_id,),
            ).fetchall()
        return [
            CompactionSummary(conversation_id=conversation_id, start=int(r[0]), end=int(r[1]), level=int(r[2]),
                              content_hash=r[3], summary=r[4], tokens=int(r[5]), created_at=float(r[6]))
            for r in rows
        ]

    def get_summary(self, content_hash: str, level: int) -> str | None:
        """The engine's summary cache: the summary of a text (by hash) at a level/target."""
        found = self.get_compaction("", 0, 0, int(level), content_hash)
        return None if found is None else found.summary

    def put_summary(self, content_hash: str, level: int, summary: str, tokens: int = 0) -> None:
        self.put_compaction("", 0, 0, int(level), content_hash, summary, int(tokens))

    # --- embeddings -----------------------------------------------------------------------

    def get_embeddings(self, hashes: Sequence[str], model: str) -> dict[str, npt.NDArray[np.float32]]:
        """The cached vectors of ``hashes`` for ``model`` (missing ones are absent)."""
        found: dict[str, npt.NDArray[np.float32]] = {}
        keys = list(dict.fromkeys(hashes))
        with self._read() as cur:  # type: ignore[attr-defined]
            for start in range(0, len(keys), _CHUNK):
                chunk = keys[start : start + _CHUNK]
                marks = ", ".join("?" * len(chunk))
                rows = self._x(  # type: ignore[attr-defined]
                    cur, f"SELECT content_hash, dim, vector FROM embeddings WHERE model = ? AND content_hash IN ({marks})",
                    (model, *chunk),
                ).fetchall()
                for h, dim, blob in rows:
                    found[h] = from_blobs([bytes(blob)], int(dim))[0].copy()
        return found

    def put_embeddings(self, hashes: Sequence[str], model: str, vectors: npt.ArrayLike) -> None:
        """Cache one vector per hash for ``model`` (one transaction)."""
        array = np.asarray(vectors, dtype=np.float32)
        if array.ndim != 2 or len(array) != len(hashes):
            raise InvalidInputError(
                f"vectors: expected shape ({len(hashes)}, dim) (one row per hash), got {array.shape}"
            )
        if not len(hashes):
            return
        with self._write() as cur:  # type: ignore[attr-defined]
            cur.executemany(
                self._sql(  # type: ignore[attr-defined]
                    "INSERT INTO embeddings (content_hash, model, dim, vector) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (content_hash, model) DO UPDATE SET dim = excluded.dim, vector = excluded.vector"
                ),
                [(h, model, array.shape[1], to_blob(v)) for h, v in zip(hashes, array)],
            )

    def embedding_cache(self, model: str) -> StoreEmbeddingCache:
        """An `ctxfold.EmbeddingCache` (``get_many``/``put_many``) in this store for one model."""
        return StoreEmbeddingCache(self, model)

    # --- memoisation ----------------------------------------------------------------------

    def memo_get(self, namespace: str, key: Any, default: Any = None) -> Any:
        """The value cached under (namespace, key), or ``default`` if absent or expired."""
        with self._read() as cur:  # type: ignore[attr-defined]
            row = self._x(  # type: ignore[attr-defined]
                cur, "SELECT value, expires_at FROM memo WHERE namespace = ? AND key = ?", (namespace, _memo_key(key))
            ).fetchone()
        if row is None or (row[1] is not None and row[1] <= time.time()):
            return default
        return _decode(bytes(row[0]))

    def memo_set(self, namespace: str, key: Any, value: Any, *, ttl: float | None = None) -> None:
        """Cache ``value`` for ``ttl`` seconds (``None``: until replaced or purged)."""
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or math.isnan(ttl) or ttl <= 0):
            raise InvalidInputError(f"ttl: must be a positive number of seconds or None, got {ttl!r}")
        try:
            blob = _encode(value)
        except (TypeError, msgspec.EncodeError) as e:
            raise InvalidInputError(f"value: cannot be cached ({e}); use str, numbers, lists, dicts or bytes") from e
        now = time.time()
        expires = None if ttl is None or math.isinf(ttl) else now + ttl
        with self._write() as cur:  # type: ignore[attr-defined]
            self._x(  # type: ignore[attr-defined]
                cur,
                "INSERT INTO memo (namespace, key, value, created_at, expires_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, created_at = excluded.created_at, "
                "expires_at = excluded.expires_at",
                (namespace, _memo_key(key), blob, now, expires),
            )

    def memo_set_many(self, namespace: str, values: Mapping[Any, Any]) -> None:
        """`memo_set` (no TTL) for each key and value of ``values``, in one transaction."""
        try:
            rows = [(namespace, _memo_key(k), _encode(v), time.time(), None) for k, v in values.items()]
        except (TypeError, msgspec.EncodeError) as e:
            raise InvalidInputError(f"values: cannot be cached ({e}); use str, numbers, lists, dicts or bytes") from e
        if rows:
            with self._write() as cur:  # type: ignore[attr-defined]
                cur.executemany(
                    self._sql(  # type: ignore[attr-defined]
                        "INSERT INTO memo (namespace, key, value, created_at, expires_at) VALUES (?, ?, ?, ?, ?) "
                        "ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value, "
                        "created_at = excluded.created_at, expires_at = excluded.expires_at"
                    ),
                    rows,
                )

    def memo_purge(self, namespace: str | None = None) -> int:
        """Delete expired entries (and all of ``namespace`` if given); how many."""
        with self._write() as cur:  # type: ignore[attr-defined]
            if namespace is None:
                rows = self._x(cur, "DELETE FROM memo WHERE expires_at <= ? RETURNING key", (time.time(),))  # type: ignore[attr-defined]
            else:
                rows = self._x(cur, "DELETE FROM memo WHERE namespace = ? RETURNING key", (namespace,))  # type: ignore[attr-defined]
            return len(rows.fetchall())

    def memoize(self, namespace: str, *, ttl: float | None = None) -> Callable[[F], F]:
        """A decorator caching a function's results in the store by its arguments."""

        def decorate(fn: F) -> F:
            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                key = [list(args), sorted(kwargs.items())]
                found = self.memo_get(namespace, key, _MISSING)
                if found is not _MISSING:
                    return found
                value = fn(*args, **kwargs)
                self.memo_set(namespace, key, value, ttl=ttl)
                return value

            return wrapper  # type: ignore[return-value]

        return decorate


def _memo_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    try:
        raw = msgspec.json.encode(key, order="deterministic")
    except (TypeError, msgspec.EncodeError) as e:
        raise InvalidInputError(f"key: cannot be used as a cache key ({e}); use a str or JSON-like value") from e
    return "h:" + hashlib.blake2b(raw, digest_size=16).hexdigest()


class StoreEmbeddingCache:
    """`ctxfold.EmbeddingCache` over a store's embedding table, for one model."""

    def __init__(self, store: Any, model: str) -> None:
        if not isinstance(model, str) or not model:
            raise StoreError("model: pass the name of the embedding model the vectors come from")
        self.store = store
        self.model = model

    def get_many(self, keys: Sequence[str]) -> Mapping[str, npt.NDArray[np.float32]]:
        return self.store.get_embeddings(list(keys), self.model)

    def put_many(self, items: Mapping[str, npt.NDArray[np.float32]]) -> None:
        if items:
            self.store.put_embeddings(list(items), self.model, np.stack([np.asarray(v, np.float32) for v in items.values()]))
