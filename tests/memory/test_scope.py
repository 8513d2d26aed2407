"""Scope everywhere, on SQLite and PostgreSQL.

- Isolation: a hypothesis test writes records of every scoped kind into
  random scopes and checks that no read returns a record of another scope,
  exact or wide (`Scope.any`, `widen`), through the writing store and a second
  store on the same database; `clear(scope)` removes everything in the scope
  and nothing else; the same content in two scopes is two records.
- Alice and Bob use the same conversation id, agent and session; a third
  writer uses the calls without ``scope=``. Every write API puts records
  marked with its owner into every table; no table, read or delete crosses
  from one scope to another, and the previous schema is migrated without
  handing rows to a user."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ctxfold.errors import InvalidInputError
from ctxfold.memory import AgentMessage, ConversationStore, Episode, Memory, MemoryTiers, PostgresStore, Scope, SqliteStore, WorkingMemory
from ctxfold.memory.iterations import IterationLog
from ctxfold.memory.schema import MIGRATIONS, SCOPED_TABLES, render
from hypothesis import HealthCheck, given, settings, strategies as st
from memory_stores import Backend


BACKENDS = ["sqlite", "postgres"]


ALICE = Scope(user_id="alice", conversation_id="c1")


BOB = Scope(user_id="bob", conversation_id="c1")


MARK = {"alice": "ALICEMARK", "bob": "BOBMARK", "anon": "ANONMARK"}


SCOPES = {"alice": ALICE, "bob": BOB}


#: Tables without a scope, and why that cannot leak a user's records.
GLOBAL_TABLES = {
    "schema_version": "the applied schema versions",
    "meta": "store settings (the embedding dimension)",
    "scopes": "the scope registry the other tables point into; no API lists it",
    "embeddings": "keyed by the hash of a text: only a caller who has the text finds its vector",
}


# --- stores on both backends -----------------------------------------------------------------------
class Opener:
    def __init__(self, backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
        self.backend = backend
        self.tmp_path = tmp_path
        self.stores: list[Any] = []
        self.schemas: list[str] = []
        self.dsn = str(request.getfixturevalue("pg_dsn")) if backend == "postgres" else ""

    def new_location(self) -> str:
        if self.backend == "sqlite":
            return str(self.tmp_path / f"{uuid.uuid4().hex[:8]}.db")
        schema = "scope_" + uuid.uuid4().hex[:16]
        self.schemas.append(schema)
        return schema

    def open(self, location: str | None = None) -> Any:
        location = location or self.new_location()
        store = SqliteStore(location) if self.backend == "sqlite" else PostgresStore(self.dsn, schema=location)
        store.test_location = location
        self.stores.append(store)
        return store

    def sql(self, store: Any, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Run SQL on the store's database directly (not through the store)."""
        if self.backend == "sqlite":
            conn = sqlite3.connect(store.test_location)
            try:
                return conn.execute(statement, params).fetchall()
            finally:
                conn.close()
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{store.test_location}"')
            cur = conn.execute(statement.replace("?", "%s"), params)
            return cur.fetchall() if cur.description else []

    def tables(self, store: Any) -> dict[str, list[str]]:
        """Every table of the store's schema with its columns."""
        if self.backend == "sqlite":
            names = [r[0] for r in self.sql(store, "SELECT name FROM sqlite_master WHERE type = 'table' "
                                                   "AND name NOT LIKE 'sqlite_%'")]
            return {n: [c[1] for c in self.sql(store, f"PRAGMA table_info({n})")] for n in names}
        rows = self.sql(store, "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = ? "
                        "ORDER BY table_name, ordinal_position",
                        (store.test_location,))
        out: dict[str, list[str]] = {}
        for table, column in rows:
            out.setdefault(table, []).append(column)
        return out

    def close(self) -> None:
        for store in self.stores:
            store.close()
        if self.schemas:
            import psycopg

            with psycopg.connect(self.dsn, autocommit=True) as conn:
                for schema in self.schemas:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=BACKENDS)
def opener(request: pytest.FixtureRequest, tmp_path: Path):
    o = Opener(request.param, request, tmp_path)
    yield o
    o.close()


