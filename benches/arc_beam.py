"""The conversation arc (and the entity repository, when this ctxfold has
one) for every BEAM 100K chat: what ``result.report.arc`` holds after
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


def entity_repository(messages):  # type: ignore[no-untyped-def]
    """The chat's `EntityRepository`, or None where this ctxfold has none."""
    import importlib

    for module in ("ctxfold.text.entity_repository", "ctxfold.text.entities", "ctxfold.entity_repository"):
        try:
            repository = getattr(importlib.import_module(module), "EntityRepository", None)
        except ImportError:
            continue
        if repository is not None:
            return repository.from_messages(messages)
    return None


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
        repo = entity_repository(msgs)
        entities = "-" if repo is None else str(len(repo))
        print(f"{chat:>4} {len(msgs):>5} {len(arc.topics):>6} {len(arc.open_questions):>6} {len(arc.decisions):>6} "
              f"{len(arc.pending):>7} {len(arc.completed):>5} {entities:>8} {ms:>7.1f}")
        if str(chat) == args.show:
            shown = (chat, res, repo)
    if shown is not None:
        chat, res, repo = shown
        print(f"\nchat {chat}: report.arc.to_text()\n")
        print(res.report.arc.to_text(limit=3))
        if repo is not None:
            top = sorted(repo, key=lambda r: (-repo.importance(r), -r.count))[:8]
            print("\nentities (most important first): " + ", ".join(f"{r.name} ({r.type}, {r.count})" for r in top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
