"""How much evidence coverage a plan could buy with the engine's ranking, when
what it packs is judged by the words it adds rather than message by message.

Coverage (`eval_context.py`) is the share of each evidence message's content
words found anywhere in the context: a message whose words are already there
adds little, and a few sentences of a long message can add most of what it
would. This script takes the scores `optimize` reports for each message, turns
them into the plan's value (the score over the best, to the power
`SCORE_POWER`, times length over the role's median to `LENGTH_POWER`) and
compares packings of the same budget:

- ``value``: whole messages by value per token while they fit (the plan's
  objective, without its rules for neighbours, protection and date notes);
- ``linear``: whole messages by value plus the worth of every word they hold
  (a word is worth the relevance of each message that uses it, shared over
  that message's words); a sum, so words already present count again;
- ``whole λ``: whole messages grown greedily by what each adds per token,
  its value plus λ times the words it adds, each word counted once (expected
  coverage: monotone and submodular, so the greedy is within 1 - 1/e of the
  best);
- ``sentences λ``: the same over whole messages and single sentences (the
  spans an excerpt quotes, `quotable_spans`), a sentence worth λ times the
  words it adds; once a message has sentences in, its whole form costs the
  rest of it.

Printed per budget: verbatim and coverage, what `optimize` keeps in the same
run beside them. The gap between ``value`` and ``optimize`` is what the plan's
rules add; the gap between ``value`` and the others, what an objective of
words counted once could.

    python benches/bound_coverage.py [--sets beam] [--budgets eighth,fixed] [--lambdas 0.25,0.5,1] [--limit N]
"""

from __future__ import annotations

import argparse
import heapq
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import ctxfold
from ctxfold.engine.excerpts import EXCERPT_GAP, EXCERPT_MARKER, quotable_spans
from ctxfold.engine.options import LENGTH_POWER, SCORE_POWER

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eval_context as ec  # noqa: E402


class Chat:
    """One conversation's messages, their chat costs, words and quotable spans."""

    def __init__(self, msgs: Sequence[dict[str, Any]], tokenizer: ctxfold.Tokenizer) -> None:
        self.texts = [m["content"] for m in msgs]
        self.roles = [m["role"] for m in msgs]
        self.costs = [int(c) for c in ctxfold.tokens.message_costs(
            [{"role": m["role"], "content": m["content"]} for m in msgs], tokenizer)]
        sizes = [int(c) for c in tokenizer.count(self.texts)]
        self.words = [ec.words(t) for t in self.texts]
        # A quoted sentence pays its tokens and a gap; the first one of a
        # message also the message's chat cost beyond its text, and the marker.
        gap, marker = int(tokenizer.count(EXCERPT_GAP)), int(tokenizer.count(EXCERPT_MARKER))
        self.opening = [c - s + marker for c, s in zip(self.costs, sizes)]
        self.spans: list[list[tuple[set[str], int]]] = []
        for text in self.texts:
            parts = [text[a:b] for a, b in quotable_spans(text)]
            counted: Sequence[int] = [int(c) for c in tokenizer.count(parts)] if len(parts) > 1 else []
            self.spans.append([(ec.words(p), int(n) + gap) for p, n in zip(parts, counted)])
        medians = {r: float(np.median([s for s, q in zip(sizes, self.roles) if q == r])) for r in set(self.roles)}
        self.length = np.array([(max(s, 1) / max(medians[r], 1.0)) ** LENGTH_POWER for s, r in zip(sizes, self.roles)])


