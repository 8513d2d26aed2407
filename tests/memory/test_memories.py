"""`store.memories`: idempotent adds, batches, search by text or vector with
threshold and categories, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from ctxfold.memory import Memory, Scope
from memory_stores import U1, unit


def test_add_is_idempotent_and_add_many_is_one_batch(store) -> None:
    m = Memory(category="preference", content="Prefers answers in German", confidence=0.6)
    a, b = store.add(m, scope=U1), store.add(m, scope=U1)
    assert a == b and store.memories.count(scope=U1) == 1
    ids = store.memories.add_many([Memory(content=f"fact {i}") for i in range(50)] + [m, Memory(content="fact 3")], scope=U1)
    assert len(ids) == 52 and ids[50] == a and ids[51] == ids[3]
    assert store.memories.count(scope=U1) == 51
    assert store.memories.add_many([], scope=U1) == []


# --- search -------------------------------------------------------------------------------
def test_search_threshold_categories_and_vectors(store) -> None:
    vectors = [unit(i) for i in range(6)]
    cats = ["fact", "fact", "decision", "learning", "error", "preference"]
    ids = [
        store.add(Memory(content=f"m{i}", category=c), scope=U1, embedding=v)
        for i, (c, v) in enumerate(zip(cats, vectors))
    ]
    hits = store.search(vectors[2], scope=U1, k=3)
    assert hits[0].id == ids[2] and hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert [h.id for h in store.search(vectors[2], scope=U1, k=10, threshold=0.99)] == [ids[2]]
    assert {h.category for h in store.search(vectors[0], scope=U1, k=10, categories=["fact"])} == {"fact"}
    assert store.search(vectors[0], scope=U1, k=0) == []
    assert store.search(vectors[0], scope=Scope(user_id="nobody"), k=3) == []
