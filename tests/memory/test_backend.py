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
from typing import Any

import numpy as np
import pytest
from ctxfold.errors import StoreError
from ctxfold.memory import Memory, Scope
from memory_stores import Backend, StoreOpener, U1, assert_names_fix, full_error, unit


CHILD_DIM = 32  # embeddings the tests pass themselves (the children, the dimension checks)


def random_unit(rng: np.random.Generator, dim: int = CHILD_DIM) -> np.ndarray:
    v = rng.standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


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
    store.add(Memory(content="the first memory of a new scope"), scope=U1, embedding=unit(9, dim=64))
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
