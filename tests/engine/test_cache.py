"""The engine's caches on their own: tables bounded in bytes with one
recency order, the size estimate, and what each cache computes only once."""

from __future__ import annotations

import sys
import tracemalloc
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxfold import Bm25, InvalidInputError, InvalidTypeError, get_tokenizer
from ctxfold.engine.cache import (
    BytePool,
    CachingEmbedder,
    EngineCache,
    Lru,
    approx_bytes,
    check_bytes,
    content_hash,
    message_key,
)

TOK = get_tokenizer(encoding="cl100k_base")


def test_lru_bounds_bytes_and_keeps_the_most_recent() -> None:
    lru: Lru[str, str] = Lru(1000, sizeof=lambda k, v: len(v))
    for k in "abcde":
        assert lru.put(k, k * 200)
    assert lru.nbytes == 1000 and len(lru) == 5
    assert lru.get("a") == "a" * 200  # refreshed: b is now the oldest
    lru.put("f", "f" * 300)
    assert "b" not in lru and "c" not in lru and "a" in lru and lru.nbytes == 900 and lru.evictions == 2
    assert not lru.put("g", "g" * 1001) and "g" not in lru and lru.nbytes == 900
    lru.put("a", "a" * 10)  # replacing an entry re-counts it
    assert lru.nbytes == 710
    assert (lru.hits, lru.misses) == (1, 0) and lru.get("zz") is None and lru.misses == 1
    lru.clear()
    assert len(lru) == 0 and lru.nbytes == 0 and lru.pool.nbytes == 0


def test_tables_sharing_a_pool_evict_across_tables_by_recency() -> None:
    pool = BytePool(1000)
    first: Lru[str, str] = Lru(sizeof=lambda k, v: len(v), pool=pool)
    second: Lru[str, str] = Lru(sizeof=lambda k, v: len(v), pool=pool)
    first.put("a", "x" * 400)
    first.put("b", "x" * 400)
    first.get("a")
    second.put("a", "y" * 400)  # same key, other table: b (the oldest of either) goes
    assert "b" not in first and first.get("a") == "x" * 400 and second.get("a") == "y" * 400
    assert pool.nbytes == first.nbytes + second.nbytes == 800 and len(pool) == 2
    second.clear()
    assert pool.nbytes == 400 and first.get("a")
    with pytest.raises(InvalidInputError, match="max_bytes"):
        Lru(10, pool=pool)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 300), st.lists(st.tuples(st.booleans(), st.integers(0, 7), st.integers(1, 120)), max_size=60))
def test_lru_matches_a_reference_model(max_bytes, ops) -> None:
    lru: Lru[int, int] = Lru(max_bytes, sizeof=lambda k, v: v)
    model: OrderedDict[int, int] = OrderedDict()
    for is_put, key, size in ops:
        if is_put:
            model.pop(key, None)
            if size <= max_bytes:
                model[key] = size
                while sum(model.values()) > max_bytes:
                    model.popitem(last=False)
            lru.put(key, size)
        else:
            assert lru.get(key) == model.get(key)
            if key in model:
                model.move_to_end(key)
        assert lru.nbytes == sum(model.values()) <= max_bytes and len(lru) == len(model)
    assert [k for (_, k) in lru.pool._data] == list(model)


