"""The conversation arc and the entity repository of every BEAM 100K chat:
what ``result.report.arc`` and ``result.report.entities`` hold after
``ContextEngine().optimize(chat, budget=...)``.

Per chat: messages, topics, open questions, decisions, pending and
completed actions, entities, and the time to read the arc from the report
(a fresh engine: the arc's own cost, after optimize has embedded the
messages). ``--show CHAT`` prints that chat's arc as ``report.to_text()``
shows it.

    python benches/arc_beam.py [--show 1] [--budget 4000] [--limit N]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_context import CHECKS, SHARED  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=int, default=4000)
    parser.add_argument("--show", default=None, help="a chat id whose arc to print in full")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    if not (SHARED / "data" / "conversations" / "beam_100k").is_dir():
        print(f"skipped: BEAM data not found under {SHARED / 'data'} (set CTXFOLD_SHARED_DATA)")
        return 0
    sys.path.insert(0, str(CHECKS))
    import common  # type: ignore[import-not-found]  (../shared/checks/common.py)

    from ctxfold import ContextEngine

    header = f"{'chat':>4} {'msgs':>5} {'topics':>6} {'open q':>6} {'decis.':>6} {'pending':>7} {'done':>5} {'entities':>8} {'arc ms':>7}"
    print(header)
    print("-" * len(header))
    shown = None
    for k, (chat, msgs, _) in enumerate(common.beam_chats()):
        if args.limit is not None and k >= args.limit:
            break
        engine = ContextEngine(model="gpt-4o")
        res = engine.optimize(msgs, budget=args.budget)
        start = time.perf_counter()
        arc = res.report.arc
        ms = (time.perf_counter() - start) * 1e3
        repo = res.report.entities
        entities = str(len(repo)) if repo is not None else "-"
        print(f"{chat:>4} {len(msgs):>5} {len(arc.topics):>6} {len(arc.open_questions):>6} {len(arc.decisions):>6} "
              f"{len(arc.pending):>7} {len(arc.completed):>5} {entities:>8} {ms:>7.1f}")
        if str(chat) == args.show:
            shown = (chat, res, repo)
    if shown is not None:
        chat, res, repo = shown
        print(f"\nchat {chat}: report.arc.to_text()\n")
        print(res.report.arc.to_text(limit=3))
        if repo is not None:
            from ctxfold.text.entities import CLAUSE_TYPES

            names = sorted((r for r in repo if r.type not in CLAUSE_TYPES), key=lambda r: (-repo.importance(r), -r.count))
            print(f"\nreport.entities: {len(repo)} entities, {len(repo.active())} active; the most important names:")
            print("  " + ", ".join(f"{r.name} ({r.type}, {r.count} mentions)" for r in names[:8]))
            clauses = [r for r in repo if r.type in CLAUSE_TYPES and repo.is_active(r)]
            for r in clauses[-3:]:
                print(f"  active {r.type.replace('_', ' ')}: {r.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
