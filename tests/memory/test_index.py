"""The search index: thread- and crash-safe search caches, on SQLite and PostgreSQL.

- A store's search sees what other stores wrote.
- One store shared by adding and searching threads: no call raises, and
  afterwards every memory whose add returned is found by its own vector,
  through that store and through a new one.
- A write that fails before COMMIT leaves the cached search matrix as it was.
- Two stores taking turns at every kind of write always search exactly like a
  brute-force scan of the scope's rows read from the database.
- `presearch` scores equal a full product."""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from typing import Any

import numpy as np
import pytest
from ctxfold.memory import Memory, Scope
from memory_stores import U1, StoreOpener


DIM = 64  # random unit vectors this wide are far apart: no add merges into or supersedes another


SCOPE = Scope(user_id="u1", conversation_id="c1")


def unit_rows(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def top_id(store: Any, vector: np.ndarray, scope: Scope = SCOPE) -> str | None:
    hits = store.search(vector, scope=scope, k=1)
    return hits[0].id if hits else None


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
