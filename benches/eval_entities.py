"""Entity recall of the optimised context on the dev sets (../shared/data):
for each question, the share of its evidence messages' entities (names,
places, organisations, dates, times, amounts, paths, code, versions:
`ctxfold.text.entities.entity_recall`) that the context `ContextEngine.optimize`
builds still holds, next to the same share for recency (newest messages
while they fit), at the budgets of eval_context.py (1/8 of the history and a
fixed budget per set). Questions whose evidence names no entity count as 1.

    python benches/eval_entities.py [--sets lme,beam,realtalk] [--limit N] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import ctxfold
import ctxfold.tokens
from ctxfold.text.entities import entity_recall

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_context import CHECKS, FIXED, MIN_BUDGET, NAMES, SHARED, context_text, fit_in_order, load_set  # noqa: E402


def evaluate(name: str, limit: int | None, engine: Any) -> list[dict[str, Any]]:
    records = []
    for unit, msgs, questions in load_set(name, limit):
        by_id = {m["id"]: m["content"] for m in msgs}
        costs = ctxfold.tokens.message_costs([{"role": m["role"], "content": m["content"]} for m in msgs],
                                             engine.tokenizer)
        total = int(sum(ctxfold.count_tokens([m["content"] for m in msgs], encoding="cl100k_base")))
        for q in questions:
            evidence = "\n".join(by_id[e] for e in q.evidence if e in by_id)
            for label, budget in (("1/8", total // 8), (f"{FIXED[name]:,}", FIXED[name])):
                if budget < MIN_BUDGET:
                    continue
                try:
                    kept = engine.optimize(msgs, query=q.text, budget=budget).messages
                except ctxfold.BudgetError:
                    kept = []
                recent = [msgs[i] for i in fit_in_order(range(len(msgs) - 1, -1, -1), costs, budget)]
                for method, context in (("ctxfold", kept), ("recency", recent)):
                    records.append({"set": name, "unit": unit, "budget": label, "method": method,
                                    "entity_recall": entity_recall(evidence, context_text(context))})
    return records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="lme,beam,realtalk", help="any of lme, oracle, beam, realtalk")
    parser.add_argument("--limit", type=int, default=None, help="the first N chats or histories of each set")
    parser.add_argument("--json", type=Path, default=None, help="write every record here")
    args = parser.parse_args()
    sets = [s for s in args.sets.split(",") if s]
    if set(sets) - set(FIXED):
        parser.error(f"--sets: unknown {sorted(set(sets) - set(FIXED))}; use {', '.join(FIXED)}")
    if not (CHECKS / "common.py").is_file() or not (SHARED / "data" / "conversations").is_dir():
        print(f"skipped: evaluation data or its loaders not found under {SHARED} (set CTXFOLD_SHARED_DATA)")
        return 0
    engine = ctxfold.ContextEngine(encoding="cl100k_base")
    records: list[dict[str, Any]] = []
    print(f"{'set':<20} {'budget':>6} {'questions':>9} {'ctxfold':>8} {'recency':>8}")
    for name in sets:
        found = evaluate(name, args.limit, engine)
        records += found
        for budget in dict.fromkeys(r["budget"] for r in found):
            rows = {m: [r["entity_recall"] for r in found if r["budget"] == budget and r["method"] == m]
                    for m in ("ctxfold", "recency")}
            print(f"{NAMES[name]:<20} {budget:>6} {len(rows['ctxfold']):>9} "
                  f"{statistics.mean(rows['ctxfold']):>8.3f} {statistics.mean(rows['recency']):>8.3f}")
    if args.json:
        args.json.write_text(json.dumps(records), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
