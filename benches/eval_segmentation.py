"""Topic segmentation quality on ../shared/data/segmentation: Choi (2000) set
3, 3-11 (300 synthetic texts of Brown-corpus segments), DialSeg711 (711
dialogues) and TIAGE (500 dialogues), with the gold number of segments.

Reported per data set: Pk and WindowDiff (lower is better; k = half the mean
gold segment length, at least 2, as the external check computes it), mean
over documents, for three methods on the same similarity matrix:

- ``segment``: ``ctxengine.segment(S, n_segments=K)``, the exact DP over the
  z-scored evidence objective (see its docstring);
- ``spectral``: the seed spec's method, ``spectral_clustering(clip(S, 0), K)``
  labels, then a boundary wherever consecutive labels differ (so it may
  produce more than K - 1 boundaries);
- ``texttiling``: TextTiling-style depth scoring (Hearst 1997) on block
  comparison: the cosine between the summed vectors of the w blocks before and
  after each gap (computed from S), depth = rise to the nearest peak on each
  side, the K - 1 deepest gaps; w = the Pk window (half the mean segment).

Sentence vectors (the documented default while no embedding model is
assumed): TF-IDF, ``TfidfVectorizer(sublinear_tf=True)``, rows L2-normalised
by ``ctxengine.cosine_similarity``. ``--fit doc`` (default) fits it on each
document alone, as the external check does for Choi; ``--fit corpus`` fits
the IDF on all documents of the data set (27 utterances are too few to tell
topic words from function words). ``--vectors static`` uses
``ctxengine.StaticEmbedder`` instead.

    python benches/eval_segmentation.py [--sets choi,dialseg711,tiage] [--fit doc|corpus]
                                        [--vectors tfidf|static] [--limit N]

How the objective was chosen (Python prototypes of the same exact DP, TF-IDF
fitted per document, gold K; Pk on subsets: Choi 3-11's first 100 texts and
DialSeg711's every 3rd dialogue, except the last row, which is this script's
full run; lower is better):

======================================================  ======  =========
objective                                                Choi    DialSeg
======================================================  ======  =========
raw cosine, sum / L (k-means)                            0.194   0.344
raw cosine, sum / L^r, r in 0.6..2                       >0.19   >0.34
raw, centred (mean + c*std), r = 0.5                     0.145   0.310
C99 rank transform (11x11), r = 1 / centred              0.244   0.388
C99 itself (rank + divisive, gold K)                     0.262   0.396
exact DP of C99's density (Dinkelbach)                   0.210   0.381
profile / spectral-embedding similarity                  >0.12   >0.33
row z-score, centred, r = 0                              0.127   0.329
row z-score clipped at 0, minus 0.5, r = 0.3 (chosen)    0.117   0.327
  + length prior (Gaussian / log), box smoothing, local   no gain
  z, double z, hard-EM likelihood ratios, top-eigen
  deflation, kernel centring, degree normalisation
======================================================  ======  =========

Full runs of this script (release build; Pk / WindowDiff, gold K):

============  ===========================  ===============  ===============
vectors       method                       Choi 3-11        DialSeg711
============  ===========================  ===============  ===============
tfidf, doc    segment                      0.117 / 0.124    0.327 / 0.335
tfidf, doc    spectral labels, then split  0.437 / 0.796    0.528 / 0.804
tfidf, doc    texttiling                   0.259 / 0.306    0.348 / 0.371
tfidf, corpus segment                      0.105 / 0.111    0.298 / 0.306
tfidf, corpus spectral labels, then split  0.375 / 0.673    0.504 / 0.746
tfidf, corpus texttiling                   0.250 / 0.303    0.328 / 0.351
static        segment                      0.093 / 0.107    0.292 / 0.302
static        spectral labels, then split  0.423 / 0.767    0.511 / 0.771
static        texttiling                   0.175 / 0.210    0.308 / 0.325
============  ===========================  ===============  ===============

TIAGE (segment / spectral / texttiling, Pk): tfidf doc 0.407 / 0.478 /
0.406; tfidf corpus 0.387 / 0.469 / 0.404; static 0.349 / 0.462 / 0.366.
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

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("CTXENGINE_SHARED_DATA", REPO.parent / "shared" / "data"))  # as benches/conftest.py
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
    import ctxengine

    return ctxengine.segment(s, n_segments=k).tolist()


def by_spectral(s: Matrix, k: int, w: int) -> list[int]:
    import ctxengine

    labels = ctxengine.spectral_clustering(np.clip(s, 0, None), k)
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


class Vectors:
    """Similarity matrices of each document's sentences."""

    def __init__(self, kind: str, fit: str) -> None:
        self.kind, self.fit = kind, fit
        self.vectorizer = None
        self.static = None
        if kind == "static":
            from ctxengine import StaticEmbedder

            self.static = StaticEmbedder()

    def prepare(self, documents: list[Document]) -> None:
        if self.kind == "tfidf" and self.fit == "corpus":
            from sklearn.feature_extraction.text import TfidfVectorizer

            self.vectorizer = TfidfVectorizer(sublinear_tf=True).fit([x for sents, _ in documents for x in sents])

    def similarity(self, sentences: list[str]) -> Matrix:
        import ctxengine

        if self.static is not None:
            v = np.asarray(self.static.encode(sentences), dtype=np.float32)
        else:
            from sklearn.feature_extraction.text import TfidfVectorizer

            vectorizer = self.vectorizer or TfidfVectorizer(sublinear_tf=True).fit(sentences)
            v = vectorizer.transform(sentences).toarray().astype(np.float32)
        return np.asarray(ctxengine.cosine_similarity(v))


def evaluate(name: str, vectors: Vectors, limit: int | None) -> dict[str, tuple[float, float, float]]:
    documents = list(SETS[name]())[:limit]
    vectors.prepare(documents)
    scores: dict[str, list[tuple[float, float]]] = {m: [] for m in METHODS}
    seconds = dict.fromkeys(METHODS, 0.0)
    for sentences, lengths in documents:
        n, k, w = len(sentences), len(lengths), window(lengths)
        ref = np.cumsum(lengths)[:-1].tolist()
        s = vectors.similarity(sentences)
        for method, run in METHODS.items():
            start = time.perf_counter()
            hyp = [b for b in run(s, k, w) if 0 < b < n]
            seconds[method] += time.perf_counter() - start
            scores[method].append((pk(ref, hyp, n, w), window_diff(ref, hyp, n, w)))
    return {m: (*np.mean(v, axis=0), seconds[m]) for m, v in scores.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="choi,dialseg711,tiage")
    parser.add_argument("--fit", choices=["doc", "corpus"], default="doc")
    parser.add_argument("--vectors", choices=["tfidf", "static"], default="tfidf")
    parser.add_argument("--limit", type=int, default=None, help="first N documents of each set")
    args = parser.parse_args()
    if not SEGMENTATION.is_dir():
        print(f"skipped: evaluation data not found at {SEGMENTATION} (set CTXENGINE_SHARED_DATA)")
        return 0
    vectors = Vectors(args.vectors, args.fit)
    label = f"{args.vectors}" + (f", fitted per {args.fit}" if args.vectors == "tfidf" else "")
    print(f"Topic segmentation with the gold number of segments; vectors: {label}; limit={args.limit}")
    print(f"{'data set':>12} {'method':>11} {'Pk':>7} {'WindowDiff':>11} {'seconds':>8}")
    for name in args.sets.split(","):
        for method, (p, wd, sec) in evaluate(name, vectors, args.limit).items():
            print(f"{name:>12} {method:>11} {p:>7.3f} {wd:>11.3f} {sec:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