# --- the data -------------------------------------------------------------------------------------------
def populate(store: Any) -> dict[str, dict[str, Any]]:
    """Every write API, for Alice, Bob (more of everything, so counts differ)
    and the anonymous scopes; per owner what a read should find."""
    expected: dict[str, dict[str, Any]] = {}
    for n, who in enumerate(("alice", "bob"), start=1):
        scope, mark = SCOPES[who], MARK[who]
        meta = {"owner": mark}
        store.memories.add_many([Memory(content=f"fact {j} about topic {j}", metadata=meta) for j in range(n)], scope=scope)
        # The same content in both scopes: the same id, two records.
        store.add(Memory(content="the office opens at nine", metadata=meta), scope=scope, merge=False)
        store.memories.add(Memory(content="an old decision to archive", category="decision", metadata=meta),
                           scope=scope, merge=False)
        archived_id = next(m.id for m in store.memories.all(scope=scope) if m.content.startswith("an old decision"))
        assert store.archive.move(archived_id, scope=scope)
        shared_id = next(m.id for m in store.memories.all(scope=scope) if m.content.startswith("the office"))
        store.chat.extend([{"role": "user", "content": f"{mark} message {j}"} for j in range(n)], scope=scope)
        store.chat.append({"role": "assistant", "content": f"{mark} reply"}, scope=scope)
        store.working.set(WorkingMemory(goals=[f"{mark} goal"]), scope=scope)
        store.working.update(scope=scope, add_entities=[f"{mark} entity"])
        for j in range(n):
            store.episodes.add(Episode(content=f"{mark} episode {j}", significance=0.9), scope=scope)
        log = store.iterations.log(scope=scope, log="task")
        log.record_call(tool="grep", learning=f"{mark} learning", relevance="high")
        for _ in range(3 if who == "bob" else 1):
            log.end_iteration(f"{mark} synthesis", "stuck" if who == "bob" else "advancing")
        store.agent_messages.send(AgentMessage(source="planner", target="coder", content=f"{mark} note", session_id="s1"),
                           scope=scope)
        for j in range(n):
            store.caches.put_compaction("c1", 0, 10 + j, 1, "h", f"{mark} summary {j}", 5, scope=scope)
        store.caches.put_summary("h", 50, f"{mark} short", scope=scope)
        store.caches.memo_set("ns", "k", f"{mark} memo", scope=scope)
        store.caches.memo_set_many("ns", {"k2": f"{mark} memo 2"}, scope=scope)
        store.caches.memoize("fn", scope=scope)(lambda x, mark=mark: f"{mark} result {x}")(1)
        expected[who] = {
            # summaries: the compactions and the short-form one, all kept in the scope
            "memories": n + 1, "messages": n + 1, "episodes": n, "summaries": n + 1, "shared_id": shared_id,
            "archived_id": archived_id, "iteration": 4 if who == "bob" else 2, "stuck": who == "bob",
        }
    anon = MARK["anon"]
    store.caches.put_compaction("c1", 0, 10, 1, "h", f"{anon} summary", 5)
    store.caches.put_summary("h", 50, f"{anon} short")
    store.caches.memo_set("ns", "k", f"{anon} memo")
    store.add(Memory(content="the office opens at nine", metadata={"owner": anon}), scope=Scope(conversation_id="c1"))
    return expected


def rows_by_scope(opener: Opener, store: Any) -> dict[int, dict[str, list[tuple[Any, ...]]]]:
    """Every row of every scoped table, by scope id (bytes for blobs)."""
    out: dict[int, dict[str, list[tuple[Any, ...]]]] = {}
    columns = opener.tables(store)
    for table in SCOPED_TABLES:
        names = ", ".join(columns[table])
        at = columns[table].index("scope_id")
        for row in opener.sql(store, f"SELECT {names} FROM {table}"):
            values = tuple(bytes(v) if isinstance(v, (bytes, memoryview)) else v for v in row)
            out.setdefault(int(values[at]), {}).setdefault(table, []).append(values)
    for tables in out.values():
        for rows in tables.values():
            rows.sort(key=repr)
    return out


def scope_id(opener: Opener, store: Any, scope: Scope) -> int:
    rows = opener.sql(store, "SELECT id FROM scopes WHERE user_id = ? AND agent_id = ? AND session_id = ? "
                             "AND conversation_id = ?", tuple(scope.values()))
    assert rows, f"no scope row for {scope}"
    return int(rows[0][0])


# --- reads ------------------------------------------------------------------------------------------------
Read = Callable[[Any, Scope, dict[str, Any]], Any]


def _stats(store: Any, scope: Scope, exp: dict[str, Any]) -> Any:
    s = ConversationStore(store, user_id=scope.user_id).get_conversation_stats("c1")
    return (s.messages, s.memories, s.episodes, s.summaries)


def _export(store: Any, scope: Scope, exp: dict[str, Any]) -> str:
    directory = Path(exp["tmp"]) / uuid.uuid4().hex[:8]
    directory.mkdir()
    paths = store.memories.export_yaml(directory, scope=scope)
    return "".join(Path(p).read_text(encoding="utf-8") for p in paths)


