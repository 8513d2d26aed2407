"""cosine_similarity against numpy and scikit-learn, top_k against a sort,
BM25 against a direct Python transcription, and the error paths."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ctxfold import Bm25, InvalidInputError, InvalidTypeError, _core, cosine_similarity, top_k


def numpy_cosine(x, y=None):
    y = x if y is None else y
    nx = np.linalg.norm(x.astype(np.float64), axis=1, keepdims=True)
    ny = np.linalg.norm(y.astype(np.float64), axis=1, keepdims=True)
    xs = np.divide(x, nx, out=np.zeros_like(x, dtype=np.float64), where=nx > 0)
    ys = np.divide(y, ny, out=np.zeros_like(y, dtype=np.float64), where=ny > 0)
    return np.clip(xs @ ys.T, -1, 1)


finite = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=32)


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 30), st.integers(0, 30), st.integers(1, 40), st.sampled_from([np.float32, np.float64]), st.data())
def test_cosine_matches_numpy(n, m, d, dtype, data) -> None:
    x = data.draw(hnp.arrays(dtype, (n, d), elements=finite))
    y = data.draw(hnp.arrays(dtype, (m, d), elements=finite))
    got = cosine_similarity(x, y)
    assert got.dtype == dtype and got.shape == (n, m)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(got, numpy_cosine(x, y), atol=tol)
    np.testing.assert_allclose(cosine_similarity(x), numpy_cosine(x), atol=tol)


def test_cosine_matches_scikit_learn() -> None:
    sklearn = pytest.importorskip("sklearn.metrics.pairwise")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 64)).astype(np.float32)
    np.testing.assert_allclose(cosine_similarity(x), sklearn.cosine_similarity(x), atol=1e-5)


def test_zero_rows_give_zero_never_nan() -> None:
    x = np.array([[0.0, 0.0], [1.0, 0.0]])
    got = cosine_similarity(x)
    assert not np.isnan(got).any()
    np.testing.assert_array_equal(got, [[0.0, 0.0], [0.0, 1.0]])


def test_lists_and_strided_views() -> None:
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    np.testing.assert_allclose(cosine_similarity(x[:, ::2]), numpy_cosine(x[:, ::2]))
    np.testing.assert_allclose(cosine_similarity(x.tolist()), numpy_cosine(x))
    np.testing.assert_allclose(cosine_similarity(np.asfortranarray(x)), numpy_cosine(x))


@pytest.mark.parametrize(
    ("call", "error", "word"),
    [
        (lambda: cosine_similarity(np.array([[1.0, np.nan]])), InvalidInputError, "X"),
        (lambda: cosine_similarity(np.ones((2, 2)), np.array([[np.inf, 1.0]])), InvalidInputError, "Y"),
        (lambda: cosine_similarity(np.ones((2, 2)), np.ones((2, 3))), InvalidInputError, "Y"),
        (lambda: cosine_similarity(np.ones((2, 2), np.float32), np.ones((2, 2))), InvalidInputError, "dtype"),
        (lambda: cosine_similarity(np.ones((2, 2), np.int64)), InvalidInputError, "float32"),
        (lambda: cosine_similarity(np.ones(3)), InvalidInputError, "2-D"),
        (lambda: cosine_similarity(np.ones((2, 0))), InvalidInputError, "X"),
        (lambda: cosine_similarity("abc"), InvalidTypeError, "X"),
        (lambda: top_k(np.ones(3), np.ones((4, 2)), 2), InvalidInputError, "query"),
        (lambda: top_k(np.ones(2), np.ones((4, 2)), -1), InvalidInputError, "k"),
        (lambda: top_k(np.ones(2), np.ones((4, 2)), 1.5), InvalidTypeError, "k"),
        (lambda: top_k(np.array([1.0, np.nan]), np.ones((4, 2)), 1), InvalidInputError, "query[0, 1]"),
        (lambda: top_k(np.ones(2), np.array([[1.0, 2.0], [np.inf, 0.0]]), 1), InvalidInputError, "X[1, 0]"),
        (lambda: top_k(np.zeros((3, 2)), np.array([[1.0, 2.0], [np.nan, 0.0]]), 1), InvalidInputError, "X[1, 0]"),
        (lambda: top_k(np.ones(2, np.float32), np.ones((4, 2)), 1), InvalidInputError, "query: dtype"),
        (lambda: top_k(np.ones(2), np.ones((4, 2), np.int64), 1), InvalidInputError, "X: dtype int64"),
        (lambda: top_k(np.ones(2), np.ones((4, 2, 1)), 1), InvalidInputError, "X: expected a 2-D array"),
        (lambda: top_k(np.ones(0), np.ones((4, 0)), 1), InvalidInputError, "X: has 0 columns"),
        (lambda: top_k(np.ones(2), "rows", 1), InvalidTypeError, "X"),
        (lambda: top_k(object(), np.ones((4, 2)), 1), InvalidTypeError, "query"),
        (lambda: Bm25("one text"), InvalidTypeError, "texts"),
        (lambda: Bm25(["a", 3]), InvalidTypeError, "texts[1]"),
        (lambda: Bm25(["a"], k1=-1), InvalidInputError, "k1"),
        (lambda: Bm25(["a"], b=2), InvalidInputError, "b"),
        (lambda: Bm25(["a"]).scores(None), InvalidTypeError, "query"),
    ],
)
def test_errors(call, error, word) -> None:
    with pytest.raises(error, match=__import__("re").escape(word)):
        call()


def test_top_k_orders_best_first_with_ties_by_index() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(size=(50, 8)).astype(np.float32)
    q = rng.normal(size=8).astype(np.float32)
    idx, scores = top_k(q, x, 5)
    sims = numpy_cosine(q[None, :], x)[0]
    expected = np.argsort(-sims, kind="stable")[:5]
    np.testing.assert_array_equal(idx, expected)
    np.testing.assert_allclose(scores, sims[expected], atol=1e-6)
    ties = np.ones((4, 2))
    np.testing.assert_array_equal(top_k(np.ones(2), ties, 3)[0], [0, 1, 2])
    many_idx, _ = top_k(np.stack([q, -q]), x, 100)
    assert many_idx.shape == (2, 50)


def reference_top_k(q: np.ndarray, x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The definition: f64 cosines (0 for a zero row or query) rounded to the
    input's dtype, best first, ties to the lower index (a stable sort)."""
    scores = numpy_cosine(np.atleast_2d(q), x).astype(x.dtype)
    order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return order, np.take_along_axis(scores, order, axis=1)


