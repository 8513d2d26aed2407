"""Turn retrieval on LongMemEval-S (../shared/data): MiniLM, the static table,
BM25, and the fusions, measured in the same run.

For each question, every turn of its history is ranked against the question
and the top 10 are taken. Reported (mean over the questions that have at least
one ``has_answer`` turn):

- ``recall@10``: the share of the question's ``has_answer`` turns that are in
  the top 10 (the headline figure);
- ``precision@10``: the share of the top 10 that are ``has_answer`` turns.

Methods: ``minilm`` (`ctxfold.Embedder`, the int8 ONNX all-MiniLM-L6-v2,
turns cut at 256 tokens), ``static`` (`ctxfold.StaticEmbedder`, whole turns),
``bm25`` (`ctxfold.Bm25`, default k1/b), and fusions of a dense ranking with
BM25: ``+bm25 rrf`` (reciprocal rank fusion, ``sum 1/(60 + rank)``) and
``+bm25 z`` (sum of the two score vectors, each standardised to mean 0 and
standard deviation 1 over the history's turns). ``static`` averages token
vectors with the table's frequency weights (the default), ``static_uniform``
takes their plain mean (``StaticEmbedder(weighted=False)``).

MiniLM is slow (3.78M tokens for the 56 histories: 77 min measured on a busy
2-core machine), so its turn
embeddings are cached per history under ``--cache`` (default: the system
temp directory), keyed by the model file's sha256; ``--limit N`` takes the
first N histories (sorted by file name) for a quicker look. ``--dataset
oracle`` runs the same comparison on longmemeval_oracle (326 questions).

    python benches/eval_retrieval.py [--limit N] [--methods minilm,static,static_uniform,bm25]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("CTXFOLD_SHARED_DATA", REPO.parent / "shared" / "data"))  # as benches/conftest.py
LONGMEMEVAL_S = DATA / "conversations" / "longmemeval_s"
LONGMEMEVAL_ORACLE = DATA / "conversations" / "longmemeval_oracle"
RRF_K = 60.0

Scores = npt.NDArray[np.float64]


@dataclass
class History:
    question_id: str
    question: str
    turns: list[str]
    evidence: npt.NDArray[np.bool_]


def histories(directory: Path, limit: int | None, min_turns: int = 0) -> Iterator[History]:
    for path in sorted(directory.glob("*.json"))[:limit]:
        item = json.loads(path.read_text(encoding="utf-8"))
        turns = [t for session in item["haystack_sessions"] for t in session]
        if len(turns) < min_turns:
            continue
        yield History(
            question_id=f"{directory.name}/{path.stem}",
            question=item["question"],
            turns=[t["content"] for t in turns],
            evidence=np.array([bool(t.get("has_answer")) for t in turns]),
        )


def recall_precision(scores: Scores, evidence: npt.NDArray[np.bool_], k: int = 10) -> tuple[float, float]:
    top = np.argsort(-scores, kind="stable")[:k]
    hits = int(evidence[top].sum())
    return hits / int(evidence.sum()), hits / k


def rrf(*score_lists: Scores) -> Scores:
    fused = np.zeros_like(score_lists[0])
    for scores in score_lists:
        ranks = np.empty(len(scores))
        ranks[np.argsort(-scores, kind="stable")] = np.arange(1, len(scores) + 1)
        fused += 1.0 / (RRF_K + ranks)
    return fused


def zsum(*score_lists: Scores) -> Scores:
    return sum(((s - s.mean()) / (s.std() or 1.0) for s in score_lists), np.zeros_like(score_lists[0]))


class MiniLM:
    """Cosine to the question with `ctxfold.Embedder`, turn vectors cached on disk."""

    def __init__(self, cache_root: Path) -> None:
        from ctxfold import Embedder
        from ctxfold.models import sha256_file

        self.embedder = Embedder(cache=False)
        self.cache = cache_root / f"minilm-{sha256_file(self.embedder.model_path)[:16]}-{self.embedder.max_length}"
        self.cache.mkdir(parents=True, exist_ok=True)
        self.seconds = 0.0
        self.tokens = 0

    def turn_vectors(self, h: History) -> npt.NDArray[np.float32]:
        path = self.cache / f"{h.question_id}.npy"
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_file():
            cached = np.load(path)
            if cached.shape[0] == len(h.turns):
                return cached
        before = self.embedder.stats.tokens_encoded
        start = time.perf_counter()
        vectors = self.embedder.embed(h.turns)
        self.seconds += time.perf_counter() - start
        self.tokens += self.embedder.stats.tokens_encoded - before
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, vectors)
        tmp.replace(path)
        return vectors

    def __call__(self, h: History) -> Scores:
        turns = self.turn_vectors(h)
        return (turns @ self.embedder.embed(h.question)).astype(np.float64)


class Static:
    """Cosine to the question with `ctxfold.StaticEmbedder` (no cache: it is fast)."""

    def __init__(self, path: str | None = None, weighted: bool = True) -> None:
        from ctxfold import StaticEmbedder

        self.embedder = StaticEmbedder(path, weighted=weighted)
        self.seconds = 0.0

    def __call__(self, h: History) -> Scores:
        start = time.perf_counter()
        vectors = self.embedder.embed([h.question, *h.turns])
        self.seconds += time.perf_counter() - start
        return (vectors[1:] @ vectors[0]).astype(np.float64)


def bm25(h: History) -> Scores:
    from ctxfold import Bm25

    return np.asarray(Bm25(h.turns).scores(h.question), dtype=np.float64)


def evaluate(
    methods: dict[str, Callable[[History], Scores]], stories: Iterator[History], k: int, progress: bool
) -> dict[str, list[tuple[float, float]]]:
    rows: dict[str, list[tuple[float, float]]] = {}
    for n, h in enumerate(stories, 1):
        if not h.evidence.any():
            continue  # abstention questions: nothing to find
        scores = {name: method(h) for name, method in methods.items()}
        if "bm25" in scores:
            for dense in [m for m in scores if m != "bm25"]:
                scores[f"{dense}+bm25 rrf"] = rrf(scores[dense], scores["bm25"])
                scores[f"{dense}+bm25 z"] = zsum(scores[dense], scores["bm25"])
        for name, s in scores.items():
            rows.setdefault(name, []).append(recall_precision(s, h.evidence, k))
        if progress:
            print(f"  [{n}] {h.question_id}: {len(h.turns)} turns", file=sys.stderr, flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=None, help="first N histories only")
    parser.add_argument(
        "--dataset",
        choices=["s", "oracle"],
        default="s",
        help="longmemeval_s (top 10; the headline), or longmemeval_oracle as a second, larger set: "
        "the evidence sessions only, histories of at least 15 turns, top 3",
    )
    parser.add_argument("--methods", default="minilm,static,static_uniform,bm25")
    parser.add_argument("--static-path", default=None, help="a StaticEmbedder table other than the shipped one")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ctxfold-eval-cache")
    parser.add_argument("--progress", action="store_true")
    args = parser.parse_args()
    directory, k, min_turns = (LONGMEMEVAL_S, 10, 0) if args.dataset == "s" else (LONGMEMEVAL_ORACLE, 3, 15)
    if not directory.is_dir():
        print(f"skipped: evaluation data not found at {directory} (set CTXFOLD_SHARED_DATA)")
        return 0
    wanted = args.methods.split(",")
    methods: dict[str, Callable[[History], Scores]] = {}
    minilm = static = None
    if "minilm" in wanted:
        methods["minilm"] = minilm = MiniLM(args.cache)
    if "static" in wanted:
        methods["static"] = static = Static(args.static_path)
    if "static_uniform" in wanted:
        methods["static_uniform"] = Static(args.static_path, weighted=False)
    if "bm25" in wanted:
        methods["bm25"] = bm25
    rows = evaluate(methods, histories(directory, args.limit, min_turns), k, args.progress)
    count = len(next(iter(rows.values()), []))
    print(f"{directory.name} turn retrieval, {count} questions with evidence (limit={args.limit}), top {k}")
    print(f"{'method':>22} {f'recall@{k}':>10} {f'precision@{k}':>13}")
    for name, values in rows.items():
        r, p = np.mean(values, axis=0)
        print(f"{name:>22} {100 * r:>10.1f} {100 * p:>13.1f}")
    if minilm is not None and minilm.tokens:
        print(f"minilm: {minilm.tokens} tokens embedded in {minilm.seconds:.0f} s (rest from {minilm.cache})")
    if static is not None:
        print(f"static: {static.seconds:.2f} s for all histories")
    return 0


if __name__ == "__main__":
    sys.exit(main())
