"""Isolation, durability and bad input, run
against both backends (SQLite in tmp_path; PostgreSQL on the server the test
run starts itself, one fresh database per test: see tests/pg_server.py and the
`pg_fresh_dsn` fixture in conftest.py).

- Isolation: a hypothesis test writes records of every scoped kind (typed
  memories, including the same content, hence the same id, in several scopes;
  chat messages; working memory; episodes; agent messages; tool-call records)
  into random scopes and checks that no read (get, search, memories, count,
  archived, get_archived, recent_messages, episodes, recall_episodes,
  query_by_target, messages_in_session, get_working, iterations().calls())
  returns a record of another scope, exact or wide (`Scope.any`, `widen`),
  through the writing store and through a second store on the same database
  (its caches must notice the writes); `clear(scope)` removes everything in the
  scope and nothing else. Plus: a write that fails mid-transaction leaves no
  stale scope behind; a `ConversationStore` bound to a user stays in it.
- Durability: a writer process adds memories in a loop and prints each id once
  `add` returned; it is killed with SIGKILL at random moments (25 times, some
  while it is still opening the store or creating the schema); every printed id
  must be there afterwards and the database must open cleanly (SQLite: `PRAGMA
  integrity_check` is ok). The writers are forked from a zygote process that has
  imported ctxfold once (0.5 s of imports per writer would make 25 rounds take
  12 s); nothing is opened before the fork. Two processes adding 1,000 records
  each into one scope at the same time lose nothing and raise nothing.
- Bad input: non-SQLite and corrupt files, read-only paths, an unreachable
  PostgreSQL server, a wrong embedding dimension each raise `StoreError` whose
  message names the path or DSN (never the password) and the fix.

Children get precomputed random embeddings (`add(..., embedding=)`): no two
are near-duplicates, so nothing merges and every add is a real insert.
"""

from __future__ import annotations

import os
import random
import select
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
import traceback
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxfold.errors import StoreError
from ctxfold.memory import Memory, Scope, SqliteStore

BACKENDS = ["sqlite", "postgres"]
DIM = 32  # embeddings the tests pass themselves (the children, the dimension checks)


class Backend:
    """Where one test's store lives: a SQLite file or a fresh PostgreSQL database."""

    def __init__(self, name: str, location: str) -> None:
        self.name = name
        self.location = location

    def open(self, **kwargs):
        if self.name == "sqlite":
            return SqliteStore(self.location, **kwargs)
        from ctxfold.memory import PostgresStore

        return PostgresStore(self.location, **kwargs)

    def __repr__(self) -> str:
        return f"Backend({self.name}, {self.location})"


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", str(tmp_path / "agent.db"))
    return Backend("postgres", request.getfixturevalue("pg_fresh_dsn"))


def unit(rng: np.random.Generator, dim: int = DIM) -> np.ndarray:
    v = rng.standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def full_error(exc: BaseException) -> str:
    """The exception as a traceback would print it, chained causes included."""
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def assert_names_fix(message: str) -> None:
    assert "fix" in message.lower(), f"the message does not say how to fix it: {message}"


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


class InjectedFailure(Exception):
    pass


def failing_memory_insert(store):
    """Make the store's next INSERT of a memory fail inside its write transaction,
    after the scope row and the dimension were written. (Bad input never gets
    that far: it is refused before the transaction starts.)"""
    real = store.backend.sql

    def sql(text: str) -> str:
        if text.lstrip().startswith("INSERT INTO memories"):
            del store.backend.sql
            raise InjectedFailure("a failure inside the transaction")
        return real(text)

    store.backend.sql = sql


def test_failed_write_leaves_no_stale_scope(backend: Backend) -> None:
    """A write into a new scope that fails inside its transaction must leave
    nothing behind that later writes use: the scope row it created is rolled
    back, so a cached id for it would point at nothing (PostgreSQL) or at the
    next scope created (SQLite reuses the rowid)."""
    alice, bob = Scope(user_id="alice"), Scope(user_id="bob")
    rng = np.random.default_rng(5)
    with backend.open() as store, backend.open() as other:
        failing_memory_insert(store)
        with pytest.raises(InjectedFailure):
            store.add(Memory(content="first note"), scope=alice, embedding=unit(rng))
        other.add(Memory(content="bob's bank PIN is 4711"), scope=bob, embedding=unit(rng))
        store.add(Memory(content="alice likes jazz"), scope=alice, embedding=unit(rng))
        assert [m.content for m in other.memories.all(scope=bob)] == ["bob's bank PIN is 4711"]
        assert [m.content for m in store.search(unit(rng), scope=alice, k=5)] == ["alice likes jazz"]
        assert [m.content for m in other.memories.all(scope=alice)] == ["alice likes jazz"]