#: Read name -> (call, whether a wide scope is accepted). A call's result must
#: show its owner's marker and no other one; numbers are compared below.
READS: dict[str, tuple[Read, bool]] = {
    "get": (lambda s, sc, e: s.get(e["shared_id"], scope=sc), True),
    "memories.get": (lambda s, sc, e: s.memories.get(e["shared_id"], scope=sc), True),
    "history": (lambda s, sc, e: s.history(e["shared_id"], scope=sc), True),
    "memories.history": (lambda s, sc, e: s.memories.history(e["shared_id"], scope=sc), True),
    "memories.all": (lambda s, sc, e: s.memories.all(scope=sc), True),
    "search": (lambda s, sc, e: s.search("the office opens", scope=sc, k=50), True),
    "memories.search": (lambda s, sc, e: s.memories.search("the office opens", scope=sc, k=50), True),
    "archive.all": (lambda s, sc, e: s.archive.all(scope=sc), True),
    "archive.get": (lambda s, sc, e: s.archive.get(e["archived_id"], scope=sc), True),
    "chat.recent": (lambda s, sc, e: s.chat.recent(scope=sc, n=100), True),
    "working.get": (lambda s, sc, e: s.working.get(scope=sc), False),
    "episodes.all": (lambda s, sc, e: s.episodes.all(scope=sc), True),
    "episodes.recall": (lambda s, sc, e: s.episodes.recall("episode", scope=sc, k=50), True),
    "agent_messages.query_by_target": (lambda s, sc, e: s.agent_messages.query_by_target("coder", scope=sc), True),
    "agent_messages.in_session": (lambda s, sc, e: s.agent_messages.in_session("s1", scope=sc), True),
    "caches.get_compaction": (lambda s, sc, e: s.caches.get_compaction("c1", 0, 10, 1, "h", scope=sc), False),
    "caches.compactions": (lambda s, sc, e: s.caches.compactions("c1", scope=sc), True),
    "caches.get_summary": (lambda s, sc, e: s.caches.get_summary("h", 50, scope=sc), False),
    "caches.memo_get": (lambda s, sc, e: (s.caches.memo_get("ns", "k", scope=sc), s.caches.memo_get("ns", "k2", scope=sc)), False),
    "caches.memoize": (lambda s, sc, e: s.caches.memoize("fn", scope=sc)(lambda x: "computed again")(1), False),
    "memories.export_yaml": (_export, True),
    "iterations.log": (lambda s, sc, e: s.iterations.log(scope=sc, log="task").calls(), False),
    "IterationLog.calls": (lambda s, sc, e: IterationLog(s.backend, sc, "task").calls(), False),
    "IterationLog.syntheses": (lambda s, sc, e: IterationLog(s.backend, sc, "task").syntheses(), False),
    "IterationLog.reasoning_context": (lambda s, sc, e: IterationLog(s.backend, sc, "task").reasoning_context("goal", 1000), False),
    "IterationLog.recovery_prompt": (lambda s, sc, e: IterationLog(s.backend, sc, "task").recovery_prompt(), False),
    "ConversationStore.get_messages": (
        lambda s, sc, e: ConversationStore(s, user_id=sc.user_id).get_messages("c1"), True),
    "MemoryTiers.short_term": (lambda s, sc, e: MemoryTiers(s, sc).short_term(100), False),
    "MemoryTiers.working": (lambda s, sc, e: MemoryTiers(s, sc).working, False),
    "MemoryTiers.long_term": (lambda s, sc, e: MemoryTiers(s, sc).long_term("office", 50, threshold=-1.0), False),
    "MemoryTiers.episodic": (lambda s, sc, e: (MemoryTiers(s, sc).episodic(None, 50),
                                               MemoryTiers(s, sc).episodic("episode", 50)), False),
}


#: Reads that return numbers: (call, the expected value from populate()).
COUNTED: dict[str, tuple[Read, Callable[[dict[str, Any]], Any]]] = {
    "memories.count": (lambda s, sc, e: s.memories.count(scope=sc), lambda e: e["memories"]),
    "IterationLog.current_iteration": (lambda s, sc, e: IterationLog(s.backend, sc, "task").current_iteration,
                                       lambda e: e["iteration"]),
    "IterationLog.is_stuck": (lambda s, sc, e: IterationLog(s.backend, sc, "task").is_stuck(), lambda e: e["stuck"]),
    "ConversationStore.get_conversation_stats": (
        _stats, lambda e: (e["messages"], e["memories"], e["episodes"], e["summaries"])),
}