def test_engine_cache_is_bounded_and_its_estimate_covers_the_real_memory() -> None:
    words = [f"w{i}" for i in range(3000)] + ["Lisbon", "über", "café"]
    texts = [" ".join(words[(i * 7 + j * 13) % len(words)] for j in range(i % 200 + 5)) for i in range(1500)]
    # unbounded first: what the tables really take (tracemalloc) against the estimate
    cache = EngineCache(max_bytes=1 << 40)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        owned = [t.encode().decode() for t in texts]  # strings only the cache will hold
        cache.count_texts(owned, TOK)
        cache.terms_of(owned, Bm25.tokenize)
        cache.costs_of([{"role": "user", "content": t} for t in owned], lambda ms: [10**6 + len(m["content"]) for m in ms])
        del owned
        real = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert real <= cache.nbytes <= 2 * real, (real, cache.nbytes)
    # bounded: the most recent entries stay, the bound holds, one recency order over all tables
    bound = cache.costs.nbytes // 2
    small = EngineCache(max_bytes=bound)
    small.count_texts(texts, TOK)
    assert 0 < len(small.token_counts) < len(texts) and small.token_counts.get(texts[-1]) == TOK.count(texts[-1])
    small.costs_of([{"role": "user", "content": t} for t in texts], lambda ms: [len(m["content"]) for m in ms])
    assert 0 < len(small.costs) < len(texts) and len(small.token_counts) == 0  # all older than any cost entry
    assert small.costs.get(message_key({"role": "user", "content": texts[-1]})) == len(texts[-1])
    assert small.costs.get(message_key({"role": "user", "content": texts[0]})) is None
    small.terms_of(texts[-50:], Bm25.tokenize)
    assert len(small.terms) == 50 and small.costs.get(message_key({"role": "user", "content": texts[-1]}))
    assert 0 < small.nbytes <= bound and small.max_bytes == bound and small.costs.evictions > 0


def test_cached_embeddings_are_copies_not_views_of_a_batch() -> None:
    class Embedder:
        def embed(self, texts):
            return np.ones((len(texts), 8), dtype=np.float32)

    cache = EngineCache(max_bytes=1 << 20)
    CachingEmbedder(Embedder(), cache.embeddings).embed(["a", "b", "c"])
    vector = cache.embeddings.get("b")
    assert vector is not None and vector.base is None and vector.shape == (8,)


# -- the helpers ----------------------------------------------------------------------


def test_check_bytes_names_the_argument() -> None:
    assert check_bytes(0, "cache_bytes") == 0 and check_bytes(1 << 20, "cache_bytes") == 1 << 20
    with pytest.raises(InvalidInputError, match="cache_bytes: must be >= 0 bytes"):
        check_bytes(-1, "cache_bytes")
    for bad in (1.5, True, "10"):
        with pytest.raises(InvalidTypeError, match="archive_bytes: expected an int number of bytes"):
            check_bytes(bad, "archive_bytes")


def test_approx_bytes_walks_containers_and_counts_array_data() -> None:
    text = "x" * 1000
    assert approx_bytes(text) == sys.getsizeof(text)
    nested = {"a": [text, (text, 3)]}
    inner = [text, (text, 3)]
    # The same str twice is counted twice (an overestimate on purpose); the dict and containers once each.
    expected = (sys.getsizeof(nested) + sys.getsizeof("a") + sys.getsizeof(inner) + 2 * sys.getsizeof(text)
                + sys.getsizeof((text, 3)) + sys.getsizeof(3))
    assert approx_bytes(nested) == expected
    base = np.zeros((10, 100), dtype=np.float32)
    row = base[3]  # a view: its data is counted, as the entry keeps the buffer alive
    assert approx_bytes(row) >= row.nbytes and approx_bytes(base) >= base.nbytes
    loop: list[object] = []
    loop.append(loop)
    assert approx_bytes(loop) == sys.getsizeof(loop)  # a cycle is walked once


def test_keys_are_exact_for_equal_messages() -> None:
    assert message_key({"role": "user", "content": "hi"}) == message_key({"content": "hi", "role": "user"})
    assert message_key({"role": "user", "content": "hi"}) != message_key({"role": "user", "content": "hi "})
    assert content_hash("über") == content_hash("über") != content_hash("uber")
    assert len(content_hash(chr(0xD800) + " a lone surrogate")) == 64  # hashed, not refused


def test_each_text_is_counted_once() -> None:
    class Counting:
        def __init__(self) -> None:
            self.seen: list[str] = []

        def count(self, texts: list[str]) -> np.ndarray:
            self.seen += texts
            return TOK.count(texts)

    cache, counter = EngineCache(), Counting()
    assert cache.count_texts(["a b", "c"], counter) == [2, 1]
    assert cache.count_texts(["c", "a b", "d e f"], counter) == [1, 2, 3]
    assert counter.seen == ["a b", "c", "d e f"]