def test_failed_first_write_leaves_no_stale_dimension(backend: Backend) -> None:
    """The same for the embedding dimension a store records on its first write: a
    failed first write must not leave this process believing a dimension the
    database does not hold, or it later accepts rows of the wrong dimension."""
    scope = Scope(user_id="u")
    with backend.open() as store, backend.open() as other:
        failing_memory_insert(store)
        with pytest.raises(InjectedFailure):
            store.add(Memory(content="first"), scope=scope, embedding=np.ones(DIM))
        other.add(Memory(content="sixteen"), scope=scope, embedding=np.ones(16))  # the store is 16-dim now
        with pytest.raises(StoreError):
            store.memories.add_many([Memory(content="thirty-two")], scope=scope, embeddings=np.ones((1, DIM)))
        assert [m.content for m in other.search(np.ones(16), scope=scope.widen(), k=5)] == ["sixteen"]


def test_conversation_store_stays_in_its_user(backend: Backend) -> None:
    """A `ConversationStore` bound to a user reads, counts and clears that user's
    conversation only, even when another user has a conversation of the same id
    (ids like "main" or "1" are common)."""
    from ctxfold.memory import ConversationStore

    with backend.open() as store:
        alice, bob = ConversationStore(store, user_id="alice"), ConversationStore(store, user_id="bob")
        alice.add_message("c1", "user", "alice asks about the Berlin office")
        bob.add_message("c1", "user", "bob asks about invoices")
        bob.add_message("c1", "assistant", "invoices are due in thirty days")
        assert [m.content for m in alice.get_messages("c1")] == ["alice asks about the Berlin office"]
        assert alice.get_conversation_stats("c1").messages == 1, "alice's stats count bob's messages"
        alice.clear_conversation("c1")
        assert alice.get_messages("c1") == []
        assert len(bob.get_messages("c1")) == 2, "alice's clear_conversation deleted bob's conversation"
        assert bob.get_conversation_stats("c1").messages == 2


# --------------------------------------------------------------------------------------
# Durability
# --------------------------------------------------------------------------------------

IMPORTS = """
import os, sys, traceback
import numpy as np
from ctxfold.memory import Memory, Scope
backend, location, dim = sys.argv[1], sys.argv[2], int(sys.argv[3])
if backend == "sqlite":
    from ctxfold.memory import SqliteStore as Store
else:
    import psycopg, psycopg_pool
    from ctxfold.memory import PostgresStore as Store
# "<tag> record <i>" texts on random vectors: two of one writer within the supersede
# cosine would read as an update (another number); these tests count every write.
STORE_UPDATES = None
"""

# The writer the SIGKILL test kills. Starting Python and importing numpy and ctxfold
# takes ~0.5 s, so a zygote process imports once and forks one writer per round (nothing
# is opened before the fork: each writer opens the store itself, so early kills land in
# the open and the schema migration). A writer prints "pid N", then "id <id>" after each
# add returned; "reap N" makes the zygote wait for it and print "reaped N <status>",
# which therefore comes after everything the writer wrote.
ZYGOTE = IMPORTS + textwrap.dedent(
    """
    def write_forever(tag):
        os.write(1, f"pid {os.getpid()}\\n".encode())
        store = Store(location, supersede_threshold=STORE_UPDATES)
        scope = Scope(user_id="durability")
        rng = np.random.default_rng()
        i = 0
        while True:
            v = rng.standard_normal(dim).astype(np.float32)
            mid = store.add(Memory(category="fact", content=f"{tag} record {i}"), scope=scope, embedding=v)
            os.write(1, f"id {mid}\\n".encode())
            i += 1

    sys.stdout.write("ready\\n"); sys.stdout.flush()
    for line in sys.stdin:
        cmd, arg = line.split()
        if cmd == "fork":
            if os.fork() == 0:
                try:
                    write_forever(arg)
                except BaseException:
                    os.write(2, traceback.format_exc().encode())
                os._exit(1)
        elif cmd == "reap":
            _, status = os.waitpid(int(arg), 0)
            sys.stdout.write(f"reaped {arg} {status}\\n"); sys.stdout.flush()
    """
)