def tied_rows(rng, n: int, d: int, distinct: int, dtype) -> np.ndarray:
    """Rows from a few directions at power-of-two scales (exactly tied
    cosines), about one in `distinct + 1` of them zero."""
    base = rng.standard_normal((distinct, d))
    pick = rng.integers(0, distinct + 1, n)
    x = np.zeros((n, d))
    x[pick < distinct] = base[pick[pick < distinct]] * 2.0 ** rng.integers(-4, 5, (pick < distinct).sum())[:, None]
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("n", "d", "queries"), [(1, 3, 1), (300, 16, 1), (300, 16, 5), (5000, 384, 1), (5000, 384, 64)])
def test_top_k_matches_numpy_on_random_rows(n, d, queries, dtype) -> None:
    rng = np.random.default_rng(n + d + queries)
    x = (rng.standard_normal((n, d)) * rng.uniform(0.1, 10, (n, 1))).astype(dtype)
    x[::7] = 0.0
    q = rng.standard_normal((queries, d)).astype(dtype)
    for k in (1, 10, n + 5):
        want_idx, want_scores = reference_top_k(q, x, k)
        idx, scores = top_k(q if queries > 1 else q[0], x, k)
        assert idx.dtype == np.int64 and scores.dtype == dtype
        idx, scores = np.atleast_2d(idx), np.atleast_2d(scores)
        np.testing.assert_array_equal(idx, want_idx)
        # float32: the same rounded value up to its last bit; float64: sums in another order.
        np.testing.assert_allclose(scores, want_scores, rtol=1e-6 if dtype == np.float32 else 0, atol=1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_top_k_ties_zero_rows_and_zero_queries(dtype) -> None:
    rng = np.random.default_rng(9)
    x = tied_rows(rng, 4000, 24, 5, dtype)
    q = rng.standard_normal((6, 24)).astype(dtype)
    q[1] = x[17]
    q[2] = 0.0
    for k in (1, 10, 800):
        want_idx, want_scores = reference_top_k(q, x, k)
        idx, scores = top_k(q, x, k)
        np.testing.assert_array_equal(idx, want_idx)
        np.testing.assert_allclose(scores, want_scores, rtol=1e-6, atol=1e-14)
        # One query at a time takes the streamed pass: the same answers.
        for i, row in enumerate(q):
            np.testing.assert_array_equal(top_k(row, x, k)[0], want_idx[i])
    # A zero query scores 0 against every row: the first k rows, in order.
    assert top_k(q[2], x, 3)[0].tolist() == [0, 1, 2] and not top_k(q[2], x, 3)[1].any()


@settings(max_examples=120, deadline=None)
@given(
    st.integers(0, 60),
    st.integers(1, 12),
    st.integers(1, 4),
    st.integers(0, 70),
    st.sampled_from([np.float32, np.float64]),
    st.data(),
)
def test_top_k_is_the_cosine_ranking(n, d, queries, k, dtype, data) -> None:
    """Any finite input, duplicates and zero rows included: each returned
    score is the row's cosine, best first, ties to the lower index, and no
    row left out scores higher (float rounding makes near-equal cosines of
    different rows legitimately order either way, hence the tolerance)."""
    small = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=32) | st.sampled_from([0.0, 1.0, -1.0])
    x = data.draw(hnp.arrays(dtype, (n, d), elements=small))
    q = data.draw(hnp.arrays(dtype, (queries, d), elements=small))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    idx, scores = top_k(q, x, k)
    assert idx.shape == scores.shape == (queries, min(k, n))
    truth = numpy_cosine(q, x) if n else np.zeros((queries, 0))
    for row, (got, got_scores) in enumerate(zip(idx, scores)):
        assert len(set(got.tolist())) == len(got)
        np.testing.assert_allclose(got_scores, truth[row, got], atol=tol)
        assert (np.diff(got_scores) <= 0).all()
        tied = np.diff(got_scores) == 0
        assert (np.diff(got)[tied] > 0).all()
        left_out = np.setdiff1d(np.arange(n), got)
        if len(got) and len(left_out):
            assert truth[row, left_out].max() <= got_scores[-1] + tol


