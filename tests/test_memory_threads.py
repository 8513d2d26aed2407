"""Thread- and crash-safe search caches, on SQLite and PostgreSQL.

- One store shared by 4 adding threads (500 adds each) and 2 searching
  threads: no call raises, and afterwards every memory whose add returned is
  found by its own vector, through that store and through a new one.
- A write that fails before COMMIT leaves the cached search matrix as it was:
  a memory another store writes next is found (the cache used to be advanced
  inside the transaction and kept after the rollback, so the next write by
  someone else made it look current).
- Two stores taking turns at every kind of write (add, add_many, delete,
  archive, supersede, clear) always search exactly like a brute-force scan of
  the scope's rows read from the database.
- `ScopeMatrix` never changes once made: appending gives a new matrix, and a
  matrix appended to twice keeps both results apart.
- A scope's id is not handed to other threads before the write that created
  its row has committed; the duplicate check's scores taken before the write
  lock (`_presearch`) and completed under it equal the full product.
- The SQLite writers' turnstile (`ctxfold.memory.gate`) excludes other
  processes and threads, is taken as soon as it is released, and never makes
  a writer wait past its timeout.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctxfold.memory import Memory, Scope
from ctxfold.memory.matrix import MatrixCache, ScopeMatrix
from memory_stores import StoreOpener, opener  # noqa: F401  (fixture)

DIM = 64  # random unit vectors this wide are far apart: no add merges into or supersedes another
SCOPE = Scope(user_id="u1", conversation_id="c1")


def unit_rows(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def top_id(store: Any, vector: np.ndarray, scope: Scope = SCOPE) -> str | None:
    hits = store.search(vector, scope=scope, k=1)
    return hits[0].id if hits else None


# --- threads --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_threads_share_one_store(opener: StoreOpener) -> None:
    writers, per_writer, searchers = 4, 500, 2
    store = opener()
    vectors = unit_rows(writers * per_writer, seed=1)
    acknowledged: dict[str, int] = {}
    errors: list[BaseException] = []
    searches = [0] * searchers
    done = threading.Event()
    start = threading.Barrier(writers + searchers)

    def write(w: int) -> None:
        try:
            start.wait()
            for i in range(per_writer):
                j = w * per_writer + i
                # add and add_many (the path that appended to the cached matrix in place) in turn
                if i % 2:
                    mid = store.add(Memory(content=f"writer {w} memory {i}"), scope=SCOPE, embedding=vectors[j])
                else:
                    mid = store.memories.add_many([Memory(content=f"writer {w} memory {i}")], scope=SCOPE,
                                         embeddings=vectors[j : j + 1], merge=True)[0]
                acknowledged[str(mid)] = j
        except BaseException as e:  # noqa: BLE001 - collected and reported by the test
            errors.append(e)

    def search(s: int) -> None:
        rng = np.random.default_rng(100 + s)
        try:
            start.wait()
            while not done.is_set():
                q = vectors[int(rng.integers(len(vectors)))]
                hits = store.search(q, scope=SCOPE, k=5)
                assert all(h.score <= 1.0001 for h in hits)
                store.search(q, scope=Scope.any(user_id="u1"), k=3)
                searches[s] += 1
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    readers = [threading.Thread(target=search, args=(s,)) for s in range(searchers)]
    for t in threads + readers:
        t.start()
    for t in threads:
        t.join(timeout=600)
    done.set()
    for t in readers:
        t.join(timeout=60)
    assert not errors, f"{len(errors)} calls failed, first:\n" + "".join(traceback.format_exception(errors[0]))
    assert len(acknowledged) == writers * per_writer
    assert min(searches) > 0
    assert store.memories.count(scope=SCOPE) == writers * per_writer
    fresh = opener()
    for reader in (store, fresh):
        missing = [mid for mid, j in acknowledged.items() if top_id(reader, vectors[j]) != mid]
        assert not missing, f"{len(missing)} acknowledged memories not found, e.g. {missing[:3]}"


# --- a failed write ------------------------------------------------------------------------------------------


@contextlib.contextmanager
def failing_before_commit(store: Any):
    """Every write transaction of ``store`` raises after its body, before COMMIT."""
    real = store.backend.transaction

    @contextlib.contextmanager
    def transaction(write: bool):
        with real(write) as cur:
            yield cur
            if write:
                raise RuntimeError("injected failure before COMMIT")

    store.backend.transaction = transaction
    try:
        yield
    finally:
        del store.backend.transaction


@pytest.mark.parametrize("call", ["add", "add_many"])
def test_search_is_not_stale_after_a_failed_write(opener: StoreOpener, call: str) -> None:
    first, second = opener(), opener()
    v = unit_rows(4, seed=2)
    kept = first.add(Memory(content="kept"), scope=SCOPE, embedding=v[0])
    assert top_id(first, v[0]) == kept  # the matrix is cached now
    with failing_before_commit(first), pytest.raises(RuntimeError, match="injected"):
        if call == "add":
            first.add(Memory(content="rolled back"), scope=SCOPE, embedding=v[1])
        else:
            first.memories.add_many([Memory(content="rolled back")], scope=SCOPE, embeddings=v[1:2])
    assert first.memories.count(scope=SCOPE) == 1  # (no search here: it would rebuild the matrix and hide a stale one)
    other = second.add(Memory(content="written by another store"), scope=SCOPE, embedding=v[2])
    assert first.memories.count(scope=SCOPE) == 2
    assert top_id(first, v[2]) == other, "a memory written by another store is counted but not found"
    assert [m.content for m in first.search(v[1], scope=SCOPE, k=5)] != [] and all(
        m.content != "rolled back" for m in first.search(v[1], scope=SCOPE, k=5)
    )
    # and the store goes on working: its own next write is found too
    mine = first.add(Memory(content="after"), scope=SCOPE, embedding=v[3])
    assert top_id(first, v[3]) == mine and top_id(second, v[3]) == mine


# --- two stores, every kind of write ---------------------------------------------------------------------------


def brute_force(store: Any, q: np.ndarray, k: int, scope: Scope) -> list[str]:
    """The top k of the scope's active rows, read from the database by the test itself."""
    with store.backend.read() as cur:
        where, params = store.backend.scope_filter(cur, scope)
        rows = store.backend.execute(
            cur, f"SELECT id, embedding FROM memories WHERE {where} AND (expires_at IS NULL OR expires_at > ?)",
            (*params, time.time()),
        ).fetchall()
    if not rows:
        return []
    matrix = np.stack([np.frombuffer(bytes(r[1]), dtype=np.float32) for r in rows])
    scores = matrix @ q
    order = sorted(range(len(rows)), key=lambda i: (-round(float(scores[i]), 5), rows[i][0]))[:k]
    return sorted(rows[i][0] for i in order)


