"""`store.caches`: compaction summaries, embeddings and memoisation, and the
engine's embedding cache kept in the store."""

from __future__ import annotations

import time

import numpy as np
from ctxfold.memory import SqliteStore
from memory_stores import unit


# --- caches -------------------------------------------------------------------------------
def test_caches(store) -> None:
    assert store.caches.get_summary("h1", 50) is None
    store.caches.put_summary("h1", 50, "short", tokens=3)
    store.caches.put_summary("h1", 50, "shorter", tokens=2)
    assert store.caches.get_summary("h1", 50) == "shorter" and store.caches.get_summary("h1", 60) is None
    store.caches.put_compaction("c1", 0, 10, 1, "abc", "ten messages in one", 5)
    got = store.caches.get_compaction("c1", 0, 10, 1, "abc")
    assert (got.summary, got.tokens) == ("ten messages in one", 5)
    assert store.caches.get_compaction("c1", 0, 11, 1, "abc") is None and len(store.caches.compactions("c1")) == 1
    vectors = np.stack([unit(1, 8), unit(2, 8)])
    store.caches.put_embeddings(["a", "b"], "minilm", vectors)
    found = store.caches.get_embeddings(["a", "b", "c"], "minilm")
    assert set(found) == {"a", "b"} and np.array_equal(found["b"], vectors[1])
    assert store.caches.get_embeddings(["a"], "other") == {}
    cache = store.caches.embedding_cache("minilm")
    cache.put_many({"z": unit(3, 8)})
    assert np.array_equal(cache.get_many(["z"])["z"], unit(3, 8))
    store.caches.memo_set("ns", ("k", 1), {"v": [1, 2]})
    assert store.caches.memo_get("ns", ("k", 1)) == {"v": [1, 2]} and store.caches.memo_get("ns", "other", 7) == 7
    store.caches.memo_set("ns", "short", "gone soon", ttl=0.05)
    time.sleep(0.1)
    assert store.caches.memo_get("ns", "short") is None and store.caches.memo_purge() == 1
    calls = []

    @store.caches.memoize("square", ttl=60)
    def square(x: int) -> int:
        calls.append(x)
        return x * x

    assert (square(4), square(4), square(5)) == (16, 16, 25) and calls == [4, 5]


def test_embedder_cache_persists_in_the_store(tmp_path) -> None:
    """The embedding cache through the memory store: a second Embedder
    (a restarted process) on the same database runs no inference."""
    from ctxfold import Embedder

    texts = ["the Berlin office opens at 9", "Maria's flight lands at 14:05"]
    with SqliteStore(tmp_path / "cache.db") as store:
        first = Embedder(cache=store.caches.embedding_cache("all-MiniLM-L6-v2"))
        vectors = first.embed(texts)
        assert first.stats.cache_hits == 0
    with SqliteStore(tmp_path / "cache.db") as store:
        second = Embedder(cache=store.caches.embedding_cache("all-MiniLM-L6-v2"))
        again = second.embed(texts)
        assert second.stats.cache_hits == len(texts) and second.stats.tokens_encoded == 0
    np.testing.assert_array_equal(vectors, again)