def test_top_k_reads_strided_and_list_input() -> None:
    rng = np.random.default_rng(2)
    wide = rng.standard_normal((200, 20))
    q = rng.standard_normal(10)
    want = reference_top_k(q, np.ascontiguousarray(wide[:, ::2]), 5)[0][0]
    np.testing.assert_array_equal(top_k(q, wide[:, ::2], 5)[0], want)
    np.testing.assert_array_equal(top_k(q.tolist(), wide[:, ::2].tolist(), 5)[0], want)
    np.testing.assert_array_equal(top_k(q, np.asfortranarray(wide[:, ::2]), 5)[0], want)


def reference_bm25(docs: list[list[str]], query: list[str], k1=1.5, b=0.75) -> list[float]:
    n = len(docs)
    avg = sum(map(len, docs)) / n
    out = []
    for d in docs:
        s = 0.0
        for t in set(query):
            df = sum(t in doc for doc in docs)
            tf = d.count(t)
            if df == 0 or tf == 0:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            s += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avg))
        out.append(s)
    return out


def test_bm25_matches_the_formula() -> None:
    texts = [
        "The meeting about the Berlin office is on Monday.",
        "Meetings, meetings: the budget meeting moved to Tuesday!",
        "I bought a new laptop for work.",
        "Berlin has great coffee; the office is near Alexanderplatz.",
        "",
    ]
    index = Bm25(texts)
    assert len(index) == 5 and "Bm25" in repr(index)
    assert Bm25.tokenize("The Meetings in BERLIN, 2024") == ["meet", "berlin", "2024"]
    query = "When is the Berlin office meeting?"
    want = reference_bm25([Bm25.tokenize(t) for t in texts], Bm25.tokenize(query))
    np.testing.assert_allclose(index.scores(query), want, rtol=1e-12)
    idx, scores = index.top_k(query, 2)
    assert list(idx) == list(np.argsort(-np.array(want), kind="stable")[:2])
    assert index.scores("zebra").tolist() == [0.0] * 5
    assert len(Bm25([]).scores("anything")) == 0