# The concurrency test's writer: opens the store, says ready, waits for go, adds `count`.
WRITER = IMPORTS + textwrap.dedent(
    """
    count, tag = int(sys.argv[4]), sys.argv[5]
    store = Store(location, supersede_threshold=STORE_UPDATES)
    scope = Scope(user_id="durability")
    rng = np.random.default_rng()
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(count):
        v = rng.standard_normal(dim).astype(np.float32)
        mid = store.add(Memory(category="fact", content=f"{tag} record {i}"), scope=scope, embedding=v)
        print(mid, flush=True)
    store.close()
    print("done", flush=True)
    """
)


def spawn(script: str, backend: Backend, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", script, backend.name, backend.location, str(DIM), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def send(proc: subprocess.Popen, line: str) -> None:
    proc.stdin.write(line.encode() + b"\n")
    proc.stdin.flush()


def stop(proc: subprocess.Popen) -> str:
    """Kill, reap and close; what it wrote to stderr."""
    proc.kill()
    proc.wait()
    err = proc.stderr.read().decode(errors="replace")
    for f in (proc.stdin, proc.stdout, proc.stderr):
        f.close()
    return err


class LineReader:
    """Complete lines of a child's stdout, with timeouts (a half-written last line is
    not a line)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.fd = proc.stdout.fileno()
        self.buffer = b""
        self.eof = False
        self.pending: list[str] = []

    def _fill(self, timeout: float) -> None:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if ready:
            chunk = os.read(self.fd, 1 << 16)
            self.eof = not chunk
            self.buffer += chunk
            *done, self.buffer = self.buffer.split(b"\n")
            self.pending += [line.decode() for line in done]

    def until(self, predicate, timeout: float = 60.0) -> list[str]:
        """Lines up to and including the first for which ``predicate`` is true."""
        deadline = time.monotonic() + timeout
        out: list[str] = []
        while True:
            while self.pending:
                line = self.pending.pop(0)
                out.append(line)
                if predicate(line):
                    return out
            if self.eof or time.monotonic() > deadline:
                raise AssertionError(f"no expected line within {timeout} s (eof={self.eof}); got {out[-5:]}")
            self._fill(max(0.0, deadline - time.monotonic()))

    def rest(self, timeout: float = 120.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while not self.eof and time.monotonic() < deadline:
            self._fill(max(0.0, deadline - time.monotonic()))
        out, self.pending = self.pending, []
        return out


def check_sqlite_file(path: str) -> None:
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()


def test_sigkill_loses_no_returned_write(backend: Backend) -> None:
    rng = random.Random()
    printed: list[str] = []
    kills = early = 0
    zygote = spawn(ZYGOTE, backend)
    out = LineReader(zygote)
    try:
        out.until(lambda line: line == "ready")
        for round_ in range(25):
            send(zygote, f"fork w{round_}")
            pid = int(out.until(lambda line: line.startswith("pid "))[-1].split()[1])
            if round_ % 4 == 0:
                # early: while the writer opens the store (and, in round 0, creates the schema)
                time.sleep(rng.uniform(0.0, 0.03))
                early += 1
            else:
                printed += [line.split()[1] for line in out.until(lambda line: line.startswith(("id ", "reaped")), 30)]
                time.sleep(rng.uniform(0.0, 0.03))
            os.kill(pid, signal.SIGKILL)
            kills += 1
            send(zygote, f"reap {pid}")
            lines = out.until(lambda line: line.startswith(f"reaped {pid} "))
            printed += [line.split()[1] for line in lines if line.startswith("id ")]
            status = int(lines[-1].split()[2])
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, (
                f"writer {round_} did not die by SIGKILL (status {status})"
            )
    finally:
        err = stop(zygote)
    assert not err.strip(), f"a writer failed before it was killed:\n{err}"
    assert kills >= 20
    assert len(printed) >= 20, "the writers returned too few adds for the test to mean anything"

    if backend.name == "sqlite":
        check_sqlite_file(backend.location)
    with backend.open() as store:  # opens cleanly
        scope = Scope(user_id="durability")
        missing = [mid for mid in printed if store.get(mid, scope=scope) is None]
        assert not missing, f"{len(missing)} of {len(printed)} returned writes lost, e.g. {missing[:3]}"
        assert store.memories.count(scope=scope) >= len(set(printed))
        store.add(Memory(content="after the kills"), scope=scope, embedding=unit(np.random.default_rng()))
    if backend.name == "sqlite":
        check_sqlite_file(backend.location)


def test_two_concurrent_writers_lose_nothing(backend: Backend) -> None:
    """Two processes add 1,000 memories each into the same scope at the same time
    (one transaction per add, both contending for the same scope row)."""
    with backend.open():  # the schema exists before the race (the SIGKILL test covers racing opens)
        pass
    procs = [spawn(WRITER, backend, "1000", tag) for tag in ("left", "right")]
    errors = ["", ""]
    ids: list[list[str]] = [[], []]
    try:
        readers = [LineReader(p) for p in procs]
        for r in readers:
            r.until(lambda line: line == "ready")
        for p in procs:
            send(p, "go")
        t0 = time.monotonic()
        for i, (p, r) in enumerate(zip(procs, readers)):
            lines = r.rest()
            p.wait(timeout=120)
            assert lines and lines[-1] == "done", f"writer {i} stopped after {len(lines)} lines"
            ids[i] = lines[:-1]
        elapsed = time.monotonic() - t0
    finally:
        errors = [stop(p) for p in procs]
    for i, p in enumerate(procs):
        assert p.returncode == 0 and not errors[i].strip(), f"writer {i} exited {p.returncode}: {errors[i]}"
    assert len(set(ids[0])) == len(set(ids[1])) == 1000
    assert not set(ids[0]) & set(ids[1])
    scope = Scope(user_id="durability")
    with backend.open() as store:
        assert store.memories.count(scope=scope) == 2000
        assert {m.id for m in store.memories.all(scope=scope)} == set(ids[0]) | set(ids[1])
    if backend.name == "sqlite":
        check_sqlite_file(backend.location)
    print(f"{backend.name}: 2 x 1000 concurrent adds in {elapsed:.2f} s")


# --------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------


def open_and_use(path: str) -> None:
    """Open a store at ``path`` and read and write it: whatever is wrong must surface."""
    with SqliteStore(path) as store:
        scope = Scope(user_id="u")
        store.memories.count(scope=scope)
        store.search("anything", scope=scope, k=3)
        store.add(Memory(content="a memory"), scope=scope)


@pytest.mark.parametrize(
    "content",
    [b"this is a text file, not a database\n" * 200, bytes(random.Random(7).randrange(256) for _ in range(8192))],
    ids=["text", "random-bytes"],
)
def test_non_sqlite_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "agent.db"
    path.write_bytes(content)
    with pytest.raises(StoreError) as info:
        open_and_use(str(path))
    assert str(path) in str(info.value)
    assert_names_fix(str(info.value))
    assert path.read_bytes() == content, "the store wrote into a file that is not its own"


def _filled_store(path: Path) -> None:
    rng = np.random.default_rng(0)
    with SqliteStore(path) as store:
        store.memories.add_many(
            [Memory(content=f"memory number {i} " + "x" * 300) for i in range(200)],
            scope=Scope(user_id="u"),
            embeddings=rng.standard_normal((200, DIM)),
        )


@pytest.mark.parametrize("damage", ["schema-page", "truncated", "zeroed-header"])
def test_corrupt_sqlite_file(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "agent.db"
    _filled_store(path)
    data = bytearray(path.read_bytes())
    assert data.startswith(b"SQLite format 3\x00") and len(data) > 16384
    if damage == "schema-page":  # the b-tree of page 1 (sqlite_schema) after the 100-byte header
        data[100:4096] = random.Random(1).randbytes(3996)
    elif damage == "truncated":  # the header still claims every page
        data = data[: len(data) // 3]
    else:
        data[:100] = bytes(100)
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError) as info:
        open_and_use(str(path))
    assert str(path) in str(info.value)
    assert_names_fix(str(info.value))


def _make_immutable(path: Path) -> None:
    """Read-only even for root: the immutable attribute (chattr +i)."""
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("running as root, and chattr (to make a path read-only for root) is not installed")
    r = subprocess.run([chattr, "+i", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"running as root, and chattr +i is refused here ({r.stderr.strip()}): no read-only path to test")


def _undo_immutable(path: Path) -> None:
    chattr = shutil.which("chattr")
    if chattr and path.exists():
        subprocess.run([chattr, "-i", str(path)], capture_output=True)


@pytest.mark.parametrize("what", ["directory", "existing-file"])
def test_read_only_path(tmp_path: Path, what: str) -> None:
    """A path the process cannot write. chmod does not stop root, so as root the path
    is made immutable (chattr +i: no process may write it or create files in it, root
    included); as another user it is chmod 0o555 / 0o444. Either way the OS refuses
    the write, as on a read-only mount or a file owned by someone else."""
    directory = tmp_path / "ro"
    directory.mkdir()
    path = directory / "agent.db"
    if what == "existing-file":
        _filled_store(path)
        for extra in directory.iterdir():
            if extra != path:
                extra.unlink()  # the -shm a clean close may leave
        target, mode = path, 0o444
    else:
        target, mode = directory, 0o555
    try:
        if os.geteuid() == 0:
            _make_immutable(target)
        else:
            target.chmod(mode)
            if what == "existing-file":
                directory.chmod(0o555)
        with pytest.raises(StoreError) as info:
            open_and_use(str(path))
    finally:
        _undo_immutable(target)
        directory.chmod(0o755)
        if path.exists():
            path.chmod(0o644)
    assert str(path) in str(info.value)
    assert_names_fix(str(info.value))


def test_path_whose_parent_is_a_file(tmp_path: Path) -> None:
    """A path that can never be created (its "directory" is a regular file)."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file")
    path = blocker / "agent.db"
    with pytest.raises(StoreError) as info:
        open_and_use(str(path))
    assert str(path) in str(info.value)
    assert_names_fix(str(info.value))


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


