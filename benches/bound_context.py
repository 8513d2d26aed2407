"""How much evidence a plan could keep with a given ranking, on the dev sets.

Packing by score is only as good as the scores' calibration, and the order
of the messages only as good as the ranking. This script holds the order of
a ranking fixed and gives it the best calibration it could have: each message
is worth the share of evidence among the set's messages of the same question
category, role and rank (rank within its role, in buckets of 1, 2, 3, 5, 10,
20, 40, 80, 160, 320, 640 and beyond), measured on the set itself. Messages
are then packed by that share per token while they fit (each at its chat
cost, the reply's priming counted), at the budgets of `eval_context.py`.
Both measures of `eval_context.py` (verbatim, coverage) are printed, and
beside each bound what `optimize` keeps in the same run: the gap
between the two is what a better calibration could add with the engine's
ranking; the gap between rankings, what better ranking could. It bounds
calibrations by rank, not every plan: within a bucket every message is worth
the same, where a plan can still tell them apart (by their scores, by their
neighbours), so a plan can keep more than the bound of its own ranking.

Rankings: ``engine`` (the score `optimize` reports for each message),
``bm25``, ``static`` and ``minilm`` (cosine with the question's topic,
`topic_of`), ``bm25+static+minilm`` (the largest of the three standardised
scores) and ``engine+minilm`` (the engine's standardised score plus half of
MiniLM's: MiniLM over every message, which the default cannot afford).
MiniLM vectors come from `eval_context.py`'s disk cache.

    python benches/bound_context.py [--sets beam] [--budgets eighth,fixed] [--limit N]
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path
from typing import Any

import numpy as np

import ctxfold
from ctxfold.engine.scoring import topic_of

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eval_context as ec  # noqa: E402

BUCKETS = (1, 2, 3, 5, 10, 20, 40, 80, 160, 320, 640)
RANKINGS = ("engine", "bm25", "static", "minilm", "bm25+static+minilm", "engine+minilm")


def _standardised(x: np.ndarray) -> np.ndarray:
    spread = x.std()
    return (x - x.mean()) / spread if spread > 0 else np.zeros_like(x)


def _bucket(rank: int) -> int:
    return next((k for k, top in enumerate(BUCKETS) if rank < top), len(BUCKETS))


def rank_keys(scores: np.ndarray, roles: list[str]) -> list[tuple[str, int]]:
    """(role, rank bucket within the role) of each message, best score first."""
    keys: list[tuple[str, int]] = [("", 0)] * len(scores)
    for role in set(roles):
        same = [i for i, r in enumerate(roles) if r == role]
        for rank, i in enumerate(sorted(same, key=lambda i: -scores[i])):
            keys[i] = (role, _bucket(rank))
    return keys


def pack(worth: list[float], costs: list[int], budget: int) -> list[int]:
    """Messages by worth per token, best first, while they fit."""
    order = sorted(range(len(worth)), key=lambda i: -worth[i] / max(costs[i], 1))
    return ec.fit_in_order(order, costs, budget)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="beam")
    parser.add_argument("--budgets", default="eighth,fixed")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "ctxfold-eval")
    args = parser.parse_args()
    if not (ec.SHARED / "data").is_dir():
        print(f"skipped: no evaluation data at {ec.SHARED / 'data'}")
        return 0
    static = ctxfold.StaticEmbedder()
    minilm = ctxfold.Embedder(cache=ec.SqliteVectors(args.cache_dir / "minilm-vectors.sqlite"))
    engine = ctxfold.ContextEngine(encoding="cl100k_base")
    for name in args.sets.split(","):
        # (budget label, category) -> one row per question: evidence mask, costs, budget, keys per
        # ranking, texts, the texts by id, the evidence ids; and what optimize keeps (verbatim, coverage)
        questions: dict[tuple[str, str], list[tuple[Any, ...]]] = collections.defaultdict(list)
        kept: dict[tuple[str, str], list[tuple[float, float]]] = collections.defaultdict(list)
        for _unit, msgs, qs in ec.load_set(name, args.limit):
            texts = [m["content"] for m in msgs]
            roles = [m["role"] for m in msgs]
            by_id = {m["id"]: m["content"] for m in msgs}
            total = int(sum(ctxfold.count_tokens(texts, encoding="cl100k_base")))
            costs = [int(c) for c in ctxfold.tokens.message_costs(
                [{"role": m["role"], "content": m["content"]} for m in msgs], engine.tokenizer)]
            vectors = {"static": np.asarray(static.embed(texts)), "minilm": np.asarray(minilm.embed(texts))}
            bm25 = ctxfold.Bm25(texts)
            for q in qs:
                evidence = np.array([str(m["id"]) in {str(e) for e in q.evidence} for m in msgs])
                if not evidence.any():
                    continue
                topic = topic_of(q.text)
                lexical = _standardised(np.asarray(bm25.scores(topic), dtype=np.float64))
                dense = {key: _standardised(vectors[key] @ np.asarray(model.embed([topic]), dtype=np.float32)[0])
                         for key, model in (("static", static), ("minilm", minilm))}
                for label, budget in ec.budgets(name, total, args.budgets):
                    res = engine.optimize(msgs, query=q.text, budget=budget, now=q.now)
                    kept[(label, q.category)].append(
                        ec.measure(ec.context_text(res.messages), by_id, q.evidence, True))
                    own = np.zeros(len(msgs))
                    for item in res.items:
                        own[item.index] = item.score
                    scores = {"engine": own, "bm25": lexical, "static": dense["static"], "minilm": dense["minilm"],
                              "bm25+static+minilm": np.maximum.reduce([lexical, dense["static"], dense["minilm"]]),
                              "engine+minilm": _standardised(own) + 0.5 * dense["minilm"]}
                    keys = {r: rank_keys(scores[r], roles) for r in RANKINGS}
                    questions[(label, q.category)].append((evidence, costs, budget, keys, texts, by_id, q.evidence))
        print(f"\n## {ec.NAMES[name]}: evidence kept by optimize, and the bound of each ranking")
        for label in dict.fromkeys(label for label, _ in questions):
            categories = sorted(c for lab, c in questions if lab == label)
            bound: dict[str, dict[str, list[tuple[float, float]]]] = {r: collections.defaultdict(list) for r in RANKINGS}
            for ranking in RANKINGS:
                for category in categories:
                    rows = questions[(label, category)]
                    hits: dict[tuple[str, int], list[int]] = collections.defaultdict(lambda: [0, 0])
                    for evidence, _, _, keys, *_ in rows:
                        for key, ev in zip(keys[ranking], evidence):
                            hits[key][0] += int(ev)
                            hits[key][1] += 1
                    for evidence, costs, budget, keys, texts, by_id, ids in rows:
                        worth = [hits[key][0] / hits[key][1] for key in keys[ranking]]
                        chosen = pack(worth, costs, budget)
                        bound[ranking][category].append(ec.measure("\n".join(texts[i] for i in chosen), by_id, ids, True))
            for k, measure in enumerate(("verbatim", "coverage")):
                print(f"\n{measure}\n{'budget':>6} {'rows':34s}{'optimize':>9}" + "".join(f"{r:>20}" for r in RANKINGS))
                every = [x[k] for c in categories for x in kept[(label, c)]]
                print(f"{label:>6} {'all (' + str(len(every)) + ')':34s}{np.mean(every):9.3f}" + "".join(
                    f"{np.mean([x[k] for c in categories for x in bound[r][c]]):20.3f}" for r in RANKINGS))
                for c in categories:
                    print(f"{label:>6}   {c[:26] + ' (' + str(len(kept[(label, c)])) + ')':32s}"
                          f"{np.mean([x[k] for x in kept[(label, c)]]):9.3f}"
                          + "".join(f"{np.mean([x[k] for x in bound[r][c]]):20.3f}" for r in RANKINGS))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