def test_two_stores_taking_turns_search_like_a_scan(opener: StoreOpener) -> None:
    stores = [opener(), opener()]
    rng = np.random.default_rng(3)
    pool = unit_rows(400, seed=4)
    queries = unit_rows(6, seed=5)
    wide = Scope.any(user_id="u1")
    other_scope = Scope(user_id="u1", conversation_id="c2")
    used = 0
    for step in range(80):
        store = stores[int(rng.integers(2))]
        scope = SCOPE if rng.random() < 0.8 else other_scope
        op = rng.choice(["add", "add", "add_many", "delete", "archive", "supersede", "clear"],
                        p=[0.3, 0.2, 0.2, 0.1, 0.1, 0.08, 0.02])
        current = store.memories.all(scope=scope)
        if op in ("add", "add_many") or not current:
            n = 1 if op == "add" else int(rng.integers(1, 6))
            batch = [Memory(content=f"step {step} memory {i}") for i in range(n)]
            store.memories.add_many(batch, scope=scope, embeddings=pool[used : used + n], merge=op == "add")
            used += n
        elif op == "delete":
            assert store.memories.delete(current[int(rng.integers(len(current)))].id, scope=scope)
        elif op == "archive":
            assert store.archive.move(current[int(rng.integers(len(current)))].id, scope=scope)
        elif op == "supersede":
            store.memories.supersede(current[int(rng.integers(len(current)))].id, Memory(content=f"step {step} update"),
                            scope=scope, embedding=pool[used])
            used += 1
        else:
            store.clear(scope)
        for reader in stores:
            for s in (SCOPE, other_scope, wide):
                for q in queries:
                    got = sorted(m.id for m in reader.search(q, scope=s, k=3))
                    assert got == brute_force(reader, q, 3, s), f"step {step} ({op}): search differs from a scan"


# --- the matrix itself -----------------------------------------------------------------------------------------


def test_scope_matrix_never_changes_once_made() -> None:
    v = unit_rows(40, seed=6)

    def rows(a: int, b: int) -> tuple[Any, ...]:
        return ([1] * (b - a), [f"m{i}" for i in range(a, b)], [0] * (b - a), [np.inf] * (b - a), v[a:b])

    empty = ScopeMatrix(DIM)
    base = empty.appended(*rows(0, 10))
    assert empty.n == 0 and base.n == 10
    left = base.appended(*rows(10, 20))
    right = base.appended(*rows(20, 25))  # base is no longer the newest: copied
    assert (base.n, left.n, right.n) == (10, 20, 15)
    assert list(base.ids) == [f"m{i}" for i in range(10)]
    assert list(left.ids) == [f"m{i}" for i in range(20)]
    assert list(right.ids) == [f"m{i}" for i in range(10)] + [f"m{i}" for i in range(20, 25)]
    np.testing.assert_array_equal(left.vectors, v[:20])
    np.testing.assert_array_equal(right.vectors, np.concatenate([v[:10], v[20:25]]))
    grown = left
    for a in range(20, 40, 5):  # past the capacity: new buffers, the old matrices keep theirs
        grown = grown.appended(*rows(a, a + 5))
    np.testing.assert_array_equal(grown.vectors, v)
    np.testing.assert_array_equal(left.vectors, v[:20])
    assert len(grown.ids) == 40 and grown.ids[-1] == "m39" and grown.sketch[0].shape == (40, DIM)
    with pytest.raises(IndexError):
        left.ids[20]