SECRET = "Pa55-word_that-must-not-leak"


@pytest.mark.parametrize("form", ["url", "key-value"])
def test_unreachable_postgres(form: str) -> None:
    pytest.importorskip("psycopg")
    from ctxfold.memory import PostgresStore

    port = _unused_port()  # nothing listens there: connection refused, at once and offline
    if form == "url":
        dsn = f"postgresql://agent:{SECRET}@127.0.0.1:{port}/fleet"
    else:
        dsn = f"host=127.0.0.1 port={port} user=agent password={SECRET} dbname=fleet"
    t0 = time.monotonic()
    with pytest.raises(StoreError) as info:
        PostgresStore(dsn, timeout=3)
    assert time.monotonic() - t0 < 20
    message = str(info.value)
    assert "127.0.0.1" in message and str(port) in message, message
    assert SECRET not in full_error(info.value), "the password leaks into the error (or its chained cause)"
    assert SECRET not in repr(info.value.args)
    assert_names_fix(message)


# --- wrong embedding dimension ----------------------------------------------------------------


class FixedDimEmbedder:
    """A deterministic embedder of a given dimension."""

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def embed(self, texts):
        return np.stack([unit(np.random.default_rng(abs(hash(t)) % 2**32), self.dim) for t in texts])


def secret_location(backend: Backend) -> tuple[str, str]:
    """The location to open and what a message must contain to name it. For
    PostgreSQL a password is added (the test server trusts loopback and ignores
    it): it must not appear in the message."""
    if backend.name == "sqlite":
        return backend.location, backend.location
    dsn = backend.location.replace("postgresql://postgres@", f"postgresql://postgres:{SECRET}@")
    assert SECRET in dsn
    host_port = dsn.split("@", 1)[1].split("/", 1)[0]
    return dsn, host_port