# --- top_k_normalized / quantize_rows -------------------------------------------------------


def unit(rows: np.ndarray) -> np.ndarray:
    rows = rows.astype(np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.divide(rows, norms, out=np.zeros_like(rows), where=norms > 0)


def exact_ranking(q: np.ndarray, x: np.ndarray, k: int, valid=None) -> tuple[np.ndarray, np.ndarray]:
    """The definition: f64 dot products rounded to float32 and clipped, best
    first, ties to the lower index (a stable sort of the rounded scores)."""
    scores = np.clip(x.astype(np.float64) @ q.astype(np.float64), -1, 1).astype(np.float32)
    rows = np.arange(len(x)) if valid is None else np.flatnonzero(valid)
    order = rows[np.argsort(-scores[rows], kind="stable")][:k]
    return order, scores[order]


def both_paths(q, x, k, valid=None):
    sketch = _core.quantize_rows(x)
    return [_core.top_k_normalized(q, x, k, valid=valid, sketch=s) for s in (None, sketch)]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 70), st.integers(0, 40), st.integers(1, 40), st.booleans(), st.data())
def test_top_k_normalized_equals_the_exact_ranking(n, d, k, distinct, masked, data) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    # Rows drawn from `distinct` unit vectors (plus zero rows): many exact ties.
    base = unit(rng.standard_normal((distinct, d)))
    base[0] = 0.0 if distinct > 3 else base[0]
    x = base[rng.integers(0, distinct, n)]
    q = unit(rng.standard_normal((1, d)))[0]
    valid = rng.random(n) < 0.7 if masked else None
    want_idx, want_scores = exact_ranking(q, x, k, valid)
    for idx, scores in both_paths(q, x, k, valid):
        np.testing.assert_array_equal(idx, want_idx)
        np.testing.assert_array_equal(scores, want_scores)


def test_top_k_normalized_at_scale_with_the_sketch() -> None:
    """Random unit rows (the benchmark's shape, fewer rows): the int8 first
    pass plus exact rescoring gives exactly the float32 ranking. This is a
    proof, not luck: every row's sketched score carries an error bound
    (|q| |x - x~| + |q - q~| |x~|, Cauchy-Schwarz), and every row whose upper
    bound reaches the k-th best lower bound is rescored exactly."""
    rng = np.random.default_rng(3)
    x = unit(rng.standard_normal((20_000, 384)))
    sketch = _core.quantize_rows(x)
    for q in unit(rng.standard_normal((5, 384))):
        want_idx, want_scores = exact_ranking(q, x, 10)
        idx, scores = _core.top_k_normalized(q, x, 10, sketch=sketch)
        np.testing.assert_array_equal(idx, want_idx)
        np.testing.assert_array_equal(scores, want_scores)
        # The numpy formulation the memory store used before agrees to rounding.
        np.testing.assert_allclose(scores, x[idx] @ q, atol=1e-6)
    # A query equal to a stored row finds it first with score 1.
    idx, scores = _core.top_k_normalized(x[1234], x, 3, sketch=sketch)
    assert idx[0] == 1234 and scores[0] == pytest.approx(1.0, abs=1e-6)