def test_summaries_go_through_to_the_store_caches_in_scope() -> None:
    class Caches:
        def __init__(self) -> None:
            self.rows: dict[tuple[str, int, object], str] = {}

        def get_summary(self, content_hash: str, level: int, *, scope: object = None) -> str | None:
            return self.rows.get((content_hash, level, scope))

        def put_summary(self, content_hash: str, level: int, summary: str, *, scope: object = None) -> None:
            self.rows[(content_hash, level, scope)] = summary

    caches = Caches()
    writer = EngineCache(caches=caches, scope="team-a")
    writer.put_summary(("h1", 40), "short")
    assert caches.rows == {("h1", 40, "team-a"): "short"}
    reader = EngineCache(caches=caches, scope="team-a")
    assert reader.summary(("h1", 40)) == "short" and ("h1", 40) in reader.summaries  # now in memory too
    assert EngineCache(caches=caches, scope="team-b").summary(("h1", 40)) is None
    assert EngineCache().summary(("h1", 40)) is None


def test_embeddings_come_from_memory_then_the_store_then_the_embedder() -> None:
    class Embedder:
        def __init__(self) -> None:
            self.calls: list[list[str]] = []

        def embed(self, texts: list[str]) -> np.ndarray:
            self.calls.append(list(texts))
            return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)

    class Caches:
        def __init__(self) -> None:
            self.rows: dict[tuple[str, str], np.ndarray] = {}

        def get_embeddings(self, hashes: list[str], model: str) -> dict[str, np.ndarray]:
            return {h: self.rows[(h, model)] for h in hashes if (h, model) in self.rows}

        def put_embeddings(self, hashes: list[str], model: str, vectors: np.ndarray) -> None:
            for h, v in zip(hashes, vectors):
                self.rows[(h, model)] = np.array(v)

    caches, embedder = Caches(), Embedder()
    first = CachingEmbedder(embedder, EngineCache().embeddings, "m", caches)
    out = first.embed(["ab", "abc"])
    assert out.tolist() == [[2.0, 1.0], [3.0, 1.0]] and embedder.calls == [["ab", "abc"]]
    first.embed(["abc"])
    assert embedder.calls == [["ab", "abc"]]  # from memory
    second = CachingEmbedder(embedder, EngineCache().embeddings, "m", caches)
    assert second.embed(["abc", "abcd"]).tolist() == [[3.0, 1.0], [4.0, 1.0]]
    assert embedder.calls == [["ab", "abc"], ["abcd"]]  # "abc" came from the store
    assert CachingEmbedder(embedder, EngineCache().embeddings).embed([]).shape == (0, 0)


def test_clear_empties_every_table() -> None:
    from ctxfold import ContextEngine, EngineConfig

    engine = ContextEngine(encoding="cl100k_base", config=EngineConfig(conversation_arc=True))
    # A dated chat between two people fills the date-note, arc and address tables too.
    messages = [{"role": "user" if i % 2 == 0 else "assistant",
                 "content": f"{'Ana' if i % 2 == 0 else 'Ben'}: Day {i} was fine, thanks Ben. See you tomorrow, Ana.",
                 "timestamp": f"2024-03-{i + 1:02d}T10:00:00"} for i in range(12)]
    engine.optimize(messages, query="What did Ana do?", budget=120)
    cache = engine.cache
    tables = [value for value in vars(cache).values() if isinstance(value, Lru)]
    assert {id(t) for t in tables} >= {id(cache.annotations), id(cache.arc_facts), id(cache.addressed)}
    assert all(len(t) for t in (cache.annotations, cache.arc_facts, cache.addressed, cache.terms))
    cache.clear()
    assert all(len(t) == 0 for t in tables) and cache.nbytes == 0