def relevance(chat: Chat, scores: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
    """The plan's value of each message, and each word's worth: the value of
    the messages that use it, each message's shared over its words."""
    top = float(scores.max())
    p = np.clip(scores / top, 0.0, 1.0) ** SCORE_POWER if top > 0 else np.zeros_like(scores)
    worth: dict[str, float] = {}
    for share, ws in zip(p, chat.words):
        if share > 0 and ws:
            for w in ws:
                worth[w] = worth.get(w, 0.0) + share / len(ws)
    return p * chat.length, worth


def _words_of(chat: Chat, chosen: Sequence[int]) -> set[str]:
    out: set[str] = set()
    for i in chosen:
        out |= chat.words[i]
    return out


def pack_greedy(chat: Chat, value: np.ndarray, worth: dict[str, float], budget: int, lam: float,
                sentences: bool) -> tuple[set[str], set[int]]:
    """Lazy greedy by gain per token: whole messages, each worth its value
    plus `lam` times the words it adds, and with `sentences` single
    sentences, worth `lam` times the words they add. Returns the context's
    words and the whole messages."""
    room = budget - ctxfold.tokens.REPLY_PRIMING
    have: set[str] = set()
    whole: set[int] = set()
    opened: dict[int, int] = {}  # message -> tokens of its sentences taken
    taken: set[tuple[int, int]] = set()
    weight = lam
    units: list[tuple[int, int]] = [(i, -1) for i in range(len(value))]
    if sentences:
        units += [(i, k) for i, spans in enumerate(chat.spans) for k in range(len(spans))]

    def cost(u: tuple[int, int]) -> int:
        i, k = u
        if k < 0:
            # Once sentences of it are in, the whole message costs about the rest of it.
            return max(1, chat.costs[i] - opened[i] - chat.opening[i]) if i in opened else chat.costs[i]
        return chat.spans[i][k][1] + (0 if i in opened else chat.opening[i])

    def gain(u: tuple[int, int]) -> float:
        i, k = u
        if i in whole or u in taken:
            return 0.0
        ws = chat.words[i] if k < 0 else chat.spans[i][k][0]
        added = weight * sum(worth.get(w, 0.0) for w in ws - have)
        return added + (float(value[i]) if k < 0 else 0.0)

    heap = [(-gain(u) / max(cost(u), 1), j) for j, u in enumerate(units)]
    heapq.heapify(heap)
    while heap:
        _, j = heapq.heappop(heap)
        u = units[j]
        c = cost(u)
        if u[0] in whole or u in taken or c > room:
            continue
        ratio = gain(u) / max(c, 1)
        if heap and ratio < -heap[0][0] - 1e-12:
            heapq.heappush(heap, (-ratio, j))
            continue
        if ratio <= 0:
            break
        room -= c
        i, k = u
        if k < 0:
            whole.add(i)
            have |= chat.words[i]
        else:
            taken.add(u)
            have |= chat.spans[i][k][0]
            opened[i] = opened.get(i, 0) + chat.spans[i][k][1]
            # Its whole form now costs only the rest of the message: weigh it again.
            heapq.heappush(heap, (-gain((i, -1)) / max(cost((i, -1)), 1), i))
    return have, whole


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="beam")
    parser.add_argument("--budgets", default="eighth,fixed")
    parser.add_argument("--lambdas", default="0.25,0.5,1")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    if not (ec.SHARED / "data").is_dir():
        print(f"skipped: no evaluation data at {ec.SHARED / 'data'}")
        return 0
    lambdas = [float(x) for x in args.lambdas.split(",")]
    methods = ["optimize", "value", "linear", *(f"whole {lam:g}" for lam in lambdas),
               *(f"sentences {lam:g}" for lam in lambdas)]
    engine = ctxfold.ContextEngine(encoding="cl100k_base")
    for name in args.sets.split(","):
        rows: dict[str, dict[str, list[tuple[float, float]]]] = {}
        for _unit, msgs, qs in ec.load_set(name, args.limit):
            chat = Chat(msgs, engine.tokenizer)
            by_id = {m["id"]: m["content"] for m in msgs}
            index = {m["id"]: i for i, m in enumerate(msgs)}
            total = int(sum(ctxfold.count_tokens(chat.texts, encoding="cl100k_base")))
            for q in qs:
                evidence = [index[e] for e in q.evidence]
                for label, budget in ec.budgets(name, total, args.budgets):
                    res = engine.optimize(msgs, query=q.text, budget=budget, now=q.now)
                    scores = np.zeros(len(msgs))
                    for item in res.items:
                        scores[item.index] = item.score
                    value, worth = relevance(chat, scores)
                    out = rows.setdefault(label, {m: [] for m in methods})
                    out["optimize"].append(ec.measure(ec.context_text(res.messages), by_id, q.evidence, True))

                    def measured(have: set[str], whole: set[int]) -> tuple[float, float]:
                        verbatim = sum(i in whole for i in evidence) / len(evidence)
                        return verbatim, float(np.mean([len(chat.words[i] & have) / max(1, len(chat.words[i]))
                                                        for i in evidence]))

                    for method, ranked in (("value", value), ("linear", value + np.array(
                            [sum(worth.get(w, 0.0) for w in ws) for ws in chat.words]))):
                        order = sorted(range(len(ranked)), key=lambda i: -ranked[i] / max(chat.costs[i], 1))
                        chosen = ec.fit_in_order(order, chat.costs, budget)
                        out[method].append(measured(_words_of(chat, chosen), set(chosen)))
                    for lam in lambdas:
                        out[f"whole {lam:g}"].append(measured(*pack_greedy(chat, value, worth, budget, lam, False)))
                        out[f"sentences {lam:g}"].append(measured(*pack_greedy(chat, value, worth, budget, lam, True)))
        print(f"\n## {ec.NAMES[name]}: verbatim / coverage")
        print(f"{'budget':>8}" + "".join(f"{m:>18}" for m in methods))
        for label, out in rows.items():
            print(f"{label:>8}" + "".join(
                f"{np.mean([v for v, _ in out[m]]):9.4f}{np.mean([c for _, c in out[m]]):9.4f}" for m in methods))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