#: Deletes and in-place changes, by Alice; Bob's rows must not change.
DELETES: dict[str, Callable[[Any, dict[str, Any]], Any]] = {
    "memories.delete": lambda s, e: s.memories.delete(e["shared_id"], scope=ALICE),
    "archive.move": lambda s, e: s.archive.move(e["shared_id"], scope=ALICE),
    "memories.supersede": lambda s, e: s.memories.supersede(e["shared_id"], Memory(content="the office opens at ten"), scope=ALICE),
    "memories.record_application": lambda s, e: s.memories.record_application(e["shared_id"], scope=ALICE, success=True),
    "archive.expire": lambda s, e: s.archive.expire(scope=ALICE),
    "archive.expire (every scope: expired rows only)": lambda s, e: s.archive.expire(),
    "clear": lambda s, e: s.clear(ALICE),
    "clear (wide)": lambda s, e: s.clear(Scope.any(user_id="alice")),
    "caches.memo_purge (namespace)": lambda s, e: s.caches.memo_purge("ns", scope=ALICE),
    "caches.memo_purge (expired in scope)": lambda s, e: s.caches.memo_purge(scope=ALICE),
    "caches.memo_purge (every scope: expired rows only)": lambda s, e: s.caches.memo_purge(),
    "agent_messages.purge_expired (every scope: expired rows only)": lambda s, e: s.agent_messages.purge_expired(),
    "working.set": lambda s, e: s.working.set(WorkingMemory(goals=["new"]), scope=ALICE),
    "working.update": lambda s, e: s.working.update(scope=ALICE, complete_goals=[f"{MARK['alice']} goal"]),
    "caches.put_compaction (replace)": lambda s, e: s.caches.put_compaction("c1", 0, 10, 1, "h", "replaced", 1, scope=ALICE),
    "caches.put_summary (replace)": lambda s, e: s.caches.put_summary("h", 50, "replaced", scope=ALICE),
    "caches.memo_set (replace)": lambda s, e: s.caches.memo_set("ns", "k", "replaced", scope=ALICE),
    "add (merging)": lambda s, e: s.add(Memory(content="The office opens at nine.", tags=["x"]), scope=ALICE),
    "memories.import_yaml": lambda s, e: s.memories.import_yaml(_export_dir(s, e), scope=ALICE),
    "ConversationStore.clear_conversation": lambda s, e: ConversationStore(s, user_id="alice").clear_conversation("c1"),
}


#: Writes (each used by populate()); and what is neither a read nor a delete.
WRITES = {
    "add", "memories.add", "memories.add_many", "episodes.add", "chat.append", "chat.extend", "agent_messages.send", "caches.memo_set_many",
    "caches.put_embeddings", "iterations.log", "ConversationStore.add_message", "ConversationStore.add_messages",
    "IterationLog.record_call", "IterationLog.end_iteration", "MemoryTiers.remember", "MemoryTiers.update_working",
    "MemoryTiers.record_episode",
}


OTHER = {
    "close": "closes the store",
    "location": "the path or masked DSN",
    "embedder": "the embedder object",
    "path": "the database file",
    "schema": "the PostgreSQL schema, a setting",
    "caches.get_embeddings": "global by design: keyed by the hash of a text (see GLOBAL_TABLES)",
    "caches.embedding_cache": "global by design: the embedding cache for one model",
    "ConversationStore.close": "closes the store",
    "ConversationStore.scope": "builds a Scope, reads nothing",
}


def _export_dir(store: Any, exp: dict[str, Any]) -> Path:
    directory = Path(exp["tmp"]) / uuid.uuid4().hex[:8]
    directory.mkdir()
    store.memories.export_yaml(directory, scope=ALICE)
    return directory


def _public(cls: type, prefix: str = "") -> set[str]:
    # `backend` and `idempotent` are the plumbing every store of one concern has.
    return {prefix + n for n in dir(cls) if not n.startswith("_") and n not in ("backend", "idempotent")}


#: The stores of one concern a store holds, by attribute.
PARTS = {
    "memories": "ctxfold.memory.memories.Memories", "archive": "ctxfold.memory.archive.MemoryArchive",
    "caches": "ctxfold.memory.caches.Caches", "chat": "ctxfold.memory.tiers.ChatHistory",
    "working": "ctxfold.memory.tiers.WorkingMemories", "episodes": "ctxfold.memory.tiers.Episodes",
    "agent_messages": "ctxfold.memory.messages.AgentMessages", "iterations": "ctxfold.memory.iterations.Iterations",
}


def _check_read(name: str, value: Any, who: str) -> None:
    text = repr(value)
    assert MARK[who] in text, f"{name} for {who}: own records missing: {text[:300]}"
    for other, mark in MARK.items():
        if other != who:
            assert mark not in text, f"{name} for {who} returned {other}'s records: {text[:300]}"


