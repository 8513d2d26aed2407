"""Topic segmentation quality on ../shared/data/segmentation: Choi (2000) set
3, 3-11 (300 synthetic texts of Brown-corpus segments), DialSeg711 (711
dialogues) and TIAGE (500 dialogues), with the gold number of segments.

Reported per data set: Pk and WindowDiff (lower is better; k = half the mean
gold segment length, at least 2, as the external check computes it), mean
over documents, for these methods (all but ``dialogue`` read only the similarity matrix):

- ``segment``: ``ctxfold.segment(S, n_segments=K)``, the exact DP over the
  z-scored evidence objective (see its docstring);
- ``spectral``: the seed spec's method, ``spectral_clustering(clip(S, 0), K)``
  labels, then a boundary wherever consecutive labels differ (so it may
  produce more than K - 1 boundaries);
- ``dialogue``: ``ctxfold.segment_dialogue(utterances, vectors, K)``, the
  same DP with the dialogue prior (``ctxfold.dialogue_boundary_costs``: no
  topic change right after a question, one likelier after a closing turn,
  at a question opener or new words, less where the blocks either side of
  the gap are alike); what the conversation arc uses;
- ``texttiling``: TextTiling-style depth scoring (Hearst 1997) on block
  comparison: the cosine between the summed vectors of the w blocks before and
  after each gap (computed from S), depth = rise to the nearest peak on each
  side, the K - 1 deepest gaps; w = the Pk window (half the mean segment).

Sentence vectors (``--vectors``, a comma-separated list, each row of the table
one kind; S = ``ctxfold.cosine_similarity`` of the vectors):

- ``minilm`` (THE DEFAULT): ``ctxfold.Embedder()``, all-MiniLM-L6-v2 (int8
  ONNX, shipped with ctxfold), unit vectors; the best on every data set and
  with every method below. Embedding the sentences of the three sets takes
  minutes; ``--cache DIR`` keeps them as .npy.
- ``static``: ``ctxfold.StaticEmbedder()``, the static table distilled from
  MiniLM (no model run, no ONNX Runtime): the fallback when the model cannot
  run; it also meets both targets.
- ``tfidf``: ``TfidfVectorizer(sublinear_tf=True)`` fitted on each document
  alone (the external check's choice for Choi); ``tfidf-corpus`` fits the IDF
  on all documents of the set (27 utterances are too few to tell topic words
  from function words).
- ``a+b``: the average of the two similarity matrices (fusion), e.g.
  ``tfidf+minilm``.

    python benches/eval_segmentation.py [--vectors minilm|static|tfidf|tfidf-corpus|a+b|all,...]
        [--methods segment,dialogue,spectral,texttiling] [--sets choi,dialseg711,tiage]
        [--part all|first|second] [--limit N] [--cache DIR] [--transform none|window1|window2|answer|speaker|qsplit|answer+qsplit]

``--transform`` (embedding kinds only) applies a dialogue variant to each
document's vectors or similarity before segmenting: ``window1``/``window2``
(each utterance averaged with 1 or 2 neighbours each side), ``answer`` (an
utterance after a question takes 0.3 of the question's vector), ``speaker``
(each speaker's mean vector taken out, speakers alternating), ``qsplit``
(a question's similarity to the utterance before it halved), ``answer+qsplit``
(both). None is kept:
docs/benchmarks.md has the figures.

Results, the choice of vectors and how the objective was chosen: docs/benchmarks.md
(topic segmentation).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import numpy.typing as npt

DEFAULT_VECTORS = "minilm"

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("CTXFOLD_SHARED_DATA", REPO.parent / "shared" / "data"))  # as benches/conftest.py
SEGMENTATION = DATA / "segmentation"

Document = tuple[list[str], list[int]]  # sentences, gold segment lengths
Matrix = npt.NDArray[np.floating]


def choi() -> Iterator[Document]:
    for f in sorted(glob.glob(str(SEGMENTATION / "choi" / "3" / "3-11" / "*.ref"))):
        text = Path(f).read_text(encoding="latin-1")
        segments = [s.strip().splitlines() for s in text.split("==========") if s.strip()]
        yield [x for s in segments for x in s], [len(s) for s in segments]


def dialogues(name: str) -> Callable[[], Iterator[Document]]:
    def load() -> Iterator[Document]:
        for d in json.loads((SEGMENTATION / f"{name}.json").read_text(encoding="utf-8")):
            yield list(d["utterances"]), [int(x) for x in d["segments"]]

    return load


SETS: dict[str, Callable[[], Iterator[Document]]] = {
    "choi": choi,
    "dialseg711": dialogues("dialseg711"),
    "tiage": dialogues("tiage"),
}


def window(lengths: list[int]) -> int:
    return max(2, round(sum(lengths) / (2 * len(lengths))))


def segment_ids(boundaries: list[int], n: int) -> npt.NDArray[np.int64]:
    return np.searchsorted(np.array(sorted(boundaries), dtype=np.int64), np.arange(n), side="right")


def pk(ref: list[int], hyp: list[int], n: int, k: int) -> float:
    if n <= k:
        return 0.0
    r, h = segment_ids(ref, n), segment_ids(hyp, n)
    return float(np.mean((r[:-k] == r[k:]) != (h[:-k] == h[k:])))


def window_diff(ref: list[int], hyp: list[int], n: int, k: int) -> float:
    if n <= k:
        return 0.0
    r, h = segment_ids(ref, n), segment_ids(hyp, n)
    return float(np.mean((r[k:] - r[:-k]) != (h[k:] - h[:-k])))


def by_segment(s: Matrix, k: int, w: int) -> list[int]:
    import ctxfold

    return ctxfold.segment(s, n_segments=k).tolist()


def by_spectral(s: Matrix, k: int, w: int) -> list[int]:
    import ctxfold

    labels = ctxfold.spectral_clustering(np.clip(s, 0, None), k)
    return (np.flatnonzero(labels[1:] != labels[:-1]) + 1).tolist()


def by_texttiling(s: Matrix, k: int, w: int) -> list[int]:
    n = len(s)
    if n < 2 or k < 2:
        return []
    p = np.zeros((n + 1, n + 1))
    p[1:, 1:] = np.asarray(s, dtype=np.float64).cumsum(0).cumsum(1)
    t = np.arange(1, n)
    a0, b1 = np.maximum(t - w, 0), np.minimum(t + w, n)

    def box(r0, r1, c0, c1):
        return p[r1, c1] - p[r0, c1] - p[r1, c0] + p[r0, c0]

    gap = box(a0, t, t, b1) / np.sqrt(np.maximum(box(a0, t, a0, t) * box(t, b1, t, b1), 1e-12))
    # Hearst's depth: climb to the nearest peak on each side.
    depth = np.zeros(len(gap))
    for g in range(len(gap)):
        left = right = g
        while left > 0 and gap[left - 1] >= gap[left]:
            left -= 1
        while right < len(gap) - 1 and gap[right + 1] >= gap[right]:
            right += 1
        depth[g] = (gap[left] - gap[g]) + (gap[right] - gap[g])
    return sorted((np.argsort(-depth, kind="stable")[: k - 1] + 1).tolist())


METHODS: dict[str, Callable[[Matrix, int, int], list[int]]] = {
    "segment": by_segment,
    "spectral": by_spectral,
    "texttiling": by_texttiling,
}
#: Methods that read the utterances and their vectors, not only the similarity.
TEXT_METHODS = ("dialogue",)


EMBEDDINGS = ("static", "minilm")
BASE = ("tfidf", "tfidf-corpus", *EMBEDDINGS)
ALL = ("tfidf", "tfidf-corpus", "static", "minilm", "tfidf+static", "tfidf+minilm")


def tfidf_vectors(sentences: list[str], vectorizer: object | None = None) -> Matrix:
    from sklearn.feature_extraction.text import TfidfVectorizer

    fitted = vectorizer or TfidfVectorizer(sublinear_tf=True).fit(sentences)
    return fitted.transform(sentences).toarray().astype(np.float32)  # type: ignore[attr-defined]


def embed_set(kind: str, name: str, sentences: list[str], cache: Path | None) -> Matrix:
    """Unit vectors of every sentence of a data set (one batched call; cached
    as ``<cache>/<set>.<kind>.npy`` when ``--cache`` is given)."""
    path = cache / f"{name}.{kind}.npy" if cache else None
    if path is not None and path.is_file():
        v = np.load(path)
        if len(v) == len(sentences):
            return v
    import ctxfold

    model = ctxfold.StaticEmbedder() if kind == "static" else ctxfold.Embedder(cache=False)
    v = np.asarray(model.embed(sentences), dtype=np.float32)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.save(path, v)
    return v


def _unit(v: Matrix) -> Matrix:
    return (v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)).astype(np.float32)


def window_vectors(sentences: list[str], v: Matrix, radius: int) -> Matrix:
    """Each utterance's vector averaged with its neighbours (weights falling linearly)."""
    out = np.zeros_like(v, dtype=np.float64)
    n = len(v)
    for offset in range(-radius, radius + 1):
        lo, hi = max(0, -offset), min(n, n - offset)
        out[lo:hi] += (1 - abs(offset) / (radius + 1)) * v[lo + offset : hi + offset]
    return _unit(out)


