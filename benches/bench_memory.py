"""Memory store at scale: 100,000 memories with 384-dim embeddings in
one scope (plus 20,000 in a neighbouring scope, so the scope filter has
something to skip).

- ``search`` top-10 in that scope, query given as a vector (the store's default
  embedder is 256-dim, so the 384-dim vectors are precomputed random unit rows
  passed with ``add_many(..., embeddings=)``). Target: under 20 ms on SQLite.
  Peer in the same run: numpy brute force over the same 100,000 x 384 float32
  matrix already in memory (matrix-vector product + argpartition), the floor any
  exact search over these vectors can reach. Also measured: the first search
  after opening the store (it decodes the scope's 100,000 embeddings once).
  And the ranking alone: the core's ``top_k_normalized`` over the same matrix,
  with the int8 sketch the store keeps (what a store search runs) and without
  (the float32 rows read directly).
- ``add_many`` sustained rate, batches of 1,000 into the filled store (one
  transaction each, SQLite WAL + synchronous=FULL). Target: at least 2,000
  memories/s. Peer: plain sqlite3 inserting the same rows (msgpack record and
  float32 blob, same unique index, same pragmas) with one executemany per batch.
- The same two on PostgreSQL (a server started for the run by tests/pg_server.py;
  skipped when none can be started).
- Writer latency: single ``add`` calls (merging on, so each one compares the
  memory with the whole scope) into a scope that already holds 20,000
  memories, by 1 process and by 4 processes at once (2,000 adds each, every
  add right after the others' writes, so each process's search data is always
  behind). Target: p99 under 250 ms with 4 writers. Each process loads the
  scope once before the clock starts; reported: p50, p99 and maximum per
  ``add``, and adds/s over all processes. SQLite, and PostgreSQL when a server
  can be started.

Run: python -m pytest benches/bench_memory.py --benchmark-enable -p no:cacheprovider -s
(-s shows the fill time and the memories/s lines; ``-k latency`` runs only the
writer-latency benchmark)."""

from __future__ import annotations

import itertools
import json
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import numpy as np
import pytest

from ctxfold import _core
from ctxfold.memory import Memory, Scope, SqliteStore

N, DIM, BATCH, FILL_BATCH = 100_000, 384, 1_000, 10_000
SCOPE = Scope(user_id="bench", conversation_id="c1")
NEIGHBOUR = Scope(user_id="bench", conversation_id="c2")
RNG = np.random.default_rng(0)


def unit_rows(n: int, rng: np.random.Generator = RNG) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


VECTORS = unit_rows(N)
QUERIES = unit_rows(64)
_counter = itertools.count()


def memories(n: int, prefix: str = "m") -> list[Memory]:
    return [
        Memory(category="fact", content=f"{prefix} {i}: fact number {i} about topic {i % 97}", tags=["bench"])
        for i in (next(_counter) for _ in range(n))
    ]


def fill(store, scope: Scope, vectors: np.ndarray, label: str) -> None:
    t0 = time.perf_counter()
    for s in range(0, len(vectors), FILL_BATCH):
        chunk = vectors[s : s + FILL_BATCH]
        store.memories.add_many(memories(len(chunk)), scope=scope, embeddings=chunk)
    dt = time.perf_counter() - t0
    print(f"\n{label}: filled {len(vectors):,} memories in {dt:.1f} s ({len(vectors) / dt:,.0f}/s, batches of {FILL_BATCH:,})")


def numpy_top10(matrix: np.ndarray, q: np.ndarray) -> np.ndarray:
    sims = matrix @ q
    part = np.argpartition(-sims, 10)[:10]
    return part[np.argsort(-sims[part])]


def check_same_as_numpy(store) -> None:
    q = QUERIES[0]
    hits = store.search(q, scope=SCOPE, k=10)
    expected = numpy_top10(VECTORS, q)
    np.testing.assert_allclose([h.score for h in hits], VECTORS[expected] @ q, atol=1e-5)


def search_round(store):
    queries = itertools.cycle(QUERIES)
    return lambda: store.search(next(queries), scope=SCOPE, k=10)


def add_round(store, benchmark, label: str) -> None:
    def setup():
        return (memories(BATCH, "added"),), {"scope": SCOPE, "embeddings": unit_rows(BATCH)}

    benchmark.pedantic(store.memories.add_many, setup=setup, rounds=15, warmup_rounds=1)
    rate = BATCH / benchmark.stats.stats.mean
    benchmark.extra_info["memories_per_s"] = round(rate)
    print(f"\n{label}: add_many {BATCH:,} per call: {rate:,.0f} memories/s")


# --- SQLite ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("memory-bench") / "bench.db"
    store = SqliteStore(path)
    fill(store, SCOPE, VECTORS, "SQLite")
    fill(store, NEIGHBOUR, unit_rows(20_000), "SQLite neighbour scope")
    check_same_as_numpy(store)
    yield store
    store.close()