# --------------------------------------------------------------------------------------
# Isolation
# --------------------------------------------------------------------------------------
# Few values per field so that scopes share prefixes and neighbours (u1 vs u1+c1, "" vs
# "a"); "%" and "_" would match anything if some read used LIKE.
USERS = ["", "a", "%"]


OTHERS = ["", "a"]


CONVERSATIONS = ["", "a", "_"]


CONTENTS = [
    "The Berlin office opens at 9 on weekdays",
    "Alice prefers tea over coffee in the morning",
    "The deploy failed because the disk was full",
    "We decided to use PostgreSQL for the shared fleet memory",
    "Invoices are due thirty days after delivery",
    "The staging cluster runs three replicas of the API",
    "Bob is allergic to peanuts",
    "Quarterly planning happens in the first week of January",
]


exact_scopes = st.builds(
    Scope,
    user_id=st.sampled_from(USERS),
    agent_id=st.sampled_from(OTHERS),
    session_id=st.sampled_from(OTHERS),
    conversation_id=st.sampled_from(CONVERSATIONS),
)


wide_scopes = st.builds(
    Scope,
    user_id=st.sampled_from([None, *USERS]),
    agent_id=st.sampled_from([None, *OTHERS]),
    session_id=st.sampled_from([None, *OTHERS]),
    conversation_id=st.sampled_from([None, *CONVERSATIONS]),
)


# What a write puts in a scope: a typed memory (most often), a chat message (short-term
# tier), a working-memory entity, an episode, an agent message, a tool-call record.
KINDS = ["memory", "memory", "memory", "chat", "working", "episode", "message", "call"]


writes = st.lists(
    st.tuples(exact_scopes, st.sampled_from(KINDS), st.integers(0, len(CONTENTS) - 1)), min_size=1, max_size=20
)


FIELDS = ("user_id", "agent_id", "session_id", "conversation_id")


def covers(reader: Scope, owner: tuple) -> bool:
    """Whether a read in ``reader`` may see a record written in the exact scope ``owner``."""
    return all(r is None or r == o for r, o in zip(reader.values(), owner))


def owner_of(record) -> tuple:
    return tuple(record.metadata["scope"])


class Model:
    """What the store must hold: (kind, owner scope values, key) rows."""

    def __init__(self) -> None:
        self.rows: set[tuple[str, tuple, str]] = set()
        self.entities: dict[tuple, set[str]] = {}

    def seen_by(self, reader: Scope, kind: str | None = None) -> set[tuple[str, tuple, str]]:
        return {r for r in self.rows if covers(reader, r[1]) and (kind is None or r[0] == kind)}

    def keyed(self, reader: Scope, kind: str) -> set[tuple[tuple, str]]:
        return {(owner, key) for _, owner, key in self.seen_by(reader, kind)}

    def ids(self) -> set[str]:
        return {key for kind, _, key in self.rows if kind == "memory"}

    def remove(self, rows: set) -> None:
        self.rows -= rows
        for _, owner, _ in rows:
            self.entities.pop(owner, None)


def write(store, model: Model, scope: Scope, kind: str, c: int, n: int) -> None:
    from ctxfold.memory import AgentMessage, ChatMessage, Episode

    owner = scope.values()
    meta = {"scope": list(owner), "n": n}
    if kind == "memory":
        mid = store.add(Memory(category="fact", content=CONTENTS[c], metadata=meta), scope=scope)
        model.rows.add(("memory", owner, mid))
    elif kind == "chat":
        store.chat.append(ChatMessage(role="user", content=CONTENTS[c], metadata=meta), scope=scope)
        model.rows.add(("chat", owner, str(n)))
    elif kind == "working":
        entity = f"{owner}#{n}"
        store.working.update(scope=scope, add_entities=[entity])
        model.rows.add(("working", owner, "working"))  # one row per scope
        model.entities.setdefault(owner, set()).add(entity)
    elif kind == "episode":
        eid = store.episodes.add(Episode(content=f"{CONTENTS[c]} (event {n})", significance=0.7, metadata=meta), scope=scope)
        model.rows.add(("episode", owner, eid))
    elif kind == "message":
        mid = store.agent_messages.send(
            AgentMessage(source="planner", target="worker", content=CONTENTS[c], session_id="s1", metadata=meta),
            scope=scope,
        )
        model.rows.add(("message", owner, mid))
    else:
        store.iterations.log(scope=scope).record_call(tool="search", params=meta, raw_output=CONTENTS[c])
        model.rows.add(("call", owner, str(n)))


