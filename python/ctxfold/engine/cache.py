"""What `ContextEngine` remembers between calls so that a conversation seen
before (or grown by one turn) costs little: each message's exact token cost,
each text's embedding, and each summary. Keys are the content itself (or its
hash), never positions, so edits and reorderings can never hit a stale entry.

The tables share one bound in bytes (`EngineCache(max_bytes=...)`, the
engine's `cache_bytes`): the least recently used entry of any table goes
first, so the memory follows whichever table the workload fills. A store's
`caches` (anything with the small key-value API of `ctxfold.memory`'s
``store.caches``) make embeddings and summaries outlive the process."""

from __future__ import annotations

import hashlib
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

import msgspec
import numpy as np

from ctxfold.errors import InvalidInputError, InvalidTypeError

__all__ = [
    "Lru", "BytePool", "EngineCache", "CachingEmbedder", "message_key", "content_hash", "approx_bytes",
    "check_bytes", "DEFAULT_CACHE_BYTES", "ENTRY_OVERHEAD",
]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: The default bound of all of the engine's caches together: a few hundred
#: long conversations' worth of counts, term statistics and embeddings.
DEFAULT_CACHE_BYTES = 128 << 20
#: What an entry costs beyond its key and value: the ordered dict's slot and
#: link node, the (table, key) and (value, size) pairs, the size int.
ENTRY_OVERHEAD = 240

_encode = msgspec.json.Encoder(order="deterministic").encode
_getsizeof = sys.getsizeof
_INT = _getsizeof(1 << 40)


def content_hash(text: str) -> str:
    """Hex sha256 of ``text`` (lone surrogates included): the key of its cached forms."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def message_key(api_message: dict[str, Any]) -> bytes:
    """The API message as canonical JSON: equal messages, equal keys (exact,
    no hash collisions to fear: the dict compares the bytes)."""
    return _encode(api_message)


def check_bytes(value: Any, name: str) -> int:
    """`value` as a byte bound (an int >= 0), or the error naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"{name}: expected an int number of bytes, got {type(value).__name__}")
    if value < 0:
        raise InvalidInputError(f"{name}: must be >= 0 bytes (0 keeps nothing in memory), got {value}")
    return value


def approx_bytes(obj: Any) -> int:
    """The memory `obj` holds, roughly: `sys.getsizeof` summed over the
    containers' contents (dicts, lists, tuples, sets; arrays by their data).
    An object referenced twice is counted twice: an overestimate, the safe
    side for a bound."""
    total = 0
    stack = [obj]
    seen: set[int] = set()
    while stack:
        o = stack.pop()
        if isinstance(o, (str, bytes, int, float)) or o is None:
            total += _getsizeof(o)
        elif isinstance(o, np.ndarray):
            total += _getsizeof(o) + (o.nbytes if o.base is not None else 0)
        elif id(o) in seen:
            continue
        elif isinstance(o, dict):
            seen.add(id(o))
            total += _getsizeof(o)
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            seen.add(id(o))
            total += _getsizeof(o)
            stack.extend(o)
        else:
            total += _getsizeof(o)
    return total


def _entry_bytes(key: Any, value: Any) -> int:
    return approx_bytes(key) + approx_bytes(value) + ENTRY_OVERHEAD


