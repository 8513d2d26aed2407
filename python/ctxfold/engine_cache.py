"""What `ContextEngine` remembers between calls so that a conversation seen
before (or grown by one turn) costs little: each message's exact token cost,
each text's embedding, and each summary. Keys are the content itself (or its
hash), never positions, so edits and reorderings can never hit a stale entry.

Each table is a bounded LRU; a `store` (anything with the small key-value API
of `ctxfold.memory`'s caches) makes embeddings and summaries outlive the
process."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

import msgspec
import numpy as np

__all__ = ["Lru", "EngineCache", "CachingEmbedder", "message_key", "content_hash"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_encode = msgspec.json.Encoder(order="deterministic").encode


def content_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def message_key(api_message: dict[str, Any]) -> bytes:
    """The API message as canonical JSON: equal messages, equal keys (exact,
    no hash collisions to fear: the dict compares the bytes)."""
    return _encode(api_message)


class Lru(Generic[K, V]):
    """A dict that forgets the least recently used entries beyond `capacity`.
    Thread-safe: `aoptimize` calls on one engine may run at the same time."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._data: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._data.get(key)
            if value is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.capacity:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


class CachingEmbedder:
    """Wraps an embedder (`encode(list[str]) -> (n, d) array`): texts seen
    before are not encoded again."""

    def __init__(self, embedder: Any, cache: Lru[str, np.ndarray], model_name: str = "", store: Any = None) -> None:
        self.embedder = embedder
        self.cache = cache
        self.model_name = model_name or type(embedder).__name__
        self.store = store

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        found: list[np.ndarray | None] = [self.cache.get(t) for t in texts]
        missing = [i for i, v in enumerate(found) if v is None]
        if missing and self.store is not None:
            self._from_store(texts, found, missing)
            missing = [i for i, v in enumerate(found) if v is None]
        if missing:
            fresh = np.asarray(self.embedder.encode([texts[i] for i in missing]), dtype=np.float32)
            for i, vector in zip(missing, fresh):
                found[i] = vector
                self.cache.put(texts[i], vector)
            if self.store is not None:
                self.store.put_embeddings(
                    [content_hash(texts[i]) for i in missing], self.model_name, fresh
                )
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack(found)  # type: ignore[arg-type]

    embed = encode

    def _from_store(self, texts: Sequence[str], found: list[np.ndarray | None], missing: list[int]) -> None:
        hashes = [content_hash(texts[i]) for i in missing]
        stored = self.store.get_embeddings(hashes, self.model_name)
        for i, h in zip(missing, hashes):
            vector = stored.get(h)
            if vector is not None:
                found[i] = np.asarray(vector, dtype=np.float32)
                self.cache.put(texts[i], found[i])


class EngineCache:
    """The engine's three caches. `capacity` bounds each table (entries)."""

    def __init__(self, capacity: int = 50_000, store: Any = None) -> None:
        self.costs: Lru[bytes, int] = Lru(capacity)
        self.embeddings: Lru[str, np.ndarray] = Lru(capacity)
        self.summaries: Lru[tuple[str, int], str] = Lru(capacity)
        self.token_counts: Lru[str, int] = Lru(capacity)
        self.terms: Lru[str, tuple[dict[str, int], int]] = Lru(capacity)
        """BM25 term frequencies and length of each text."""
        self.structure: Lru[tuple[str, str | None, str], float] = Lru(capacity)
        """Structure-layer score by (role, kind, text): independent of the query."""
        self.store = store

    def count_texts(self, texts: Sequence[str], tokenizer: Any) -> list[int]:
        """Token counts of `texts`, counting only the texts not seen before."""
        counts: list[int | None] = [self.token_counts.get(t) for t in texts]
        missing = [i for i, c in enumerate(counts) if c is None]
        if missing:
            for i, c in zip(missing, tokenizer.count([texts[i] for i in missing]).tolist()):
                counts[i] = int(c)
                self.token_counts.put(texts[i], int(c))
        return counts  # type: ignore[return-value]

    def terms_of(self, texts: Sequence[str], tokenize: Callable[[str], list[str]]) -> list[tuple[dict[str, int], int]]:
        """Each text's BM25 term counts and length (terms), cached by text."""
        out = []
        for text in texts:
            found = self.terms.get(text)
            if found is None:
                terms = tokenize(text)
                counts: dict[str, int] = {}
                for t in terms:
                    counts[t] = counts.get(t, 0) + 1
                found = (counts, len(terms))
                self.terms.put(text, found)
            out.append(found)
        return out

    def costs_of(self, api_messages: Sequence[dict[str, Any]], compute: Callable[[list[dict[str, Any]]], list[int]]) -> list[int]:
        """Each message's token cost, computing only those not seen before."""
        keys = [message_key(m) for m in api_messages]
        costs: list[int | None] = [self.costs.get(k) for k in keys]
        missing = [i for i, c in enumerate(costs) if c is None]
        if missing:
            for i, cost in zip(missing, compute([api_messages[i] for i in missing])):
                costs[i] = cost
                self.costs.put(keys[i], cost)
        return costs  # type: ignore[return-value]

    def summary(self, key: tuple[str, int]) -> str | None:
        found = self.summaries.get(key)
        if found is None and self.store is not None:
            found = self.store.get_summary(*key)
            if found is not None:
                self.summaries.put(key, found)
        return found

    def put_summary(self, key: tuple[str, int], text: str) -> None:
        self.summaries.put(key, text)
        if self.store is not None:
            self.store.put_summary(*key, text)

    def clear(self) -> None:
        self.costs.clear()
        self.embeddings.clear()
        self.summaries.clear()
        self.token_counts.clear()
        self.terms.clear()
        self.structure.clear()