@pytest.mark.benchmark(group="memory search top-10 of 100k x 384 (SQLite)")
def test_search_ctxfold_sqlite(benchmark, sqlite_store):
    benchmark(search_round(sqlite_store))


@pytest.mark.benchmark(group="memory search top-10 of 100k x 384 (SQLite)")
def test_search_numpy_bruteforce(benchmark):
    queries = itertools.cycle(QUERIES)
    benchmark(lambda: numpy_top10(VECTORS, next(queries)))


@pytest.mark.benchmark(group="memory search top-10 of 100k x 384 (SQLite)")
def test_rank_core_top_k_normalized_sketch(benchmark):
    queries = itertools.cycle(QUERIES)
    sketch = _core.quantize_rows(VECTORS)
    idx, _ = _core.top_k_normalized(QUERIES[0], VECTORS, 10, sketch=sketch)
    np.testing.assert_array_equal(idx, numpy_top10(VECTORS, QUERIES[0]))
    benchmark(lambda: _core.top_k_normalized(next(queries), VECTORS, 10, sketch=sketch))


@pytest.mark.benchmark(group="memory search top-10 of 100k x 384 (SQLite)")
def test_rank_core_top_k_normalized_float32(benchmark):
    queries = itertools.cycle(QUERIES)
    benchmark(lambda: _core.top_k_normalized(next(queries), VECTORS, 10))


@pytest.mark.benchmark(group="memory first search after open, 100k x 384 (SQLite)")
def test_search_cold_ctxfold_sqlite(benchmark, sqlite_store):
    path = sqlite_store.path

    def cold():
        with SqliteStore(path) as store:
            return store.search(QUERIES[1], scope=SCOPE, k=10)

    benchmark.pedantic(cold, rounds=3, warmup_rounds=0)


@pytest.mark.benchmark(group="memory add_many 1,000 x 384 (SQLite)")
def test_add_many_ctxfold_sqlite(benchmark, sqlite_store):
    add_round(sqlite_store, benchmark, "SQLite")


@pytest.mark.benchmark(group="memory add_many 1,000 x 384 (SQLite)")
def test_add_many_plain_sqlite3(benchmark, tmp_path):
    """The floor: the same rows through sqlite3 directly, same pragmas, one transaction."""
    conn = sqlite3.connect(tmp_path / "plain.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute(
        "CREATE TABLE memories (rid INTEGER PRIMARY KEY, scope_id INTEGER NOT NULL, id TEXT NOT NULL, "
        "category TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL, record BLOB NOT NULL, "
        "embedding BLOB NOT NULL, UNIQUE (scope_id, id))"
    )
    encode = msgspec.msgpack.Encoder().encode

    def insert(batch, vectors):
        now = time.time()
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(
            "INSERT INTO memories (scope_id, id, category, created_at, expires_at, record, embedding) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(1, m.content, m.category, now, None, encode(m), v.tobytes()) for m, v in zip(batch, vectors)],
        )
        conn.execute("COMMIT")

    benchmark.pedantic(
        insert, setup=lambda: ((memories(BATCH, "plain"), unit_rows(BATCH)), {}), rounds=15, warmup_rounds=1
    )
    print(f"\nplain sqlite3: {BATCH / benchmark.stats.stats.mean:,.0f} rows/s")
    conn.close()