def answer_vectors(sentences: list[str], v: Matrix, weight: float = 0.3) -> Matrix:
    """An utterance after a question ("...?") takes `weight` of the question's vector: an answer belongs with it."""
    out = v.astype(np.float64).copy()
    for t in range(1, len(sentences)):
        if sentences[t - 1].rstrip().endswith("?"):
            out[t] += weight * v[t - 1]
    return _unit(out)


def speaker_centred(sentences: list[str], v: Matrix) -> Matrix:
    """Each speaker's mean vector taken out (speakers alternate): what is style, not topic."""
    out = v.astype(np.float64).copy()
    for parity in (0, 1):
        out[parity::2] -= v[parity::2].mean(axis=0)
    return _unit(out)


def question_split(sentences: list[str], s: Matrix, factor: float = 0.5) -> Matrix:
    """The similarity of a question to the utterance before it scaled by `factor`: a question may open a topic."""
    s = np.array(s, dtype=np.float64)
    for t in range(1, len(sentences)):
        if sentences[t].rstrip().endswith("?"):
            s[t - 1, t] = s[t, t - 1] = s[t - 1, t] * factor
    return s


#: Dialogue variants of the similarity (``--transform``), for comparison with the default (docs/benchmarks.md).
TRANSFORMS: dict[str, Callable[[list[str], Matrix], Matrix]] = {
    "none": lambda sents, v: v,
    "window1": lambda sents, v: window_vectors(sents, v, 1),
    "window2": lambda sents, v: window_vectors(sents, v, 2),
    "answer": answer_vectors,
    "speaker": speaker_centred,
}


