"""The backend both stores share, on SQLite and PostgreSQL: transactions and
durability.

- A failed write leaves nothing behind: no record, no stale cached scope row
  id or embedding dimension; a scope id is not shared before its row is
  committed.
- Durability: a writer process adds memories in a loop and prints each id once
  `add` returned; it is killed with SIGKILL at random moments (some while it is
  still opening the store or creating the schema); every printed id must be
  there afterwards and the database must open cleanly (SQLite: `PRAGMA
  integrity_check` is ok). The writers are forked from a zygote process that
  has imported ctxfold once; nothing is opened before the fork. Two processes
  adding records into one scope at the same time lose nothing and raise nothing.
- A wrong embedding dimension raises `StoreError` naming the fix."""

from __future__ import annotations

import os
import random
import select
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import traceback
from typing import Any

import numpy as np
import pytest
from ctxfold.errors import StoreError
from ctxfold.memory import Memory, Scope, SqliteStore
from hypothesis import strategies as st
from memory_stores import U1, StoreOpener


def unit(seed: int, dim: int = 16) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


DIM = 64  # random unit vectors this wide are far apart: no add merges into or supersedes another


SCOPE = Scope(user_id="u1", conversation_id="c1")


def unit_rows(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


BACKENDS = ["sqlite", "postgres"]


CHILD_DIM = 32  # embeddings the tests pass themselves (the children, the dimension checks)


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


def random_unit(rng: np.random.Generator, dim: int = CHILD_DIM) -> np.ndarray:
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


# What a write puts in a scope: a typed memory (most often), a chat message (short-term
# tier), a working-memory entity, an episode, an agent message, a tool-call record.
KINDS = ["memory", "memory", "memory", "chat", "working", "episode", "message", "call"]


writes = st.lists(
    st.tuples(exact_scopes, st.sampled_from(KINDS), st.integers(0, len(CONTENTS) - 1)), min_size=1, max_size=20
)


def covers(reader: Scope, owner: tuple) -> bool:
    """Whether a read in ``reader`` may see a record written in the exact scope ``owner``."""
    return all(r is None or r == o for r, o in zip(reader.values(), owner))


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
        [sys.executable, "-c", script, backend.name, backend.location, str(CHILD_DIM), *args],
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


SECRET = "Pa55-word_that-must-not-leak"


# --- wrong embedding dimension ----------------------------------------------------------------
class FixedDimEmbedder:
    """A deterministic embedder of a given dimension."""

    def __init__(self, dim: int) -> None:
        self.dim = dim

    def embed(self, texts):
        return np.stack([random_unit(np.random.default_rng(abs(hash(t)) % 2**32), self.dim) for t in texts])


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


def test_failed_write_leaves_nothing_behind(store) -> None:
    store.add(Memory(content="a"), scope=U1, embedding=unit(1, 16))
    fresh = Scope(user_id="brand-new")
    with pytest.raises(StoreError):
        store.add(Memory(content="b"), scope=fresh, embedding=unit(1, 8))
    store.add(Memory(content="b"), scope=fresh, embedding=unit(2, 16))
    assert [m.content for m in store.search(unit(2, 16), scope=Scope.any(user_id="brand-new"))] == ["b"]


def test_a_scope_id_is_not_shared_before_its_row_is_committed(opener: StoreOpener) -> None:
    """The write that creates a scope builds its search matrix (the duplicate
    check) before COMMIT; the scope's id must not reach the cache other threads
    read until then (on PostgreSQL they would write to a row they cannot see)."""
    store = opener()
    seen: list[bool] = []
    real = store.memories._index.matrix

    def matrix(cur: Any, scope: Scope, sids: list[int]) -> Any:
        found = real(cur, scope, sids)
        seen.append(scope.values() in store.backend._scope_ids)
        return found

    store.memories._index.matrix = matrix
    store.add(Memory(content="the first memory of a new scope"), scope=SCOPE, embedding=unit_rows(1, seed=9)[0])
    assert seen == [False]


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
            store.add(Memory(content="first note"), scope=alice, embedding=random_unit(rng))
        other.add(Memory(content="bob's bank PIN is 4711"), scope=bob, embedding=random_unit(rng))
        store.add(Memory(content="alice likes jazz"), scope=alice, embedding=random_unit(rng))
        assert [m.content for m in other.memories.all(scope=bob)] == ["bob's bank PIN is 4711"]
        assert [m.content for m in store.search(random_unit(rng), scope=alice, k=5)] == ["alice likes jazz"]
        assert [m.content for m in other.memories.all(scope=alice)] == ["alice likes jazz"]


def test_failed_first_write_leaves_no_stale_dimension(backend: Backend) -> None:
    """The same for the embedding dimension a store records on its first write: a
    failed first write must not leave this process believing a dimension the
    database does not hold, or it later accepts rows of the wrong dimension."""
    scope = Scope(user_id="u")
    with backend.open() as store, backend.open() as other:
        failing_memory_insert(store)
        with pytest.raises(InjectedFailure):
            store.add(Memory(content="first"), scope=scope, embedding=np.ones(CHILD_DIM))
        other.add(Memory(content="sixteen"), scope=scope, embedding=np.ones(16))  # the store is 16-dim now
        with pytest.raises(StoreError):
            store.memories.add_many([Memory(content="thirty-two")], scope=scope, embeddings=np.ones((1, CHILD_DIM)))
        assert [m.content for m in other.search(np.ones(16), scope=scope.widen(), k=5)] == ["sixteen"]


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
        store.add(Memory(content="after the kills"), scope=scope, embedding=random_unit(np.random.default_rng()))
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


def test_wrong_embedding_dimension(backend: Backend) -> None:
    location, named = secret_location(backend)
    backend = Backend(backend.name, location)
    rng = np.random.default_rng(3)
    scope = Scope(user_id="u")
    with backend.open() as store:
        store.add(Memory(content="a 32-dimensional memory"), scope=scope, embedding=random_unit(rng, CHILD_DIM))
        attempts = {
            "add": lambda: store.add(Memory(content="a 16-dimensional memory"), scope=scope, embedding=random_unit(rng, 16)),
            "add_many": lambda: store.memories.add_many(
                [Memory(content="x one"), Memory(content="x two")], scope=scope, embeddings=rng.standard_normal((2, 48))
            ),
            "search": lambda: store.search(random_unit(rng, 16), scope=scope, k=3),
            "add in a new scope": lambda: store.add(
                Memory(content="elsewhere"), scope=Scope(user_id="v"), embedding=random_unit(rng, 16)
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