def check_reads(store, model: Model, reader: Scope, queries: list[str]) -> None:
    what = f"reading {reader}"

    def same(records, kind: str, key) -> None:
        for r in records:
            assert covers(reader, owner_of(r)), f"{what}: a {kind} of {owner_of(r)} crossed the scope"
        got = sorted((owner_of(r), key(r)) for r in records)
        assert got == sorted(model.keyed(reader, kind)), f"{what}: {kind} records"

    # typed memories: list, count, search, get, archive
    same(store.memories.all(scope=reader), "memory", lambda m: m.id)
    assert store.memories.count(scope=reader) == len(model.keyed(reader, "memory")), f"{what}: count()"
    for q in queries:
        # no threshold and k above the scope's size: every memory of the scope, once
        same(store.search(q, scope=reader, k=100), "memory", lambda m: m.id)
    expected = model.keyed(reader, "memory")
    for mid in model.ids():
        m = store.get(mid, scope=reader)
        visible = {owner for owner, i in expected if i == mid}
        if m is None:
            assert not visible, f"{what}: get({mid}) is None but the memory is there"
        else:
            assert m.id == mid
            assert owner_of(m) in visible, f"{what}: get({mid}) returned the copy of {owner_of(m)}"
        assert store.archive.get(mid, scope=reader) is None
    assert store.archive.all(scope=reader) == []

    # short-term, episodic, agent messages
    same(store.chat.recent(scope=reader, n=10_000), "chat", lambda m: str(m.metadata["n"]))
    same(store.episodes.all(scope=reader), "episode", lambda e: e.id)
    same(store.episodes.recall(queries[0], scope=reader, k=100), "episode", lambda e: e.id)
    same(store.agent_messages.query_by_target("worker", scope=reader), "message", lambda m: m.id)
    same(store.agent_messages.in_session("s1", scope=reader), "message", lambda m: m.id)

    if reader.exact:  # working memory and iteration logs are read in one exact scope
        assert set(store.working.get(scope=reader).entities) == model.entities.get(reader.values(), set())
        calls = store.iterations.log(scope=reader).calls()
        for call in calls:
            assert tuple(call.params["scope"]) == reader.values(), f"{what}: a tool call crossed the scope"
        assert sorted(str(call.params["n"]) for call in calls) == sorted(k for _, k in model.keyed(reader, "call"))


# --- the schema ------------------------------------------------------------------------------------------
def test_every_table_is_scoped_or_global_by_design(opener: Opener) -> None:
    store = opener.open()
    populate(store)
    tables = opener.tables(store)
    unscoped = {t for t, columns in tables.items() if "scope_id" not in columns and t not in GLOBAL_TABLES}
    assert not unscoped, f"tables without scope_id: {sorted(unscoped)} (key them by scope, or justify in GLOBAL_TABLES)"
    scoped = {t for t, columns in tables.items() if "scope_id" in columns}
    assert scoped == set(SCOPED_TABLES), "SCOPED_TABLES (what clear() deletes) must list every table with a scope_id"
    assert set(GLOBAL_TABLES) <= set(tables)
    by_scope = rows_by_scope(opener, store)
    for who in ("alice", "bob"):
        sid = scope_id(opener, store, SCOPES[who])
        empty = [t for t in SCOPED_TABLES if not by_scope.get(sid, {}).get(t)]
        assert not empty, f"populate() wrote nothing of {who} into {empty}: add a write for each table"


def test_every_public_api_is_classified() -> None:
    from ctxfold.memory.postgres import PostgresStore as Pg

    api = (_public(SqliteStore) | _public(Pg) | _public(ConversationStore, "ConversationStore.")
           | _public(IterationLog, "IterationLog.") | _public(MemoryTiers, "MemoryTiers."))
    with SqliteStore(":memory:") as store:
        for attribute, path in PARTS.items():
            part = getattr(store, attribute)
            assert f"{type(part).__module__}.{type(part).__name__}" == path, attribute
            api |= _public(type(part), attribute + ".")
        assert not set(vars(store)) - set(PARTS) - {"backend"}, "a store of a new concern: add it to PARTS"
    put_names = {"caches.put_compaction", "caches.put_summary", "caches.memo_set", "caches.memoize", "working.set",
                 "working.update", "memories.record_application", "memories.import_yaml"}
    known = set(READS) | set(COUNTED) | {d.split(" ")[0] for d in DELETES} | WRITES | set(OTHER) | put_names
    new = sorted(api - known)
    assert not new, (
        f"public APIs not covered by the scope tests: {new}. Fix: add each to READS/COUNTED (reads), "
        "DELETES (deletes and in-place changes) or WRITES (and write with it in populate()) in tests/memory/test_scope.py"
    )


