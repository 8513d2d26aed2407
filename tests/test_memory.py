"""The memory store suite, run against SQLite and (when a server is available)
PostgreSQL, with the stores of tests/memory_stores.py: every test has its own
SQLite file or PostgreSQL schema."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import ctxfold
import numpy as np
import pytest
from ctxfold.errors import CtxFoldError, InvalidInputError, StoreError
from ctxfold.memory import (
    AgentMessage,
    ChatMessage,
    ConversationStore,
    Episode,
    Memory,
    MemoryStore,
    MemoryTiers,
    PostgresStore,
    Scope,
    SqliteStore,
    ToolCallRecord,
    WorkingMemory,
    mask_dsn,
)
from ctxfold.memory import matrix as matrix_module
from ctxfold.memory.typed import DAY
from memory_stores import U1, U2, opener, store  # noqa: F401  (fixtures)


def unit(seed: int, dim: int = 16) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


# --- the public API ---------------------------------------------------------------------


def test_issue_example(store) -> None:
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


def test_a_store_written_under_the_former_name_is_read(tmp_path) -> None:
    # Releases before the rename wrote the same schema to ctxengine-memory.db.
    with SqliteStore(tmp_path / "written.db") as s:
        mid = s.add(Memory(category="fact", content="The staging database is on port 5433"), scope=U1)
    (tmp_path / "written.db").rename(tmp_path / "ctxengine-memory.db")
    with SqliteStore(tmp_path) as s:
        assert Path(s.location).name == "ctxengine-memory.db"
        got = s.get(mid, scope=U1)
        assert got is not None and got.content == "The staging database is on port 5433"
        assert [h.id for h in s.search("which port is staging on", scope=U1, k=1)] == [mid]
        s.add(Memory(content="written after the rename"), scope=U1)
    assert not (tmp_path / "ctxfold-memory.db").exists()  # opened in place, never copied aside
    with SqliteStore(tmp_path / "ctxfold-memory.db") as fresh:  # once the new file exists, it is the one used
        fresh.add(Memory(content="new file"), scope=U1)
    with SqliteStore(tmp_path) as s:
        assert Path(s.location).name == "ctxfold-memory.db" and s.memories.count(scope=U1) == 1


def test_a_directory_with_two_former_stores_is_not_guessed(tmp_path) -> None:
    for name in ("ctxengine-memory.db", "ctxother-memory.db"):
        with SqliteStore(tmp_path / name) as s:
            s.add(Memory(content=name), scope=U1)
    with pytest.raises(StoreError, match="pass the path of the file to open"):
        SqliteStore(tmp_path)
    assert not (tmp_path / "ctxfold-memory.db").exists()


def test_add_is_idempotent_and_add_many_is_one_batch(store) -> None:
    m = Memory(category="preference", content="Prefers answers in German", confidence=0.6)
    a, b = store.add(m, scope=U1), store.add(m, scope=U1)
    assert a == b and store.memories.count(scope=U1) == 1
    ids = store.memories.add_many([Memory(content=f"fact {i}") for i in range(50)] + [m, Memory(content="fact 3")], scope=U1)
    assert len(ids) == 52 and ids[50] == a and ids[51] == ids[3]
    assert store.memories.count(scope=U1) == 51
    assert store.memories.add_many([], scope=U1) == []


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


def test_cache_sees_other_writers(opener) -> None:
    a, b = opener(), opener()
    a.add(Memory(content="first memory"), scope=U1)
    assert len(a.search("memory", scope=U1)) == 1  # builds a's matrix
    b.add(Memory(content="second memory"), scope=U1)
    assert len(a.search("memory", scope=U1)) == 2
    wide = U1.widen()
    assert len(a.search("memory", scope=wide)) == 2
    b.add(Memory(content="third memory"), scope=Scope(user_id="u1", conversation_id="c3"))
    assert len(a.search("memory", scope=Scope.any(user_id="u1"))) == 3
    b.clear(U1)
    assert a.search("memory", scope=U1) == []


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


def test_numpy_path_matches_core_top_k(store, monkeypatch) -> None:
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((300, 16)).astype(np.float32)
    store.memories.add_many([Memory(content=f"row {i}") for i in range(300)], scope=U1, embeddings=vectors)
    q = rng.standard_normal(16).astype(np.float32)
    core = store.search(q, scope=U1, k=10)
    monkeypatch.setattr(matrix_module, "CORE_TOP_K_MAX", 0)
    blas = store.search(q, scope=U1, k=10)
    assert [h.id for h in core] == [h.id for h in blas]
    assert np.allclose([h.score for h in core], [h.score for h in blas], atol=1e-5)
    expected = np.argsort(-(vectors / np.linalg.norm(vectors, axis=1, keepdims=True)) @ (q / np.linalg.norm(q)))[:10]
    assert [h.content for h in core] == [f"row {i}" for i in expected]


def test_wrong_embedding_dimension(store) -> None:
    store.add(Memory(content="a"), scope=U1, embedding=unit(1, 16))
    with pytest.raises(StoreError, match="16-dimensional"):
        store.add(Memory(content="b"), scope=U1, embedding=unit(1, 8))
    with pytest.raises(StoreError, match="16-dimensional"):
        store.search(unit(2, 8), scope=U1)
    with pytest.raises(StoreError, match="embedder"):
        store.search("text embedded with the 256-d default", scope=U1)
    with pytest.raises(InvalidInputError, match="embeddings"):
        store.memories.add_many([Memory(content="c"), Memory(content="d")], scope=U1, embeddings=[unit(3, 16)])


# --- typed memories ----------------------------------------------------------------------


def test_category_defaults_and_min_confidence(store) -> None:
    expected = {"fact": math.inf, "decision": math.inf, "learning": 90 * DAY, "error": 30 * DAY, "preference": math.inf}
    for category, ttl in expected.items():
        mid = store.add(Memory(category=category, content=f"a {category}", confidence=0.95), scope=U1)
        assert store.get(mid, scope=U1).ttl == ttl
    for category, minimum in {"fact": 0.8, "decision": 0.9, "learning": 0.7, "error": 0.6, "preference": 0.5}.items():
        with pytest.raises(InvalidInputError, match=f"minimum {minimum}"):
            store.add(Memory(category=category, content="unsure", confidence=minimum - 0.01), scope=U1)
        store.add(Memory(category=category, content=f"sure {category}", confidence=minimum), scope=U1)
    with pytest.raises(InvalidInputError, match="category"):
        store.add(Memory(category="rumour", content="x"), scope=U1)
    with pytest.raises(InvalidInputError, match="rejected"):  # the whole batch is refused
        store.memories.add_many([Memory(content="ok"), Memory(content="bad", confidence=0.1)], scope=U1)
    assert store.get(store.add(Memory(content="ok"), scope=U1), scope=U1).merged == 0


def test_expired_memories_move_to_the_archive(store) -> None:
    old = time.time() - 31 * DAY
    keep = store.add(Memory(category="learning", content="retry with backoff", created_at=old), scope=U1)
    mid = store.add(Memory(category="error", content="timeout on the staging API", created_at=old), scope=U1)
    assert store.get(mid, scope=U1) is None
    assert [h.id for h in store.search("timeout staging", scope=U1)] == [keep]
    assert store.archive.expire(scope=U1) == 1
    archived = store.archive.all(scope=U1)
    assert [(m.id, m.status, m.archived_reason) for m in archived] == [(mid, "archived", "expired")]
    assert store.archive.get(mid, scope=U1).content == "timeout on the staging API"
    assert store.archive.all(scope=U2) == []
    # the next write in the scope archives what expired on the way
    gone = store.add(Memory(category="error", content="disk full", created_at=old), scope=U1)
    store.add(Memory(content="a fact"), scope=U1)
    assert store.archive.get(gone, scope=U1).archived_reason == "expired"


def test_supersede_and_archive(store) -> None:
    old = store.add(Memory(category="decision", content="Deploy on Fridays"), scope=U1)
    new = store.memories.supersede(old, Memory(category="decision", content="Never deploy on Fridays"), scope=U1)
    assert store.get(old, scope=U1) is None and store.get(new, scope=U1) is not None
    gone = store.archive.get(old, scope=U1)
    assert gone.archived_reason == "superseded" and gone.superseded_by == new
    assert store.archive.move(new, scope=U1) and not store.archive.move(new, scope=U1)
    assert store.memories.delete(store.add(Memory(content="tmp"), scope=U1), scope=U1)


def test_near_duplicates_merge(store) -> None:
    base = unit(11)
    near = base + 0.01 * unit(12)
    a = store.add(Memory(content="Office opens at 9", tags=["office"]), scope=U1, embedding=base)
    b = store.add(Memory(content="The office opens at 9.", tags=["hours"], confidence=0.9), scope=U1, embedding=near)
    assert a == b and store.memories.count(scope=U1) == 1
    merged = store.get(a, scope=U1)
    assert merged.tags == ["office", "hours"] and merged.merged == 1 and merged.content == "Office opens at 9"
    # another category or another scope does not merge
    assert store.add(Memory(content="Office opens at 9 (decided)", category="decision"), scope=U1, embedding=near) != a
    assert store.add(Memory(content="The office opens at 9.", tags=["hours"]), scope=U2, embedding=near) != ""
    assert store.memories.count(scope=U2) == 1
    # within one batch, with merge=True
    ids = store.memories.add_many(
        [Memory(content="Logs are kept"), Memory(content="The logs are kept")], scope=U2,
        embeddings=[unit(20), unit(20) + 1e-3], merge=True,
    )
    assert ids[0] == ids[1]
    # merge=False keeps both
    ids = store.memories.add_many([Memory(content="y1"), Memory(content="y2")], scope=U2, embeddings=[unit(30), unit(30)])
    assert ids[0] != ids[1]


def test_effectiveness_tracking(store) -> None:
    mid = store.add(Memory(category="learning", content="Use the staging key"), scope=U1)
    store.memories.record_application(mid, scope=U1, success=True)
    m = store.memories.record_application(mid, scope=U1, success=False)
    assert (m.effectiveness.applications, m.effectiveness.successes) == (2, 1)
    assert m.effectiveness.score == pytest.approx(0.5) and m.effectiveness.last_applied is not None
    assert store.get(mid, scope=U1).effectiveness == m.effectiveness
    with pytest.raises(StoreError, match="no memory"):
        store.memories.record_application("nope", scope=U1, success=True)


def test_yaml_export_import_round_trip(store, tmp_path) -> None:
    now = time.time()
    memories = [
        Memory(category="fact", content="Berlin office opens at 9", tags=["office"], summary="opens 9"),
        Memory(category="decision", content="Use PostgreSQL for fleets", metadata={"by": "team", "n": [1, 2]}),
        Memory(category="learning", content="Batch inserts", confidence=0.75, ttl=3600.0),
        Memory(category="error", content="Timeout on staging", confidence=0.65, created_at=now - 10),
        Memory(category="preference", content="Short answers", confidence=0.5),
    ]
    ids = [store.add(m, scope=U1) for m in memories]
    store.memories.record_application(ids[2], scope=U1, success=True)
    paths = store.memories.export_yaml(tmp_path / "out", scope=U1)
    assert sorted(p.name for p in paths) == sorted(
        ["facts.yaml", "decisions.yaml", "learnings.yaml", "errors.yaml", "preferences.yaml"]
    )
    assert store.memories.import_yaml(tmp_path / "out", scope=U2) == ids
    assert store.memories.all(scope=U2) == store.memories.all(scope=U1)
    store.memories.export_yaml(tmp_path / "again", scope=U2)
    for p in paths:
        assert (tmp_path / "again" / p.name).read_bytes() == p.read_bytes()
    assert store.memories.import_yaml(tmp_path / "out", scope=U2) == ids  # idempotent
    assert store.memories.count(scope=U2) == 5


# --- tiers --------------------------------------------------------------------------------


def test_short_term_and_working_memory(store) -> None:
    store.chat.extend([{"role": "user", "content": f"message {i}"} for i in range(30)], scope=U1)
    last = store.chat.recent(scope=U1, n=5)
    assert [m.content for m in last] == [f"message {i}" for i in range(25, 30)]
    assert all(m.tokens > 0 and m.timestamp for m in last)
    assert store.chat.recent(scope=U2) == []
    assert store.working.get(scope=U1) == WorkingMemory()
    wm = store.working.update(scope=U1, add_entities=["Berlin", "Anna"], add_goals=["book room"], add_questions=["when?"])
    wm = store.working.update(scope=U1, add_entities=["Berlin"], resolve_questions=["when?"], state={"step": 2})
    assert (wm.entities, wm.goals, wm.pending_questions, wm.state) == (["Berlin", "Anna"], ["book room"], [], {"step": 2})
    assert store.working.get(scope=U1).entities == ["Berlin", "Anna"]
    assert store.working.get(scope=U2).entities == []
    store.working.set(WorkingMemory(goals=["x"]), scope=U1)
    assert store.working.get(scope=U1).goals == ["x"]


def test_episodes_and_tiers_facade(store) -> None:
    tiers = MemoryTiers(store, U1, short_term_n=2)
    tiers.record_episode("Deployment failed and was rolled back", 0.9)
    tiers.record_episode("User said hello", 0.1)
    tiers.record_episode("Customer signed the contract", 0.7)
    assert [e.significance for e in tiers.episodic()] == [0.9, 0.7, 0.1]
    assert [e.content for e in store.episodes.all(scope=U1, min_significance=0.5)] == [
        "Deployment failed and was rolled back", "Customer signed the contract"
    ]
    recalled = tiers.episodic("the deployment rollback", k=1)
    assert recalled[0].content.startswith("Deployment") and recalled[0].score > 0
    for i in range(3):
        tiers.remember("user", f"turn {i}")
    assert [m.content for m in tiers.short_term()] == ["turn 1", "turn 2"]
    tiers.update_working(add_goals=["ship"])
    assert tiers.working.goals == ["ship"]
    store.add(Memory(content="The deploy window is Tuesday"), scope=U1)
    assert tiers.long_term("deploy window", threshold=0.0)[0].content == "The deploy window is Tuesday"
    assert store.episodes.all(scope=U2) == []
    with pytest.raises(InvalidInputError, match="significance"):
        store.episodes.add(Episode(content="x", significance=2), scope=U1)


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


# --- iteration records -------------------------------------------------------------------


def test_iteration_records(store) -> None:
    log = store.iterations.log(scope=U1, log="task")
    log.record_call(ToolCallRecord(tool="search", params={"q": "x"}, raw_output="y" * 5000, relevance="low",
                                   outcome="nothing"))
    log.record_call(tool="read_file", params={"path": "a.py"}, relevance="high", learning="a.py holds the bug")
    log.record_call(tool="grep", relevance="medium", insights=["bug in parse()"], next_actions=["fix parse"])
    assert len(log.calls()[0].raw_output) == 1000 and {c.iteration for c in log.calls()} == {1}
    log.end_iteration("found the file", "advancing")
    assert log.current_iteration == 2
    text = log.reasoning_context("fix the bug", 1000)
    lines = text.splitlines()
    assert lines[0] == "Goal: fix the bug" and "advancing" in lines[1]
    assert [line.split()[2].split("(")[0] for line in lines[2:]] == ["read_file", "grep", "search"]
    short = log.reasoning_context("fix the bug", 40)
    assert "read_file" in short and "search(" not in short
    assert int(ctxfold.count_tokens(short + "\n")) <= 40 + 2
    assert not log.is_stuck()
    for progress in ("stuck", "regressing"):
        log.end_iteration("no luck", progress)
    assert not log.is_stuck()
    log.end_iteration("still no luck", "stuck")
    assert log.is_stuck() and "no progress for 3 iterations" in log.recovery_prompt()
    assert store.iterations.log(scope=U2, log="task").calls() == []
    with pytest.raises(InvalidInputError, match="progress"):
        log.end_iteration("?", "sideways")


# --- agent messages -------------------------------------------------------------------------


def test_agent_messages(store) -> None:
    fleet = Scope(user_id="team")
    now = time.time()
    store.agent_messages.send(AgentMessage(source="planner", target="coder", content="low", priority=0.2, session_id="s1"), scope=fleet)
    store.agent_messages.send(AgentMessage(source="planner", target="coder", content="urgent", priority=0.9, session_id="s1"), scope=fleet)
    store.agent_messages.send(AgentMessage(source="planner", target="coder", content="old", ttl_seconds=5, created_at=now - 10,
                                    session_id="s1"), scope=fleet)
    store.agent_messages.send(AgentMessage(source="planner", target="coder", content="other session", session_id="s2",
                                    parent_task="t1", metadata={"k": 1}), scope=fleet)
    store.agent_messages.send(AgentMessage(source="planner", target="tester", content="for tester"), scope=fleet)
    assert [m.content for m in store.agent_messages.query_by_target("coder", scope=fleet, session_id="s1")] == ["urgent", "low"]
    assert len(store.agent_messages.query_by_target("coder", scope=fleet)) == 3
    assert len(store.agent_messages.query_by_target("coder", scope=fleet, include_expired=True)) == 4
    assert store.agent_messages.query_by_target("coder", scope=U1) == []
    other = store.agent_messages.query_by_target("coder", scope=fleet, session_id="s2")[0]
    assert (other.parent_task, other.metadata, other.type) == ("t1", {"k": 1}, "node.message")
    assert [m.content for m in store.agent_messages.in_session("s1", scope=fleet)] == ["low", "urgent"]
    assert store.agent_messages.purge_expired() == 1
    with pytest.raises(InvalidInputError, match="priority"):
        store.agent_messages.send(AgentMessage(source="a", target="b", content="x", priority=1.5), scope=fleet)


# --- ConversationStore ----------------------------------------------------------------------


def test_conversation_store(store) -> None:
    conversations = ConversationStore(store, user_id="u1")
    conversations.add_message("c1", "user", "hello there")
    conversations.add_messages("c1", [{"role": "assistant", "content": "hi, how can I help?"}])
    conversations.add_message("c2", "user", "another conversation")
    store.add(Memory(content="c1 fact"), scope=conversations.scope("c1"))
    store.caches.put_compaction("c1", 0, 2, 1, "h", "greeting", 1, scope=conversations.scope("c1"))
    stats = conversations.get_conversation_stats("c1")
    assert (stats.messages, stats.by_role, stats.memories, stats.summaries) == (2, {"user": 1, "assistant": 1}, 1, 1)
    assert stats.tokens > 0 and stats.first_message_at <= stats.last_message_at
    assert [m.content for m in conversations.get_messages("c1", limit=1)] == ["hi, how can I help?"]
    assert conversations.clear_conversation("c1") >= 4
    assert conversations.get_conversation_stats("c1").messages == 0
    assert conversations.get_conversation_stats("c2").messages == 1
    # bound to a user: another user's conversation of the same id is not touched
    bob, fleet = ConversationStore(store, user_id="bob"), ConversationStore(store, user_id=None)
    bob.add_message("c2", "user", "bob's c2")
    assert [m.content for m in conversations.get_messages("c2")] == ["another conversation"]
    assert fleet.get_conversation_stats("c2").messages == 2
    conversations.clear_conversation("c2")
    assert [m.content for m in bob.get_messages("c2")] == ["bob's c2"]
    with pytest.raises(InvalidInputError, match="wide scope"):
        fleet.add_message("c3", "user", "x")


# --- bad input (SQLite files, PostgreSQL DSNs) --------------------------------------------


def test_sqlite_bad_files(tmp_path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreError, match="not a SQLite database") as e:
        SqliteStore(junk)
    assert str(junk) in str(e.value) and "Fix" in str(e.value)
    with pytest.raises(StoreError, match="does not exist"):
        SqliteStore(tmp_path / "missing" / "a.db")
    with pytest.raises(TypeError):
        SqliteStore(42)  # type: ignore[arg-type]


def test_sqlite_read_only_file(tmp_path) -> None:
    path = tmp_path / "ro.db"
    SqliteStore(path).close()
    uri_store = SqliteStore(path)
    uri_store.close()
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        pytest.skip("root ignores file permissions")
    os.chmod(path, 0o444)
    os.chmod(tmp_path, 0o555)
    try:
        with pytest.raises(StoreError, match="writable"):
            s = SqliteStore(path)
            s.add(Memory(content="x"), scope=U1)
    finally:
        os.chmod(tmp_path, 0o755)
        os.chmod(path, 0o644)


def test_unreachable_postgres_masks_the_password() -> None:
    pytest.importorskip("psycopg")
    for dsn in ("postgresql://bob:hunter2@127.0.0.1:1/db", "host=127.0.0.1 port=1 user=bob password=hunter2 dbname=x"):
        with pytest.raises(StoreError) as e:
            PostgresStore(dsn, timeout=2)
        assert "hunter2" not in str(e.value) and "***" in str(e.value) and "Fix" in str(e.value)
    assert mask_dsn("postgres://u:p%40ss@h/db") == "postgres://u:***@h/db"


def test_failed_write_leaves_nothing_behind(store) -> None:
    store.add(Memory(content="a"), scope=U1, embedding=unit(1, 16))
    fresh = Scope(user_id="brand-new")
    with pytest.raises(StoreError):
        store.add(Memory(content="b"), scope=fresh, embedding=unit(1, 8))
    store.add(Memory(content="b"), scope=fresh, embedding=unit(2, 16))
    assert [m.content for m in store.search(unit(2, 16), scope=Scope.any(user_id="brand-new"))] == ["b"]


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