def test_quantize_rows_bounds_the_error() -> None:
    rng = np.random.default_rng(4)
    x = unit(rng.standard_normal((500, 50)))
    x[7] = 0.0
    codes, bounds = _core.quantize_rows(x)
    assert codes.dtype == np.int8 and codes.shape == x.shape and bounds.shape == (500, 2)
    error = np.linalg.norm(x - codes * bounds[:, :1], axis=1)
    assert (error <= bounds[:, 1]).all()
    assert (bounds[:, 1] < 0.02).all() and bounds[7].tolist() == [0.0, 0.0]
    # Each row's sketch depends on that row only: pieces concatenate.
    head, tail = _core.quantize_rows(x[:200]), _core.quantize_rows(x[200:])
    np.testing.assert_array_equal(np.vstack([head[0], tail[0]]), codes)
    np.testing.assert_array_equal(np.vstack([head[1], tail[1]]), bounds)


def test_top_k_normalized_shapes_and_edges() -> None:
    rng = np.random.default_rng(5)
    x = unit(rng.standard_normal((9, 8)))
    q = unit(rng.standard_normal((2, 8)))
    idx, scores = _core.top_k_normalized(q, x, 100)
    assert idx.shape == (2, 9) and scores.dtype == np.float32
    idx, scores = _core.top_k_normalized(q[0], x, 4)
    assert idx.shape == (4,) and idx.dtype == np.int64
    empty = np.zeros((0, 8), np.float32)
    assert _core.top_k_normalized(q[0], empty, 5)[0].shape == (0,)
    assert _core.top_k_normalized(q[0], x, 0)[0].shape == (0,)
    zeros = np.zeros((4, 8), np.float32)
    idx, scores = _core.top_k_normalized(np.zeros(8, np.float32), zeros, 2)
    assert idx.tolist() == [0, 1] and scores.tolist() == [0.0, 0.0]
    x64 = x.astype(np.float64)
    idx64, scores64 = _core.top_k_normalized(q[0].astype(np.float64), x64, 3)
    assert scores64.dtype == np.float64
    np.testing.assert_array_equal(idx64, np.argsort(-(x64 @ q[0].astype(np.float64)), kind="stable")[:3])
    none = np.zeros(9, dtype=bool)
    assert _core.top_k_normalized(q[0], x, 3, valid=none)[0].shape == (0,)


@pytest.mark.parametrize(
    ("call", "word"),
    [
        (lambda x, s: _core.top_k_normalized(np.array([np.nan, 0, 0, 0], np.float32), x, 2), "query"),
        (lambda x, s: _core.top_k_normalized(np.ones(4, np.float32), np.where(x > 0.5, np.nan, x), 2), "X["),
        (lambda x, s: _core.top_k_normalized(np.ones(3, np.float32), x, 2), "query"),
        (lambda x, s: _core.top_k_normalized(np.ones(4), x, 2), "dtype"),
        (lambda x, s: _core.top_k_normalized(np.ones(4, np.float32), x, 2, valid=np.ones(3, bool)), "valid"),
        (lambda x, s: _core.top_k_normalized(np.ones(4, np.float32), x, 2, valid=[1, 0]), "valid"),
        (lambda x, s: _core.top_k_normalized(np.ones(4, np.float32), x, 2, sketch=(s[0][:5], s[1])), "sketch"),
        (lambda x, s: _core.top_k_normalized(np.ones(4, np.float32), x, 2, sketch="codes"), "sketch"),
        (lambda x, s: _core.top_k_normalized(np.ones(4, np.float32), x, -1), "k"),
        (lambda x, s: _core.quantize_rows(np.where(x > 0.5, np.inf, x)), "X"),
        (lambda x, s: _core.quantize_rows(x.astype(np.float64)), "float32"),
    ],
)
def test_top_k_normalized_errors(call, word) -> None:
    x = unit(np.random.default_rng(6).standard_normal((10, 4)))
    with pytest.raises(InvalidInputError, match=__import__("re").escape(word)):
        call(x, _core.quantize_rows(x))