# --- PostgreSQL ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_server():
    pytest.importorskip("psycopg")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    try:
        from pg_server import PgServer, PgServerError
    finally:
        sys.path.pop(0)
    server = PgServer()
    try:
        server.start()
    except (PgServerError, OSError) as e:
        pytest.skip(f"no PostgreSQL server for the benchmark: {e}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def pg_store(pg_server):
    from ctxfold.memory import PostgresStore

    store = PostgresStore(pg_server.create_database("bench"))
    fill(store, SCOPE, VECTORS, "PostgreSQL")
    check_same_as_numpy(store)
    yield store
    store.close()


@pytest.mark.benchmark(group="memory search top-10 of 100k x 384 (PostgreSQL)")
def test_search_ctxfold_postgres(benchmark, pg_store):
    benchmark(search_round(pg_store))


@pytest.mark.benchmark(group="memory add_many 1,000 x 384 (PostgreSQL)")
def test_add_many_ctxfold_postgres(benchmark, pg_store):
    add_round(pg_store, benchmark, "PostgreSQL")


# --- writer latency: 1 and 4 processes adding into a 20,000-memory scope -------------------------------

LATENCY_FILL, LATENCY_ADDS, LATENCY_WRITERS = 20_000, 2_000, 4
P99_GOAL_S = 0.250

# One writer process: opens the store, loads the scope (one search), says
# "ready", waits for "go" on stdin, then times each add and prints the list.
_WRITER = r"""
import json, sys, time
import numpy as np
from ctxfold.memory import Memory, PostgresStore, Scope, SqliteStore

kind, location, worker, n, dim = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
store = SqliteStore(location) if kind == "sqlite" else PostgresStore(location)
scope = Scope(user_id="bench", conversation_id="c1")
v = np.random.default_rng(1000 + worker).standard_normal((n + 1, dim)).astype(np.float32)
v /= np.linalg.norm(v, axis=1, keepdims=True)
store.search(v[n], scope=scope, k=1)
print("ready", flush=True)
sys.stdin.readline()
latencies = []
for i in range(n):
    t0 = time.perf_counter()
    store.add(Memory(content=f"writer {worker} memory {i}"), scope=scope, embedding=v[i])
    latencies.append(time.perf_counter() - t0)
store.close()
print(json.dumps(latencies), flush=True)
"""


def writer_latencies(kind: str, location: str, writers: int, adds: int) -> tuple[np.ndarray, float]:
    """Per-add seconds of ``writers`` processes adding ``adds`` memories each at
    once, and the wall time from "go" to the last add."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, kind, location, str(w), str(adds), str(DIM)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8",
        )
        for w in range(writers)
    ]
    try:
        for p in procs:
            line = p.stdout.readline().strip()  # type: ignore[union-attr]
            assert line == "ready", f"writer did not start: {line!r}"
        t0 = time.perf_counter()
        for p in procs:
            p.stdin.write("go\n")  # type: ignore[union-attr]
            p.stdin.flush()  # type: ignore[union-attr]
        latencies: list[float] = []
        for p in procs:
            out, _ = p.communicate(timeout=3600)
            assert p.returncode == 0, f"writer failed with exit code {p.returncode}"
            latencies += json.loads(out.strip().splitlines()[-1])
        return np.asarray(latencies), time.perf_counter() - t0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def latency_report(label: str, latencies: np.ndarray, wall: float) -> dict[str, float]:
    ms = latencies * 1000
    figures = {
        "p50_ms": round(float(np.percentile(ms, 50)), 1),
        "p99_ms": round(float(np.percentile(ms, 99)), 1),
        "max_ms": round(float(ms.max()), 1),
        "adds_per_s": round(len(ms) / wall),
    }
    print(f"\n{label}: {len(ms):,} adds, p50 {figures['p50_ms']} ms, p99 {figures['p99_ms']} ms, "
          f"max {figures['max_ms']} ms, {figures['adds_per_s']:,} adds/s")
    return figures


def run_latency(kind: str, locations: dict[int, str], label: str) -> None:
    results = {}
    for writers, location in locations.items():
        latencies, wall = writer_latencies(kind, location, writers, LATENCY_ADDS)
        results[writers] = latency_report(
            f"{label}, {writers} writer process{'es' if writers > 1 else ''} x {LATENCY_ADDS:,} adds into "
            f"{LATENCY_FILL:,} memories", latencies, wall,
        )
    p99 = results[LATENCY_WRITERS]["p99_ms"]
    assert p99 < P99_GOAL_S * 1000, f"{label}: p99 add with {LATENCY_WRITERS} writers is {p99} ms (goal < 250 ms)"


@pytest.mark.benchmark(group="memory writer latency (SQLite)")
def test_writer_latency_sqlite(tmp_path):
    base = tmp_path / "base.db"
    with SqliteStore(base) as store:
        fill(store, SCOPE, unit_rows(LATENCY_FILL, np.random.default_rng(7)), "SQLite writer-latency scope")
    locations = {}
    for writers in (1, LATENCY_WRITERS):
        locations[writers] = str(tmp_path / f"writers{writers}.db")
        shutil.copyfile(base, locations[writers])  # the same 20,000 memories for each run
    run_latency("sqlite", locations, "SQLite")


@pytest.mark.benchmark(group="memory writer latency (PostgreSQL)")
def test_writer_latency_postgres(pg_server):
    import psycopg

    from ctxfold.memory import PostgresStore

    with PostgresStore(pg_server.create_database("latency_base")) as store:
        fill(store, SCOPE, unit_rows(LATENCY_FILL, np.random.default_rng(7)), "PostgreSQL writer-latency scope")
    locations = {}
    with psycopg.connect(pg_server.dsn("postgres"), autocommit=True) as conn:
        for writers in (1, LATENCY_WRITERS):
            name = f"latency_{writers}"
            conn.execute(f"CREATE DATABASE {name} TEMPLATE latency_base")  # the same 20,000 memories
            locations[writers] = pg_server.dsn(name)
    run_latency("postgres", locations, "PostgreSQL")
