"""The store facade (`SqliteStore`, `PostgresStore`), on SQLite and, when a server
can start, PostgreSQL: the README's example, the public names, the stores of
each concern on one backend, reopening."""

from __future__ import annotations

import math

import ctxfold
import pytest
from ctxfold.errors import CtxFoldError, InvalidInputError, StoreError
from ctxfold.memory import ChatMessage, Memory, MemoryStore, Scope, SqliteStore
from memory_stores import U1, U2


# --- the public API ---------------------------------------------------------------------
def test_the_readme_example(store) -> None:
    mid = store.add(Memory(category="fact", content="Berlin office opens at 9"), scope=U1)
    store.add(Memory(category="fact", content="The cat is called Tom"), scope=U1)
    hits = store.search("when does the office open", scope=U1, k=10)
    assert [h.content for h in hits][0] == "Berlin office opens at 9"
    assert hits[0].score > hits[1].score and all(-1 <= h.score <= 1 for h in hits)
    got = store.get(mid, scope=U1)
    assert got is not None and got.id == mid and got.ttl == math.inf and got.source.timestamp is not None
    assert store.clear(U1) >= 2
    assert store.get(mid, scope=U1) is None and store.search("office", scope=U1) == []
    assert isinstance(store, MemoryStore)


def test_exports_and_context_manager(tmp_path) -> None:
    assert ctxfold.StoreError is StoreError and issubclass(StoreError, CtxFoldError)
    assert ctxfold.SqliteStore is SqliteStore and ctxfold.Scope is Scope
    with SqliteStore(tmp_path / "a.db") as s:
        s.add(Memory(content="x is y"), scope=U1)
    with pytest.raises(StoreError, match="closed"):
        s.get("x", scope=U1)
    with SqliteStore(tmp_path) as s:  # a directory gets the default file inside
        assert s.location.endswith("ctxfold-memory.db")


def test_the_stores_of_each_concern_share_one_backend(store) -> None:
    """Every store of one concern runs on the store's backend: a record written
    through one is cleared with the scope, and closing the store closes them all."""
    parts = [store.memories, store.archive, store.caches, store.chat, store.working, store.episodes,
             store.agent_messages, store.iterations]
    assert all(part.backend is store.backend for part in parts)
    store.add(Memory(content="Berlin office opens at 9"), scope=U1)
    store.caches.memo_set("ns", "k", "v", scope=U1)
    store.chat.append({"role": "user", "content": "hi"}, scope=U1)
    store.iterations.log(scope=U1).record_call(tool="grep")
    assert store.clear(U1) == 4
    assert store.caches.memo_get("ns", "k", scope=U1) is None and store.chat.recent(scope=U1) == []
    store.close()
    calls = [lambda: store.memories.count(scope=U1), lambda: store.archive.all(scope=U1),
             lambda: store.caches.memo_get("ns", "k"), lambda: store.chat.recent(scope=U1),
             lambda: store.working.get(scope=U1), lambda: store.episodes.all(scope=U1),
             lambda: store.agent_messages.query_by_target("b", scope=U1),
             lambda: store.iterations.log(scope=U1).calls()]
    for call in calls:
        with pytest.raises(StoreError, match="closed"):
            call()


def test_reopen_keeps_everything(opener) -> None:
    s = opener()
    mid = s.add(Memory(content="persisted fact"), scope=U1)
    s.close()
    s2 = opener()
    assert s2.get(mid, scope=U1).content == "persisted fact"
    assert s2.search("persisted", scope=U1, k=1)[0].id == mid


# --- scopes -------------------------------------------------------------------------------
def test_reads_never_cross_scopes(store) -> None:
    scopes = [U1, U2, Scope(user_id="u1"), Scope(user_id="u1", conversation_id="c2"), Scope(agent_id="u1")]
    ids = {s: store.add(Memory(content=f"the secret of {s}"), scope=s) for s in scopes}
    for s in scopes:
        hits = store.search("the secret", scope=s, k=10)
        assert [h.id for h in hits] == [ids[s]]
        assert [m.content for m in store.memories.all(scope=s)] == [f"the secret of {s}"]
        for other in scopes:
            if other != s and ids[other] != ids[s]:
                assert store.get(ids[other], scope=s) is None
    # explicit widening reads across
    wide = Scope(user_id="u1").widen()
    assert {h.content for h in store.search("secret", scope=wide, k=10)} == {
        f"the secret of {s}" for s in scopes if s.user_id == "u1"
    }
    only_convs = Scope(user_id="u1").widen("conversation_id")
    assert len(store.search("secret", scope=only_convs, k=10)) == 3
    assert len(store.memories.all(scope=Scope.any())) == len(scopes)


def test_clear_removes_exactly_one_scope(store) -> None:
    store.add(Memory(content="a"), scope=U1)
    store.add(Memory(content="b"), scope=U2)
    store.chat.append(ChatMessage(role="user", content="hi"), scope=U1)
    store.chat.append(ChatMessage(role="user", content="hi"), scope=U2)
    store.clear(U1)
    assert store.memories.count(scope=U1) == 0 and store.chat.recent(scope=U1) == []
    assert store.memories.count(scope=U2) == 1 and len(store.chat.recent(scope=U2)) == 1
    store.add(Memory(content="c"), scope=Scope(user_id="u2", conversation_id="c9"))
    store.clear(Scope.any(user_id="u2"))
    assert store.memories.count(scope=Scope.any()) == 0


def test_wide_scope_cannot_be_written(store) -> None:
    with pytest.raises(InvalidInputError, match="wide scope"):
        store.add(Memory(content="x"), scope=U1.widen())
    with pytest.raises(TypeError):
        store.add(Memory(content="x"), scope={"user_id": "u1"})