class BytePool:
    """The shared bound of several `Lru` tables: one recency order over all
    their entries, trimmed from the least recently used until the entries
    take at most `max_bytes`. Thread-safe (one lock for all the tables):
    `aoptimize` calls on one engine may run at the same time."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = check_bytes(max_bytes, "max_bytes")
        self.nbytes = 0
        self.lock = threading.Lock()
        self._data: OrderedDict[tuple[int, Any], tuple[Any, int]] = OrderedDict()
        self._tables: list[Lru[Any, Any]] = []

    def _register(self, table: Lru[Any, Any]) -> int:
        with self.lock:
            self._tables.append(table)
            return len(self._tables) - 1

    def _trim(self) -> None:
        """Evict until within the bound (the caller holds the lock)."""
        while self.nbytes > self.max_bytes and self._data:
            (tag, _), (_, size) = self._data.popitem(last=False)
            self.nbytes -= size
            table = self._tables[tag]
            table._count -= 1
            table._nbytes -= size
            table.evictions += 1

    def __len__(self) -> int:
        return len(self._data)


class Lru(Generic[K, V]):
    """A dict that forgets its least recently used entries once they take
    more than `max_bytes` (approximate: `sizeof(key, value)`, by default
    `approx_bytes` of both plus `ENTRY_OVERHEAD`). An entry larger than the
    whole bound is not kept. `pool=` shares the bound (and the recency order)
    with other tables; otherwise the table has a bound of its own.
    Thread-safe. Values are never None (None is what a miss returns)."""

    def __init__(
        self,
        max_bytes: int | None = None,
        sizeof: Callable[[K, V], int] | None = None,
        *,
        pool: BytePool | None = None,
    ) -> None:
        if (pool is None) == (max_bytes is None):
            raise InvalidInputError("max_bytes: pass either max_bytes (a bound of its own) or pool=, not both or neither")
        self.pool = pool if pool is not None else BytePool(max_bytes)  # type: ignore[arg-type]
        self._sizeof = sizeof if sizeof is not None else _entry_bytes
        self._tag = self.pool._register(self)
        self._count = self._nbytes = 0
        self.hits = self.misses = self.evictions = 0

    @property
    def max_bytes(self) -> int:
        return self.pool.max_bytes

    @property
    def nbytes(self) -> int:
        """Approximate bytes this table's entries take."""
        return self._nbytes

    def get(self, key: K) -> V | None:
        pool = self.pool
        slot = (self._tag, key)
        with pool.lock:
            found = pool._data.get(slot)
            if found is None:
                self.misses += 1
                return None
            pool._data.move_to_end(slot)
            self.hits += 1
            return found[0]  # type: ignore[no-any-return]

    def peek(self, key: K) -> V | None:
        """The value without counting a hit or refreshing its recency."""
        with self.pool.lock:
            found = self.pool._data.get((self._tag, key))
        return None if found is None else found[0]

    def put(self, key: K, value: V, size: int | None = None) -> bool:
        """Keep `value` under `key` (most recent); False if it is larger than
        the whole bound and so not kept. `size`: its bytes if already known."""
        size = self._sizeof(key, value) if size is None else int(size)
        pool = self.pool
        slot = (self._tag, key)
        with pool.lock:
            old = pool._data.pop(slot, None)
            if old is not None:
                pool.nbytes -= old[1]
                self._count -= 1
                self._nbytes -= old[1]
            if size > pool.max_bytes:
                return False
            pool._data[slot] = (value, size)
            pool.nbytes += size
            self._count += 1
            self._nbytes += size
            pool._trim()
        return True

    def discard(self, key: K) -> None:
        with self.pool.lock:
            old = self.pool._data.pop((self._tag, key), None)
            if old is not None:
                self.pool.nbytes -= old[1]
                self._count -= 1
                self._nbytes -= old[1]

    def __contains__(self, key: object) -> bool:
        with self.pool.lock:
            return (self._tag, key) in self.pool._data

    def __len__(self) -> int:
        return self._count

    def clear(self) -> None:
        pool = self.pool
        with pool.lock:
            mine = [slot for slot in pool._data if slot[0] == self._tag]
            for slot in mine:
                pool.nbytes -= pool._data.pop(slot)[1]
            self._count = self._nbytes = 0


# Sizes of the engine's entries, computed without walking them: puts happen
# for every message not seen before, so this stays a handful of C calls.
def _cost_bytes(key: bytes, value: int) -> int:
    return _getsizeof(key) + _INT + ENTRY_OVERHEAD


def _text_int_bytes(key: str, value: Any) -> int:
    return _getsizeof(key) + _INT + ENTRY_OVERHEAD


def _embedding_bytes(key: str, value: np.ndarray) -> int:
    return _getsizeof(key) + _getsizeof(value) + (value.nbytes if value.base is not None else 0) + ENTRY_OVERHEAD


def _summary_bytes(key: tuple[str, int], value: str) -> int:
    return _getsizeof(key) + _getsizeof(key[0]) + _INT + _getsizeof(value) + ENTRY_OVERHEAD


_WORD_BYTES = 80


def _arc_facts_bytes(key: str, value: Any) -> int:
    # Counted per word, not walked: each word and stem is a short str of at most _WORD_BYTES.
    sentences = sum(_getsizeof(q) for q in value.questions) + sum(_getsizeof(c[1]) + 64 for c in value.cues)
    return _getsizeof(key) + 2 * (_getsizeof(value.words) + _WORD_BYTES * len(value.words)) + sentences + ENTRY_OVERHEAD


def _terms_bytes(key: str, value: tuple[dict[str, int], int]) -> int:
    counts = value[0]
    return (_getsizeof(key) + _getsizeof(value) + _getsizeof(counts) + sum(map(_getsizeof, counts))
            + _INT * (len(counts) + 1) + ENTRY_OVERHEAD)


def _annotation_bytes(key: tuple[str, Any], value: str) -> int:
    return _getsizeof(key) + _getsizeof(key[0]) + _getsizeof(key[1]) + _getsizeof(value) + ENTRY_OVERHEAD


def _names_bytes(key: str, value: tuple[str, ...]) -> int:
    return _getsizeof(key) + _getsizeof(value) + sum(map(_getsizeof, value)) + ENTRY_OVERHEAD


def _structure_bytes(key: tuple[str, str | None, str], value: float) -> int:
    return _getsizeof(key) + _getsizeof(key[2]) + _INT + ENTRY_OVERHEAD


