"""cosine_similarity on 2,000 x 384 float32 (MiniLM-sized rows) against
scikit-learn's cosine_similarity and numpy's normalise-then-matmul (the BLAS
limit), same run. Targets: no slower than scikit-learn, within 1.5x
of numpy. BM25 scoring against a pure-Python transcription.

Top-k search on 100,000 x 384 float32 unit rows, k = 10, one query and 64
queries: ``top_k`` (which does not know the rows are unit length and takes
their norms in the same pass), ``top_k_normalized`` (with and without its
int8 sketch) against numpy (``X @ q`` or ``Q @ X.T`` then ``argpartition``:
the cosine only because the rows are unit) and FAISS ``IndexFlatIP``, each
peer at the fastest of the settings tried on a 2-core machine: FAISS with its
bundled OpenBLAS on one thread (otherwise it competes with FAISS's OpenMP
threads for the cores) and, for many queries, its BLAS path
(``distance_compute_blas_threshold = 20``; its default sends 64 queries down
the one-query-at-a-time path). Each contender starts after a second of idle
cores, so none is timed while the previous one's BLAS threads still spin.
Each result must have numpy's ids (rows whose
scores tie to float32 rounding may swap). The BLAS libraries loaded are
printed first. Run without the environment's OpenBLAS tuning variables, e.g.
``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python -m pytest
benches/bench_similarity.py --benchmark-enable -k top_k``."""

from __future__ import annotations

import contextlib
import importlib.util
import time

import numpy as np
import pytest

import ctxfold

X = np.random.default_rng(0).normal(size=(2000, 384)).astype(np.float32)


def numpy_cosine(x):
    n = x / np.linalg.norm(x, axis=1, keepdims=True)
    return n @ n.T


@pytest.mark.benchmark(group="cosine 2000x384 float32")
def test_cosine_ctxfold(benchmark):
    out = benchmark(ctxfold.cosine_similarity, X)
    np.testing.assert_allclose(out[:5], numpy_cosine(X)[:5], atol=1e-5)


@pytest.mark.benchmark(group="cosine 2000x384 float32")
def test_cosine_sklearn(benchmark):
    sklearn_pairwise = pytest.importorskip("sklearn.metrics.pairwise")
    benchmark(sklearn_pairwise.cosine_similarity, X)


@pytest.mark.benchmark(group="cosine 2000x384 float32")
def test_cosine_numpy(benchmark):
    benchmark(numpy_cosine, X)


# --- top-k search ---------------------------------------------------------------------------

N_ROWS, DIM, K = 100_000, 384, 10
SETTLE_SECONDS = 1.0


class Search:
    """The rows, the queries, the sketch, numpy's answers and the FAISS index, built once."""

    def __init__(self) -> None:
        rng = np.random.default_rng(1)
        x = rng.standard_normal((N_ROWS, DIM), dtype=np.float32)
        self.x = x / np.linalg.norm(x, axis=1, keepdims=True)
        q = rng.standard_normal((64, DIM), dtype=np.float32)
        self.queries = {1: q[0] / np.linalg.norm(q[0]), 64: q / np.linalg.norm(q, axis=1, keepdims=True)}
        self.sketch = ctxfold.quantize_rows(self.x)
        self.expected = {m: numpy_top_k(q, self.x, K) for m, q in self.queries.items()}
        self.index = None

    def faiss_index(self):
        faiss = pytest.importorskip("faiss")
        if self.index is None:
            self.index = faiss.IndexFlatIP(DIM)
            self.index.add(self.x)
        return self.index


def numpy_top_k(q, x, k):
    """``X @ q`` (or ``Q @ X.T``), ``argpartition`` for the k largest, then
    those k sorted best first, ties to the lower index."""
    scores = x @ q if q.ndim == 1 else q @ x.T
    part = np.argpartition(scores, -k, axis=-1)[..., -k:]
    top = np.take_along_axis(scores, part, axis=-1)
    order = np.lexsort((part, -top), axis=-1)
    return np.take_along_axis(part, order, axis=-1), np.take_along_axis(top, order, axis=-1)