def test_matrix_cache_never_goes_back_a_generation() -> None:
    cache = MatrixCache(1 << 30)
    old, new = ScopeMatrix(4), ScopeMatrix(4)
    assert cache.put("k", 5, new) is new
    assert cache.put("k", 4, old) is new and cache.get("k", 4) is None and cache.get("k", 5) is new
    cache.advance("k", 4, 5, lambda m: old)  # not at generation 4: left alone
    assert cache.get("k", 5) is new
    cache.advance("k", 5, 6, lambda m: old)
    assert cache.get("k", 6) is old


# --- the SQLite writers' turnstile -----------------------------------------------------------------------------

_HOLDER = r"""
import sys
from pathlib import Path
from ctxfold.memory.gate import writer_gate

with writer_gate(Path(sys.argv[1])).held(10):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_writer_gate_orders_processes_and_never_blocks_past_the_timeout(tmp_path: Path) -> None:
    import subprocess
    import sys

    from ctxfold.memory.gate import writer_gate

    database = tmp_path / "memory.db"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(database)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, encoding="utf-8")
    try:
        assert holder.stdout.readline().strip() == "held"  # type: ignore[union-attr]
        assert (tmp_path / "memory.db-writer").exists()
        gate = writer_gate(database)
        t0 = time.monotonic()
        with gate.held(0.3):  # held by the other process: waits the timeout, then goes on without it
            waited = time.monotonic() - t0
        assert waited >= 0.25
        released = threading.Timer(0.3, lambda: holder.communicate("\n", timeout=30))
        released.start()
        t0 = time.monotonic()
        with gate.held(30):  # taken as soon as the other process lets go
            waited = time.monotonic() - t0
        released.join()
        assert 0.2 <= waited < 5
    finally:
        if holder.poll() is None:
            holder.kill()


def test_writer_gate_threads_take_turns_and_a_missing_directory_is_no_gate(tmp_path: Path) -> None:
    from ctxfold.memory.gate import writer_gate

    gate = writer_gate(tmp_path / "memory.db")
    inside, overlaps = [0], []

    def work() -> None:
        for _ in range(50):
            with gate.held(30):
                inside[0] += 1
                overlaps.append(inside[0])
                with gate.held(30):  # the same thread again: no deadlock
                    time.sleep(0.0005)
                inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert max(overlaps) == 1 and len(overlaps) == 150
    t0 = time.monotonic()
    with writer_gate(tmp_path / "missing" / "memory.db").held(30):
        pass
    assert time.monotonic() - t0 < 1


def test_presearch_scores_equal_a_full_product(opener: StoreOpener) -> None:
    """The duplicate check's scores taken before the write lock, completed
    under it for the rows other writers added in between, are the full product."""
    first, second = opener(), opener()
    v = unit_rows(60, seed=8)
    first.memories.add_many([Memory(content=f"m{i}") for i in range(40)], scope=SCOPE, embeddings=v[:40])
    batch = v[50:53]
    first.memories._index.presearch(SCOPE, batch)
    if opener.backend == "postgres":  # the check runs before the scope's row is locked: nothing to move
        assert first.memories._index.presearched() is None
        return
    second.memories.add_many([Memory(content=f"n{i}") for i in range(5)], scope=SCOPE, embeddings=v[40:45])
    with first.backend.write() as cur:
        matrix = first.memories._index.matrix(cur, SCOPE, [first.backend.scope_id(cur, SCOPE, create=False)])
        assert matrix.n == 45
        assert first.memories._index.presearched()[0].prefix_of(matrix)  # caught up by appending, not rebuilt
        for i in range(len(batch)):
            np.testing.assert_allclose(first.memories._index.similarities(matrix, batch, i), matrix.vectors @ batch[i], atol=1e-6)
    assert first.memories._index.presearched() is None  # dropped with the write
    # Rows removed in between: the matrix is rebuilt and scored in full.
    first.memories._index.presearch(SCOPE, batch)
    second.memories.delete(second.memories.all(scope=SCOPE)[0].id, scope=SCOPE)
    with first.backend.write() as cur:
        matrix = first.memories._index.matrix(cur, SCOPE, [first.backend.scope_id(cur, SCOPE, create=False)])
        assert matrix.n == 44 and not first.memories._index.presearched()[0].prefix_of(matrix)
        np.testing.assert_allclose(first.memories._index.similarities(matrix, batch, 0), matrix.vectors @ batch[0], atol=1e-6)


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