def document_vectors(kind: str, name: str, documents: list[Document], cache: Path | None) -> list[Matrix]:
    """Each document's sentence vectors (an embedding kind, or TF-IDF fitted per document or on the set)."""
    if kind in EMBEDDINGS:
        flat = embed_set(kind, name, [x for sents, _ in documents for x in sents], cache)
        return np.split(flat, np.cumsum([len(sents) for sents, _ in documents])[:-1])
    vectorizer = None
    if kind == "tfidf-corpus":
        from sklearn.feature_extraction.text import TfidfVectorizer

        vectorizer = TfidfVectorizer(sublinear_tf=True).fit([x for sents, _ in documents for x in sents])
    return [tfidf_vectors(sents, vectorizer) for sents, _ in documents]


def by_dialogue(sentences: list[str], vectors: Matrix, k: int) -> list[int]:
    import ctxfold

    return ctxfold.segment_dialogue(sentences, vectors, k).tolist()


def similarities(
    kind: str, name: str, documents: list[Document], cache: Path | None, transform: str = "none"
) -> list[Matrix]:
    """The similarity matrix of every document for one kind of vectors; a
    fusion ``a+b`` averages the two cosine matrices."""
    import ctxfold

    if "+" in kind:
        parts = [similarities(k, name, documents, cache, transform) for k in kind.split("+")]
        return [np.mean(m, axis=0, dtype=np.float64).astype(np.float32) for m in zip(*parts)]
    if kind in EMBEDDINGS:
        flat = embed_set(kind, name, [x for sents, _ in documents for x in sents], cache)
        cuts = np.cumsum([len(sents) for sents, _ in documents])[:-1]
        vectors = np.split(flat, cuts)
        if transform in ("qsplit", "answer+qsplit"):
            base = "answer" if transform == "answer+qsplit" else "none"
            return [question_split(sents, np.asarray(ctxfold.cosine_similarity(TRANSFORMS[base](sents, v))))
                    for (sents, _), v in zip(documents, vectors)]
        return [np.asarray(ctxfold.cosine_similarity(TRANSFORMS[transform](sents, v)))
                for (sents, _), v in zip(documents, vectors)]
    vectorizer = None
    if kind == "tfidf-corpus":
        from sklearn.feature_extraction.text import TfidfVectorizer

        vectorizer = TfidfVectorizer(sublinear_tf=True).fit([x for sents, _ in documents for x in sents])
    return [np.asarray(ctxfold.cosine_similarity(tfidf_vectors(sents, vectorizer))) for sents, _ in documents]