def test_wrong_embedding_dimension(backend: Backend) -> None:
    location, named = secret_location(backend)
    backend = Backend(backend.name, location)
    rng = np.random.default_rng(3)
    scope = Scope(user_id="u")
    with backend.open() as store:
        store.add(Memory(content="a 32-dimensional memory"), scope=scope, embedding=unit(rng, DIM))
        attempts = {
            "add": lambda: store.add(Memory(content="a 16-dimensional memory"), scope=scope, embedding=unit(rng, 16)),
            "add_many": lambda: store.memories.add_many(
                [Memory(content="x one"), Memory(content="x two")], scope=scope, embeddings=rng.standard_normal((2, 48))
            ),
            "search": lambda: store.search(unit(rng, 16), scope=scope, k=3),
            "add in a new scope": lambda: store.add(
                Memory(content="elsewhere"), scope=Scope(user_id="v"), embedding=unit(rng, 16)
            ),
        }
        for name, attempt in attempts.items():
            with pytest.raises(StoreError) as info:
                attempt()
            message = str(info.value)
            assert named in message, f"{name}: {message}"
            assert SECRET not in full_error(info.value), f"{name}: the password leaks"
            assert_names_fix(message)
        assert store.memories.count(scope=scope.widen("user_id")) == 1, "a refused write left something behind"

    # reopened with an embedder of another dimension: adding and searching text refuse
    with backend.open(embedder=FixedDimEmbedder(24)) as store:
        for name, attempt in {
            "add text": lambda: store.add(Memory(content="a 24-dimensional memory"), scope=scope),
            "search text": lambda: store.search("a query", scope=scope, k=3),
        }.items():
            with pytest.raises(StoreError) as info:
                attempt()
            assert named in str(info.value), f"{name}: {info.value}"
            assert SECRET not in full_error(info.value)
            assert_names_fix(str(info.value))
        assert store.memories.count(scope=scope) == 1