def test_no_read_crosses_scopes(opener: Opener, tmp_path: Path) -> None:
    store = opener.open()
    expected = populate(store)
    second = opener.open(store.test_location)  # its caches learn everything from the database
    for reader in (store, second):
        for who in ("alice", "bob"):
            exp = {**expected[who], "tmp": tmp_path}
            wide = Scope.any(user_id=SCOPES[who].user_id)
            for name, (read, accepts_wide) in READS.items():
                _check_read(name, read(reader, SCOPES[who], exp), who)
                if accepts_wide:
                    _check_read(f"{name} (wide)", read(reader, wide, exp), who)
                else:
                    try:
                        read(reader, wide, exp)
                    except InvalidInputError:
                        continue
                    pytest.fail(f"{name} accepted the wide scope {wide} (expected InvalidInputError)")
            for name, (read, want) in COUNTED.items():
                assert read(reader, SCOPES[who], exp) == want(exp), f"{name} for {who}"


@pytest.mark.parametrize("name", sorted(DELETES))
def test_no_delete_or_change_crosses_scopes(opener: Opener, tmp_path: Path, name: str) -> None:
    store = opener.open()
    expected = populate(store)
    before = rows_by_scope(opener, store)
    alice = scope_id(opener, store, ALICE)
    DELETES[name](store, {**expected["alice"], "tmp": tmp_path})
    after = rows_by_scope(opener, store)
    for sid in set(before) | set(after):
        if sid != alice:
            assert after.get(sid) == before.get(sid), f"{name} by alice changed rows of scope id {sid}"
    # Bob still reads everything of his.
    exp = {**expected["bob"], "tmp": tmp_path}
    for read_name, (read, _) in READS.items():
        _check_read(read_name, read(store, BOB, exp), "bob")


# --- the probe that found the crossing ----------------------------------------------------------------------
def test_compaction_summaries_do_not_cross_users(opener: Opener) -> None:
    store = opener.open()
    alice, bob = ConversationStore(store, user_id="alice"), ConversationStore(store, user_id="bob")
    alice.add_message("c1", "user", "hello")
    bob.add_message("c1", "user", "hi")
    store.caches.put_compaction("c1", 0, 10, 1, "h", "alice's private summary", 5, scope=alice.scope("c1"))
    # Without a scope: the anonymous scope of c1, not anybody's.
    assert store.caches.compactions("c1") == []
    assert store.caches.get_compaction("c1", 0, 10, 1, "h") is None
    assert store.caches.get_compaction("c1", 0, 10, 1, "h", scope=bob.scope("c1")) is None
    assert [c.summary for c in store.caches.compactions("c1", scope=alice.scope("c1"))] == ["alice's private summary"]
    assert bob.get_conversation_stats("c1").summaries == 0
    assert alice.get_conversation_stats("c1").summaries == 1
    bob.clear_conversation("c1")
    assert [c.summary for c in store.caches.compactions("c1", scope=alice.scope("c1"))] == ["alice's private summary"]
    assert alice.clear_conversation("c1") == 2  # her message and her summary
    assert store.caches.compactions("c1", scope=alice.scope("c1")) == []
    with pytest.raises(InvalidInputError, match="conversation_id"):
        store.caches.put_compaction("c2", 0, 1, 1, "h", "x", 1, scope=alice.scope("c1"))


