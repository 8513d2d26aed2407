"""Evidence recall of `ContextEngine.optimize` on LongMemEval-S (../shared/data).

Each history is flattened into messages (session date as timestamp) and fitted
with the question as query, at the question's date (``optimize(now=...)``). Reported per budget (1/8 of the history, and 2,000
tokens): the share of `has_answer` turns whose text survives verbatim, the share
of questions whose answer string appears in the context, and the same for the
baselines computed in the same run: recency (latest turns that fit; also
langchain-core's trim_messages when installed), BM25 top turns, MiniLM top
turns (`ctxfold.Embedder`, turn vectors cached on disk as in
eval_retrieval.py: the first run embeds every history, which is slow on a
small machine; `--no-minilm` skips it) and a plain reciprocal rank fusion of BM25 with
the static embedder. Each baseline takes its top turns while they fit.

    python benches/eval_longmemeval.py [--limit N] [--budgets eighth,2000] [--no-minilm] [--engine-only]

The last line is a digest of every context `optimize` returned: a change
meant to leave the engine's behaviour alone must leave it unchanged.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import ctxfold

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_retrieval import History, MiniLM, rrf  # noqa: E402  (the same cached MiniLM vectors and fusion)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "conversations" / "longmemeval_s"


def load(limit: int | None):
    files = sorted(DATA.glob("*.json"))[:limit]
    for f in files:
        d = json.loads(f.read_text(encoding="utf-8"))
        d["_stem"] = f.stem
        msgs, evidence = [], []
        for si, (session, date) in enumerate(zip(d["haystack_sessions"], d["haystack_dates"])):
            stamp = date.split(" (")[0].replace("/", "-") + "T" + date.split(") ")[-1] + ":00"
            for ti, turn in enumerate(session):
                mid = f"S{si}:{ti}"
                msgs.append({"role": turn["role"], "content": turn["content"], "id": mid, "timestamp": stamp})
                if turn.get("has_answer"):
                    evidence.append(mid)
        if evidence:
            yield d, msgs, evidence


def asked(d: dict) -> str | None:
    """The question's date ("2023/05/20 (Sat) 02:21") as ISO 8601, or None when the file has none."""
    date = d.get("question_date")
    if not date:
        return None
    return date.split(" (")[0].replace("/", "-") + "T" + date.split(") ")[-1] + ":00"


def recall(context: str, msgs, evidence, answer) -> tuple[float, float]:
    by_id = {m["id"]: m["content"] for m in msgs}
    found = sum(by_id[i] in context for i in evidence) / len(evidence)
    return found, float(str(answer).lower() in context.lower())


def context_of(messages) -> str:
    return "\n".join(m["content"] if isinstance(m.get("content"), str) else "" for m in messages)


def fit_in_order(msgs, chosen: list[int], budget: int, tok) -> list[dict]:
    """Greedy: take turns in `chosen` order while they fit, emit in original order."""
    costs = ctxfold.tokens.message_costs([{"role": m["role"], "content": m["content"]} for m in msgs], tok)
    used, keep = 3, []
    for i in chosen:
        if used + costs[i] <= budget:
            keep.append(i)
            used += costs[i]
    return [msgs[i] for i in sorted(keep)]


def baselines(msgs, question, budget, tok, dense):
    """Each baseline's kept messages; `dense` maps a name to (turn vectors,
    question vector) for the embedding baselines."""
    n = len(msgs)
    out = {"recency": fit_in_order(msgs, list(range(n - 1, -1, -1)), budget, tok)}
    bm = ctxfold.Bm25([m["content"] for m in msgs]).scores(question)
    out["bm25"] = fit_in_order(msgs, list(np.argsort(-bm, kind="stable")), budget, tok)
    for name, (turns, query) in dense.items():
        cos = (turns @ query).astype(np.float64)
        out[name] = fit_in_order(msgs, list(np.argsort(-cos, kind="stable")), budget, tok)
        if name == "static":
            out["bm25+static rrf"] = fit_in_order(msgs, list(np.argsort(-rrf(bm, cos), kind="stable")), budget, tok)
            del out["static"]
    try:
        from langchain_core.messages import AIMessage, HumanMessage
        from langchain_core.messages.utils import trim_messages
    except ImportError:
        return out
    lc = [HumanMessage(m["content"]) if m["role"] == "user" else AIMessage(m["content"]) for m in msgs]
    counter = lambda ms: ctxfold.count_messages(  # noqa: E731
        [{"role": "user" if m.type == "human" else "assistant", "content": m.content} for m in ms], tokenizer=tok)
    trimmed = trim_messages(lc, max_tokens=budget, token_counter=counter, strategy="last")
    out["trim_messages"] = [{"content": m.content} for m in trimmed]
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--budgets", default="eighth,2000")
    parser.add_argument("--no-minilm", action="store_true", help="skip the MiniLM baseline (slow on first run)")
    parser.add_argument("--engine-only", action="store_true", help="skip the baselines")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ctxfold-eval-cache")
    args = parser.parse_args()
    if not DATA.is_dir():
        print(f"skipped: evaluation data not found at {DATA}")
        return 0
    engine = ctxfold.ContextEngine(encoding="cl100k_base")
    tok = engine.tokenizer
    static = ctxfold.StaticEmbedder(weighted=False)
    minilm = None if args.no_minilm or args.engine_only else MiniLM(args.cache)
    digest = hashlib.blake2b(digest_size=16)
    rows: dict[tuple[str, str], list[tuple[float, float]]] = {}
    times, over = [], 0
    for d, msgs, evidence in load(args.limit):
        total = ctxfold.count_messages([{"role": m["role"], "content": m["content"]} for m in msgs], tokenizer=tok)
        for name in args.budgets.split(","):
            budget = total // 8 if name == "eighth" else int(name)
            t0 = time.perf_counter()
            res = engine.optimize(msgs, query=d["question"], budget=budget, now=asked(d))
            times.append(time.perf_counter() - t0)
            over += res.tokens > budget
            rows.setdefault((name, "ctxfold"), []).append(recall(context_of(res.messages), msgs, evidence, d["answer"]))
            digest.update(json.dumps(res.messages, sort_keys=True, ensure_ascii=False).encode("utf-8"))
            if args.engine_only:
                continue
            texts = [m["content"] for m in msgs]
            dense = {"static": (static.embed(texts), static.embed(d["question"]))}
            if minilm is not None:
                history = History(question_id=f"{DATA.name}/{d['_stem']}", question=d["question"],
                                  turns=texts, evidence=np.zeros(len(texts), dtype=bool))
                dense["minilm"] = (minilm.turn_vectors(history), minilm.embedder.embed(d["question"]))
            for base, kept in baselines(msgs, d["question"], budget, tok, dense).items():
                rows.setdefault((name, base), []).append(recall(context_of(kept), msgs, evidence, d["answer"]))
    print(f"LongMemEval-S, {len(rows.get(('2000', 'ctxfold'), rows.get(next(iter(rows)), [])))} histories; "
          f"optimize median {1e3 * statistics.median(times):.0f} ms, {over} results over budget")
    print(f"{'budget':>8} {'method':>14} {'evidence recall':>16} {'answer in context':>18}")
    for (budget, method), vals in rows.items():
        ev = statistics.mean(v[0] for v in vals)
        ans = statistics.mean(v[1] for v in vals)
        print(f"{budget:>8} {method:>14} {ev:>16.3f} {ans:>18.3f}")
    print(f"digest of the engine's outputs: {digest.hexdigest()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
