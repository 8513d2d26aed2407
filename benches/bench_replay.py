"""Replay growing conversations turn by turn at a fixed budget and price the prompts.

Each conversation is replayed as an agent sends it: at every user turn (and
every tool round) the history so far goes through a context policy, and the
result is what the model would be sent. At the end the conversation's
question(s) are asked the same way. Per policy: the share of prompt tokens a
provider's prompt cache serves (the longest run of leading messages equal to
those of a prompt still cached: one of the last `CACHE_LIFETIME` prompts sent
or read from), the input billed under `CachePricing` (cached tokens at
`read`, the rest written at `write`), evidence recall at the questions (share
of evidence messages kept verbatim; for the tool sessions, the line of the
result that answers), how often the message just before the user's turn is
in the prompt verbatim (what a follow-up reads), time per turn, and turns
over budget.

Policies: re-planning every turn (`ContextEngine.optimize`), the cache-aware
session (`ContextEngine.session`), LangChain's `trim_messages` (last messages
that fit) and LangChain's `ContextEditingMiddleware` rule (`ClearToolUsesEdit`:
past the budget, clear the oldest tool results, keep 3, clear at least a
quarter of the budget), run through the edit's own code.

Conversations: LongMemEval-S dev histories and BEAM 100K chats from
../shared/data (skipped with a message when absent), and tool-heavy agent
sessions generated here (search results of 300-1,500 tokens; the question
asks for a figure from an early one).

    python benches/bench_replay.py [--budget 8000] [--lme 20] [--beam 20] [--tools 6]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ctxfold
from ctxfold import CachePricing, ContextEngine
from ctxfold.tokens import message_costs

DATA = Path(os.environ.get("CTXFOLD_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
API_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")
#: How many prompts later a cached prefix is still served: providers keep it for minutes after it was last
#: written or read (Anthropic five, OpenAI five to ten), that is, a few turns of an agent or a chat.
CACHE_LIFETIME = 3
SESSION_OPTIONS: dict[str, Any] = {}


class Conversation:
    def __init__(self, name: str, messages: list[dict[str, Any]], questions: list[tuple[str, list[str]]]) -> None:
        self.name = name
        self.messages = messages
        self.questions = questions  # (question, the evidence: texts the context must hold verbatim)


# --- conversations -----------------------------------------------------------------------


def lme(limit: int) -> Iterator[Conversation]:
    root = DATA / "conversations" / "longmemeval_s"
    for f in sorted(root.glob("*.json"))[:limit]:
        d = json.loads(f.read_text(encoding="utf-8"))
        msgs, evidence = [], []
        for si, session in enumerate(d["haystack_sessions"]):
            for ti, turn in enumerate(session):
                mid = f"S{si}:{ti}"
                msgs.append({"role": turn["role"], "content": turn["content"], "id": mid})
                if turn.get("has_answer"):
                    evidence.append(mid)
        if evidence:
            by_id = {m["id"]: m["content"] for m in msgs}
            yield Conversation(f"lme/{f.stem}", msgs, [(d["question"], [by_id[e] for e in evidence])])


def beam(limit: int, questions: int = 6) -> Iterator[Conversation]:
    root = DATA / "conversations" / "beam_100k"
    chats = sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: int(p.name) if p.name.isdigit() else 0)
    for chat in chats[:limit]:
        msgs = []
        for batch in json.loads((chat / "chat.json").read_text(encoding="utf-8")):
            for session in batch["turns"]:
                msgs += [{"role": t["role"], "content": t["content"], "id": str(t["id"])} for t in session]
        ids = {m["id"] for m in msgs}
        asked = []
        probing = json.loads((chat / "probing_questions" / "probing_questions.json").read_text(encoding="utf-8"))
        for category in sorted(probing):
            for q in probing[category]:
                src = q.get("source_chat_ids")
                ev = [str(x) for v in (src.values() if isinstance(src, dict) else [src or []]) for x in v]
                ev = [e for e in dict.fromkeys(ev) if e in ids]
                if ev:
                    by_id = {m["id"]: m["content"] for m in msgs}
                    asked.append((q["question"], [by_id[e] for e in ev]))
                    break
        yield Conversation(f"beam/{chat.name}", msgs, asked[:questions])


WORDS = ("account region latency deploy invoice ticket customer order shipment warehouse refund policy "
         "server cluster replica backup quota budget forecast contract renewal vendor supplier audit").split()


def tool_sessions(count: int, turns: int = 40, seed: int = 7) -> Iterator[Conversation]:
    """Agent sessions: each turn a request, a search call, a long result, a short answer."""
    for n in range(count):
        rng = random.Random(seed + n)
        msgs: list[dict[str, Any]] = [{"role": "system", "content": "You are an operations assistant with a search tool."}]
        facts: list[tuple[str, str, str]] = []
        for t in range(turns):
            topic = f"{rng.choice(WORDS)}-{rng.randrange(100, 999)}"
            figure = f"{rng.randrange(1000, 99999)} EUR"
            fact = f"Record {topic}: the reconciled total is {figure} as of day {t + 1}."
            facts.append((topic, fact))
            lines = [fact]
            for _ in range(rng.randrange(20, 100)):
                lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randrange(8, 16))) + ".")
            rng.shuffle(lines)
            call_id = f"call_{n}_{t}"
            msgs += [
                {"role": "user", "content": f"Look up {topic} and tell me where it stands.", "id": f"u{n}-{t}"},
                {"role": "assistant", "content": None, "id": f"a{n}-{t}", "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": "search", "arguments": json.dumps({"q": topic})}}]},
                {"role": "tool", "tool_call_id": call_id, "content": "\n".join(lines), "id": f"r{n}-{t}"},
                {"role": "assistant", "content": f"{topic} is reconciled; details are in the record.", "id": f"b{n}-{t}"},
            ]
        # The evidence is the one line of the result that answers, wherever the rest of it went.
        asked = [(f"What was the reconciled total of {topic}?", [fact]) for topic, fact in
                 (facts[i] for i in rng.sample(range(turns // 2), 3))]
        yield Conversation(f"tools/{n}", msgs, asked)


# --- policies -----------------------------------------------------------------------------


class Policy:
    name = ""

    def __init__(self, engine: ContextEngine, budget: int) -> None:
        self.engine = engine
        self.budget = budget
        self.compactions: dict[str, int] = {}

    def start(self) -> None:
        """A new conversation."""

    def fit(self, messages: list[dict[str, Any]], query: str | None = None) -> list[dict[str, Any]]:
        raise NotImplementedError

    def branch(self) -> Policy:
        """A copy whose calls do not change this one (for the end-of-conversation questions)."""
        return copy.copy(self)


class Replan(Policy):
    name = "re-plan every turn"

    def fit(self, messages, query=None):
        return self.engine.optimize(messages, query=query, budget=self.budget).messages


class Session(Policy):
    name = "cache-aware session"

    def start(self) -> None:
        self.session = self.engine.session(pricing=CachePricing.anthropic(), **SESSION_OPTIONS)

    def fit(self, messages, query=None):
        result = self.session.optimize(messages, query=query, budget=self.budget)
        if not result.report.cache.kept:
            why = result.report.cache.reason
            kind = ("one-off" if result.report.cache.one_off else "overflow" if "exceed" in why
                    else "quote" if "question" in why else "price" if "saves" in why else "start")
            self.compactions[kind] = self.compactions.get(kind, 0) + 1
        return result.messages

    def branch(self) -> Policy:
        other = copy.copy(self)
        other.session = copy.copy(self.session)
        return other


def _langchain_messages(messages: list[dict[str, Any]]) -> list[Any]:
    from langchain_core.messages import convert_to_messages

    return convert_to_messages([{k: v for k, v in m.items() if k in API_KEYS} for m in messages])


def _langchain_counter(engine: ContextEngine) -> Callable[[list[Any]], int]:
    from ctxfold.integrations.langchain import to_openai_dicts

    return lambda msgs: engine.count(to_openai_dicts(msgs))


class Trim(Policy):
    name = "trim_messages (last)"

    def fit(self, messages, query=None):
        from langchain_core.messages import trim_messages
        from ctxfold.integrations.langchain import to_openai_dicts

        kept = trim_messages(_langchain_messages(messages), max_tokens=self.budget, strategy="last",
                             token_counter=_langchain_counter(self.engine), include_system=True,
                             start_on="human", allow_partial=False)
        return to_openai_dicts(kept)


class ClearToolUses(Policy):
    name = "ContextEditing ClearToolUses"

    def fit(self, messages, query=None):
        from langchain.agents.middleware.context_editing import ClearToolUsesEdit
        from ctxfold.integrations.langchain import to_openai_dicts

        edited = _langchain_messages(messages)
        ClearToolUsesEdit(trigger=self.budget, keep=3, clear_at_least=self.budget // 4).apply(
            edited, count_tokens=_langchain_counter(self.engine))
        return to_openai_dicts(edited)


# --- replay -------------------------------------------------------------------------------


def turn_ends(messages: list[dict[str, Any]]) -> list[int]:
    """Where an agent calls the model: after each user message and each tool round."""
    ends = []
    for i, m in enumerate(messages):
        following = messages[i + 1]["role"] if i + 1 < len(messages) else None
        if m["role"] == "user" or (m["role"] == "tool" and following != "tool"):
            ends.append(i + 1)
    return ends


class Tally:
    def __init__(self) -> None:
        self.prompt = self.cached = 0
        self.billed = 0.0
        self.seconds: list[float] = []
        self.over = 0
        self.recall: list[float] = []
        self.follow: list[bool] = []
        # The prompts still cached, each with how many prompts ago it was last written or read.
        self.cached_prompts: list[tuple[list[bytes], int]] = []

    def prompt_sent(self, messages: list[dict[str, Any]], engine: ContextEngine, budget: int, seconds: float,
                    pricing: CachePricing) -> None:
        costs = message_costs(messages, engine.tokenizer)
        keys = [json.dumps({k: m.get(k) for k in API_KEYS}, sort_keys=True).encode() for m in messages]
        total = sum(costs) + 3
        cached, read = 0, None
        for n, (prompt, _) in enumerate(self.cached_prompts):
            served = 0
            for key, cost, earlier in zip(keys, costs, prompt):
                if key != earlier:
                    break
                served += cost
            if served > cached:
                cached, read = served, n
        self.cached_prompts = [(prompt, 0 if n == read else age + 1) for n, (prompt, age) in enumerate(self.cached_prompts)
                               if n == read or age + 1 < CACHE_LIFETIME] + [(keys, 0)]
        self.prompt += total
        self.cached += cached
        self.billed += pricing.billed(cached, total - cached)
        self.seconds.append(seconds)
        self.over += total > budget


def replay(conv: Conversation, policy: Policy, tally: Tally, pricing: CachePricing) -> None:
    policy.start()
    tally.cached_prompts = []
    for end in turn_ends(conv.messages):
        history = [dict(m) for m in conv.messages[:end]]
        started = time.perf_counter()
        out = policy.fit(history)
        tally.prompt_sent(out, policy.engine, policy.budget, time.perf_counter() - started, pricing)
        before = history[-2].get("content") if len(history) > 1 and history[-1]["role"] == "user" else None
        if isinstance(before, str) and before:
            tally.follow.append(any(isinstance(m.get("content"), str) and before in m["content"] for m in out))
    full = [dict(m) for m in conv.messages]
    for question, evidence in conv.questions:
        branch = policy.branch()
        out = branch.fit(full + [{"role": "user", "content": question, "id": "question"}], query=question)
        context = "\n".join(m["content"] if isinstance(m.get("content"), str) else "" for m in out)
        tally.recall.append(sum(e in context for e in evidence) / len(evidence))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=int, default=8000)
    parser.add_argument("--lme", type=int, default=20, help="LongMemEval-S dev histories")
    parser.add_argument("--beam", type=int, default=20, help="BEAM 100K chats")
    parser.add_argument("--tools", type=int, default=6, help="generated tool-heavy sessions")
    parser.add_argument("--reserve", type=float, default=None, help="the session's reserve (default: its own)")
    parser.add_argument("--recall-top", type=int, default=None, help="the session's recall_top (default: its own)")
    parser.add_argument("--quote-share", type=float, default=None, help="the session's quote_share (default: its own)")
    args = parser.parse_args()
    if args.reserve is not None:
        SESSION_OPTIONS["reserve"] = args.reserve
    if args.recall_top is not None:
        SESSION_OPTIONS["recall_top"] = args.recall_top
    if args.quote_share is not None:
        SESSION_OPTIONS["quote_share"] = args.quote_share
    pricing = CachePricing.anthropic()
    engine = ContextEngine(encoding="cl100k_base")
    sets: dict[str, list[Conversation]] = {"tool sessions": list(tool_sessions(args.tools))}
    if (DATA / "conversations").is_dir():
        sets["LongMemEval-S dev"] = list(lme(args.lme))
        sets["BEAM 100K"] = list(beam(args.beam))
    else:
        print(f"skipped LongMemEval and BEAM: evaluation data not found at {DATA} (set CTXFOLD_SHARED_DATA)")
    policies: list[type[Policy]] = [Replan, Session]
    try:
        import langchain.agents.middleware.context_editing  # noqa: F401
        import langchain_core  # noqa: F401

        policies += [Trim, ClearToolUses]
    except ImportError:
        print("skipped trim_messages and ContextEditingMiddleware: langchain is not installed")
    print(f"ctxfold {ctxfold.__version__}, budget {args.budget}, pricing read {pricing.read} write {pricing.write}")
    for set_name, conversations in sets.items():
        if not conversations:
            continue
        turns = sum(len(turn_ends(c.messages)) for c in conversations)
        print(f"\n{set_name}: {len(conversations)} conversations, {turns} turns, "
              f"{sum(len(c.questions) for c in conversations)} questions")
        print("| policy | prompt tokens from cache | billed input (x replan) | evidence recall "
              "| previous message verbatim | ms/turn (median) | turns over budget |")
        print("|---|---|---|---|---|---|---|")
        base = None
        for kind in policies:
            policy = kind(engine, args.budget)
            tally = Tally()
            for conv in conversations:
                replay(conv, policy, tally, pricing)
            base = tally.billed if base is None else base
            print(f"| {policy.name} | {tally.cached / tally.prompt:.3f} | {tally.billed / base:.3f} | "
                  f"{statistics.mean(tally.recall):.3f} | {statistics.mean(tally.follow):.3f} | "
                  f"{1000 * statistics.median(tally.seconds):.1f} | {tally.over} |",
                  flush=True)
            if policy.compactions:
                print(f"  ({policy.name}: prefix rewritten after " +
                      ", ".join(f"{v} {k}" for k, v in sorted(policy.compactions.items())) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