# --- migration from the previous schema ---------------------------------------------------------------------
def test_previous_schema_is_migrated_without_handing_rows_to_a_user(opener: Opener) -> None:
    location = opener.new_location()
    v1 = [render(statement, opener.backend) for statement in MIGRATIONS[0]]
    rows = [
        "CREATE TABLE schema_version (version INTEGER NOT NULL)",
        *v1,
        "INSERT INTO schema_version (version) VALUES (1)",
        "INSERT INTO scopes (user_id, agent_id, session_id, conversation_id, gen) VALUES ('alice', '', '', 'c1', 0)",
        "INSERT INTO summaries VALUES ('c1', 0, 10, 1, 'h', 'old summary of c1', 5, 1.0)",
        "INSERT INTO summaries VALUES ('', 0, 0, 50, 'h', 'old short summary', 2, 1.0)",
        "INSERT INTO memo (namespace, key, value, created_at, expires_at) VALUES ('ns', 'k', ?, 1.0, NULL)",
    ]
    import msgspec

    value = msgspec.msgpack.encode("old memo value")
    if opener.backend == "sqlite":
        conn = sqlite3.connect(location)
        for statement in rows:
            conn.execute(statement, (value,) if "?" in statement else ())
        conn.commit()
        conn.close()
    else:
        import psycopg

        with psycopg.connect(opener.dsn, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{location}"')
            conn.execute(f'SET search_path TO "{location}"')
            for statement in rows:
                conn.execute(statement.replace("?", "%s"), (value,) if "?" in statement else ())
    store = opener.open(location)
    assert [r[0] for r in opener.sql(store, "SELECT MAX(version) FROM schema_version")] == [len(MIGRATIONS)]
    # Kept where the calls without scope= read them ...
    assert [c.summary for c in store.caches.compactions("c1")] == ["old summary of c1"]
    assert store.caches.get_summary("h", 50) == "old short summary"
    assert store.caches.memo_get("ns", "k") == "old memo value"
    # ... and no user's scope sees them, not even the only user of conversation c1.
    assert store.caches.compactions("c1", scope=ALICE) == []
    assert store.caches.compactions("c1", scope=Scope.any(user_id="alice")) == []
    assert ConversationStore(store, user_id="alice").get_conversation_stats("c1").summaries == 0
    assert store.caches.memo_get("ns", "k", scope=ALICE) is None
    assert store.caches.get_summary("h", 50, scope=ALICE) is None
    # The migrated store works as a new one.
    store.caches.put_compaction("c1", 0, 10, 1, "h", "alice's", 1, scope=ALICE)
    assert [c.summary for c in store.caches.compactions("c1", scope=ALICE)] == ["alice's"]
    assert [c.summary for c in store.caches.compactions("c1")] == ["old summary of c1"]
    store.add(Memory(content="after the migration"), scope=ALICE)
    assert store.search("after the migration", scope=ALICE, k=1)[0].content == "after the migration"
    store.close()
    again = opener.open(location)  # opening again migrates nothing
    assert again.caches.memo_get("ns", "k") == "old memo value"


def test_isolation_no_read_crosses_a_scope(backend: Backend) -> None:
    writer = backend.open()
    reader = backend.open()  # a second store on the same database: its caches must follow the writes
    everything = Scope.any()
    examples = 0

    @settings(
        max_examples=20 if backend.name == "sqlite" else 12,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        ops=writes,
        probes=st.lists(wide_scopes, max_size=3),
        clears=st.lists(wide_scopes | exact_scopes, min_size=1, max_size=3),
    )
    def run(ops, probes, clears) -> None:
        nonlocal examples
        examples += 1
        writer.clear(everything)  # a failed (then shrunk) example may have left rows behind
        model = Model()
        for n, (scope, kind, c) in enumerate(ops):
            write(writer, model, scope, kind, c, n)
            # interleaved: a search of the written scope sees only its own memories
            for m in writer.search(CONTENTS[c], scope=scope, k=50):
                assert owner_of(m) == scope.values()
        used = {Scope(**dict(zip(FIELDS, owner))) for _, owner, _ in model.rows}
        readers = [*used, *probes, everything, Scope(), Scope(user_id="nobody")]
        queries = [CONTENTS[ops[0][2]], CONTENTS[-1]]
        for i, scope in enumerate(readers):
            check_reads(writer if i % 2 == 0 else reader, model, scope, queries)

        for target in clears:
            before = model.seen_by(target)
            removed = writer.clear(target)
            assert removed == len(before), f"clear({target}) removed {removed} rows, expected {len(before)}"
            model.remove(before)
            for i, scope in enumerate([*used, target, everything]):
                check_reads(reader if i % 2 == 0 else writer, model, scope, queries[:1])

        writer.clear(everything)
        assert reader.memories.count(scope=everything) == 0

    try:
        run()
    finally:
        writer.close()
        reader.close()
    assert examples >= 10


def test_same_content_in_two_scopes_is_two_records(backend: Backend) -> None:
    """The id is a hash of category and content, so the same memory gets the same
    id in every scope: each scope must still hold and return its own copy, and a
    write or a clear in one must not touch the other."""
    a, b = Scope(user_id="u1"), Scope(user_id="u1", conversation_id="c1")
    with backend.open() as store:
        ma = store.add(Memory(content="Berlin office opens at 9", tags=["A"]), scope=a)
        mb = store.add(Memory(content="Berlin office opens at 9", tags=["B"]), scope=b)
        assert ma == mb
        assert store.get(ma, scope=a).tags == ["A"]
        assert store.get(mb, scope=b).tags == ["B"]
        assert [m.tags for m in store.search("office hours", scope=a, k=10)] == [["A"]]
        assert sorted(m.tags[0] for m in store.search("office hours", scope=a.widen(), k=10)) == ["A", "B"]
        assert store.clear(b) == 1
        assert store.get(ma, scope=a).tags == ["A"]
        assert store.get(mb, scope=b) is None