def faiss_top_k(index, q, k):
    scores, ids = index.search(q.reshape(-1, DIM), k)
    return ids, scores


@contextlib.contextmanager
def faiss_fastest(queries: int):
    """FAISS's settings for its fastest run here (see the module notes)."""
    faiss = pytest.importorskip("faiss")
    threadpoolctl = pytest.importorskip("threadpoolctl")
    saved = faiss.cvar.distance_compute_blas_threshold
    if queries >= 20:
        faiss.cvar.distance_compute_blas_threshold = 20
    try:
        with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
            yield
    finally:
        faiss.cvar.distance_compute_blas_threshold = saved


@pytest.fixture(scope="module")
def search(request) -> Search:
    """The data, after printing which BLAS kernels numpy (and FAISS) run."""
    data = Search()
    if importlib.util.find_spec("faiss"):
        data.faiss_index()
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        threadpool_info = list
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        for pool in threadpool_info():
            print(
                f"\nthreadpool: {pool.get('internal_api')} {pool.get('version')} "
                f"{pool.get('architecture')} threads={pool.get('num_threads')} ({pool.get('prefix')})"
            )
    return data


def assert_numpy_ids(data: Search, queries: int, ids) -> None:
    """numpy's ids, except where two rows' scores tie to float32 rounding
    (then either order is right): compared position by position in f64."""
    want = data.expected[queries][0].reshape(-1, K)
    got = np.asarray(ids).reshape(-1, K)
    q = data.queries[queries].reshape(-1, DIM).astype(np.float64)
    for g, w, query in zip(got, want, q):
        if not np.array_equal(g, w):
            x = data.x.astype(np.float64)
            np.testing.assert_allclose(x[g] @ query, x[w] @ query, atol=1e-6)


def run_search(benchmark, data: Search, queries: int, name: str, call) -> None:
    benchmark.group = f"top_k {N_ROWS}x{DIM} float32, {queries} quer{'y' if queries == 1 else 'ies'}, k={K}"
    benchmark.extra_info["method"] = name
    # BLAS worker threads keep spinning on the cores for a while after their last call (OpenBLAS about 0.1 s):
    # every contender starts on idle cores, whichever ran before it.
    time.sleep(SETTLE_SECONDS)
    ids, _ = benchmark.pedantic(call, args=(data.queries[queries],), rounds=20, warmup_rounds=2)
    assert_numpy_ids(data, queries, ids)


@pytest.mark.parametrize("queries", [1, 64])
def test_top_k_ctxfold(benchmark, search, queries):
    run_search(benchmark, search, queries, "top_k", lambda q: ctxfold.top_k(q, search.x, K))


@pytest.mark.parametrize("queries", [1, 64])
def test_top_k_normalized_ctxfold(benchmark, search, queries):
    run_search(benchmark, search, queries, "top_k_normalized", lambda q: ctxfold.top_k_normalized(q, search.x, K))


@pytest.mark.parametrize("queries", [1, 64])
def test_top_k_normalized_sketch_ctxfold(benchmark, search, queries):
    run_search(
        benchmark,
        search,
        queries,
        "top_k_normalized(sketch=quantize_rows(X))",
        lambda q: ctxfold.top_k_normalized(q, search.x, K, sketch=search.sketch),
    )


@pytest.mark.parametrize("queries", [1, 64])
def test_top_k_numpy(benchmark, search, queries):
    run_search(benchmark, search, queries, "numpy matmul + argpartition", lambda q: numpy_top_k(q, search.x, K))


@pytest.mark.parametrize("queries", [1, 64])
def test_top_k_faiss(benchmark, search, queries):
    index = search.faiss_index()
    with faiss_fastest(queries):
        run_search(benchmark, search, queries, "faiss IndexFlatIP", lambda q: faiss_top_k(index, q, K))