def evaluate(
    name: str, kind: str, methods: list[str], part: str, limit: int | None, cache: Path | None, transform: str = "none"
) -> dict[str, tuple[float, float, float]]:
    """Mean Pk, WindowDiff and seconds per method on one data set. The
    similarities are computed for the whole set (so corpus IDF and the
    embedding cache see every document), then the part is taken."""
    documents = list(SETS[name]())
    matrices = similarities(kind, name, documents, cache, transform)
    vectors: list[Matrix | None] = [None] * len(documents)
    if any(m in TEXT_METHODS for m in methods):
        vectors = list(document_vectors(kind, name, documents, cache))
    half = len(documents) // 2
    pick = {"all": slice(None), "first": slice(0, half), "second": slice(half, None)}[part]
    pairs = list(zip(documents[pick], matrices[pick], vectors[pick]))[:limit]
    scores: dict[str, list[tuple[float, float]]] = {m: [] for m in methods}
    seconds = dict.fromkeys(methods, 0.0)
    for (sentences, lengths), s, v in pairs:
        n, k, w = len(sentences), len(lengths), window(lengths)
        ref = np.cumsum(lengths)[:-1].tolist()
        for method in methods:
            start = time.perf_counter()
            found = by_dialogue(sentences, v, k) if method in TEXT_METHODS else METHODS[method](s, k, w)
            hyp = [b for b in found if 0 < b < n]
            seconds[method] += time.perf_counter() - start
            scores[method].append((pk(ref, hyp, n, w), window_diff(ref, hyp, n, w)))
    return {m: (*np.mean(v, axis=0), seconds[m]) for m, v in scores.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="choi,dialseg711,tiage")
    parser.add_argument(
        "--vectors",
        default=DEFAULT_VECTORS,
        help=f"comma-separated kinds: {', '.join(BASE)}, or two joined by '+' (averaged similarities); "
        f"'all' = {','.join(ALL)}; default {DEFAULT_VECTORS}",
    )
    parser.add_argument("--methods", default=",".join(METHODS), help="comma-separated: " + ", ".join([*METHODS, *TEXT_METHODS]))
    parser.add_argument("--part", choices=["all", "first", "second"], default="all", help="half of each data set")
    parser.add_argument("--limit", type=int, default=None, help="first N documents (of the part) of each set")
    parser.add_argument("--cache", type=Path, default=None, help="directory caching the embeddings (.npy)")
    parser.add_argument("--transform", choices=[*TRANSFORMS, "qsplit", "answer+qsplit"], default="none",
                        help="a dialogue variant of the embedding similarity, for comparison")
    args = parser.parse_args()
    if not SEGMENTATION.is_dir():
        print(f"skipped: evaluation data not found at {SEGMENTATION} (set CTXFOLD_SHARED_DATA)")
        return 0
    kinds = list(ALL) if args.vectors == "all" else args.vectors.split(",")
    for kind in kinds:
        if any(k not in BASE for k in kind.split("+")):
            parser.error(f"--vectors: unknown kind {kind!r}; choose from {', '.join(BASE)} or a+b")
    methods = args.methods.split(",")
    if any(m not in METHODS and m not in TEXT_METHODS for m in methods):
        parser.error(f"--methods: choose from {', '.join([*METHODS, *TEXT_METHODS])}")
    if any(m in TEXT_METHODS for m in methods) and any("+" in k for k in kinds):
        parser.error("--methods dialogue: needs one kind of vectors, not a fusion a+b")
    sets = args.sets.split(",")
    results = {(name, kind): evaluate(name, kind, methods, args.part, args.limit, args.cache, args.transform)
               for name in sets for kind in kinds}
    print(f"Topic segmentation, gold number of segments; Pk / WindowDiff (lower is better); part={args.part}, "
          f"limit={args.limit}, transform={args.transform}")
    header = f"{'vectors':<14} {'method':<11}" + "".join(f" {name:>15}" for name in sets)
    print(header)
    print("-" * len(header))
    for kind in kinds:
        for method in methods:
            cells = "".join(f" {results[name, kind][method][0]:>7.3f} / {results[name, kind][method][1]:.3f}" for name in sets)
            print(f"{kind:<14} {method:<11}{cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