class CachingEmbedder:
    """Wraps an embedder (`embed(list[str]) -> (n, d) array`): texts seen
    before are not embedded again."""

    def __init__(self, embedder: Any, cache: Lru[str, np.ndarray], model_name: str = "", caches: Any = None) -> None:
        self.embedder = embedder
        self.cache = cache
        self.model_name = model_name or type(embedder).__name__
        self.caches = caches

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        found: list[np.ndarray | None] = [self.cache.get(t) for t in texts]
        missing = [i for i, v in enumerate(found) if v is None]
        if missing and self.caches is not None:
            self._from_caches(texts, found, missing)
            missing = [i for i, v in enumerate(found) if v is None]
        if missing:
            # A text repeated in the call ("ok", "thanks") is embedded once.
            todo = list(dict.fromkeys(texts[i] for i in missing))
            fresh = np.asarray(self.embedder.embed(todo), dtype=np.float32)
            # Copies: a row view would keep the whole batch alive, unaccounted.
            made = {text: vector.copy() for text, vector in zip(todo, fresh)}
            for text, vector in made.items():
                self.cache.put(text, vector)
            for i in missing:
                found[i] = made[texts[i]]
            if self.caches is not None:
                self.caches.put_embeddings([content_hash(t) for t in todo], self.model_name, fresh)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack(found)  # type: ignore[arg-type]


    def _from_caches(self, texts: Sequence[str], found: list[np.ndarray | None], missing: list[int]) -> None:
        hashes = [content_hash(texts[i]) for i in missing]
        stored = self.caches.get_embeddings(hashes, self.model_name)
        for i, h in zip(missing, hashes):
            vector = stored.get(h)
            if vector is not None:
                found[i] = row = np.asarray(vector, dtype=np.float32)
                self.cache.put(texts[i], row)


class EngineCache:
    """The engine's caches, bounded together by `max_bytes` (approximate
    bytes of keys and values; the least recently used entry of any table
    is evicted first). Summaries persist in `caches`, in `scope` when given."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES, caches: Any = None, scope: Any = None) -> None:
        self.pool = BytePool(max_bytes)
        pool = self.pool
        self.costs: Lru[bytes, int] = Lru(sizeof=_cost_bytes, pool=pool)
        self.embeddings: Lru[str, np.ndarray] = Lru(sizeof=_embedding_bytes, pool=pool)
        self.rerank_embeddings: Lru[str, np.ndarray] = Lru(sizeof=_embedding_bytes, pool=pool)
        """The reranker's vectors, by text (apart from the embedder's: another model)."""
        self.query_embeddings: Lru[str, np.ndarray] = Lru(sizeof=_embedding_bytes, pool=pool)
        """The questions' second vectors (`ContextEngine.model_view`), by text."""
        self.summaries: Lru[tuple[str, int], str] = Lru(sizeof=_summary_bytes, pool=pool)
        self.token_counts: Lru[str, int] = Lru(sizeof=_text_int_bytes, pool=pool)
        self.terms: Lru[str, tuple[dict[str, int], int]] = Lru(sizeof=_terms_bytes, pool=pool)
        """BM25 term frequencies and length of each text."""
        self.structure: Lru[tuple[str, str | None, str], float] = Lru(sizeof=_structure_bytes, pool=pool)
        """Structure-layer score by (role, kind, text): independent of the query."""
        self.annotations: Lru[tuple[str, Any], str] = Lru(sizeof=_annotation_bytes, pool=pool)
        """Date-annotated text by (text, the anchor's date); "" for a text with nothing to annotate."""
        self.arc_facts: Lru[str, Any] = Lru(sizeof=_arc_facts_bytes, pool=pool)
        """What the conversation arc reads from each text (`ctxfold.arc.MessageFacts`)."""
        self.addressed: Lru[str, tuple[str, ...]] = Lru(sizeof=_names_bytes, pool=pool)
        """The names each text says to someone ("Thanks, Kate!"), by text (`ctxfold.engine.people`)."""
        self.caches = caches
        self._scoped: dict[str, Any] = {} if scope is None else {"scope": scope}

    @property
    def max_bytes(self) -> int:
        return self.pool.max_bytes

    @property
    def nbytes(self) -> int:
        """Approximate bytes all the tables take (at most `max_bytes`)."""
        return self.pool.nbytes

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
                # An exact-size copy: the encoder's buffer has room to spare, held for as long as the entry.
                self.costs.put(bytes(memoryview(keys[i])), cost)
        return costs  # type: ignore[return-value]

    def summary(self, key: tuple[str, int]) -> str | None:
        found = self.summaries.get(key)
        if found is None and self.caches is not None:
            found = self.caches.get_summary(*key, **self._scoped)
            if found is not None:
                self.summaries.put(key, found)
        return found

    def put_summary(self, key: tuple[str, int], text: str) -> None:
        self.summaries.put(key, text)
        if self.caches is not None:
            self.caches.put_summary(*key, text, **self._scoped)

    def clear(self) -> None:
        """Empty every table (a table added later is found, not listed here)."""
        for table in vars(self).values():
            if isinstance(table, Lru):
                table.clear()
