"""Memory store at scale (issue 6): 100,000 memories with 384-dim embeddings in
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

Run: python -m pytest benches/bench_memory.py --benchmark-enable -p no:cacheprovider -s
(-s shows the fill time and the memories/s lines)."""

from __future__ import annotations

import itertools
import sqlite3
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
        store.add_many(memories(len(chunk)), scope=scope, embeddings=chunk)
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

    benchmark.pedantic(store.add_many, setup=setup, rounds=15, warmup_rounds=1)
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
def pg_store():
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
        from ctxfold.memory import PostgresStore

        store = PostgresStore(server.create_database("bench"))
        fill(store, SCOPE, VECTORS, "PostgreSQL")
        check_same_as_numpy(store)
        yield store
        store.close()
    finally:
        server.stop()


@pytest.mark.benchmark(group="memory search top-10 of 100k x 384 (PostgreSQL)")
def test_search_ctxfold_postgres(benchmark, pg_store):
    benchmark(search_round(pg_store))


@pytest.mark.benchmark(group="memory add_many 1,000 x 384 (PostgreSQL)")
def test_add_many_ctxfold_postgres(benchmark, pg_store):
    add_round(pg_store, benchmark, "PostgreSQL")
