"""The engine's outputs on a fixed set of generated agent conversations,
every strategy, three budgets, reduced to one digest. A change meant to
leave behaviour alone (a refactor, a move) must leave the digest alone; a
change of behaviour updates it in the same commit and says why.

To print the digest of the current tree: ``python tests/test_output_digest.py``.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys

import ctxfold

EXPECTED = "441b0a685a68adc06964d4ee5fbe7032"

WORDS = (
    "deploy database index migration latency cache invoice customer report budget schedule meeting "
    "Berlin Paris Alice Bob Kate payment service retry timeout queue worker build test release bug "
    "fix review design config token model prompt summary memory vector search result error log file"
).split()


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(5, 16))]
    if rng.random() < 0.3:
        words.append(str(rng.randint(2, 2030)))
    return " ".join(words).capitalize() + rng.choice([".", ".", "?", "!"])


def _text(rng: random.Random, sentences: tuple[int, int]) -> str:
    return " ".join(_sentence(rng) for _ in range(rng.randint(*sentences)))


def conversation(seed: int) -> list[dict[str, object]]:
    """A user/assistant history with tool rounds, long tool outputs,
    timestamps and a few marked kinds, ending on a user question."""
    rng = random.Random(seed)
    messages: list[dict[str, object]] = [{"role": "system", "content": "You are a careful assistant."}]
    calls = 0
    for turn in range(rng.randint(15, 45)):
        stamp = f"2024-03-{1 + turn % 28:02d}T{8 + turn % 12:02d}:30:00Z"
        messages.append({"role": "user", "content": _text(rng, (1, 3)), "timestamp": stamp})
        if rng.random() < 0.3:
            calls += 1
            call_id = f"call_{seed}_{calls}"
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": rng.choice(["search", "read_file", "run"]),
                                                                 "arguments": json.dumps({"q": rng.choice(WORDS)})}}]})
            messages.append({"role": "tool", "tool_call_id": call_id, "content": _text(rng, (8, 40)),
                             "kind": rng.choice(["tool_result", "file_read", "debug_log"])})
        reply: dict[str, object] = {"role": "assistant", "content": _text(rng, (2, 12)), "timestamp": stamp}
        if rng.random() < 0.05:
            reply["kind"] = "decision"
        messages.append(reply)
    messages.append({"role": "user", "content": _text(rng, (1, 2)) + " What did we decide?"})
    return messages


def digest() -> str:
    h = hashlib.blake2b(digest_size=16)
    for seed in range(8):
        messages = conversation(seed)
        total = ctxfold.count_messages(messages, encoding="cl100k_base")
        for strategy in ("optimal", "windowed", "compacted", "multi_level"):
            # The table alone reads the question: MiniLM's float kernels differ in the last bits from one
            # CPU to another, which could tip a near-tie and the digest with it.
            engine = ctxfold.ContextEngine(encoding="cl100k_base",
                                           config=ctxfold.EngineConfig(strategy=strategy, embed_query=False))
            for budget in (total // 8, total // 3, 1500):
                result = engine.optimize(messages, budget=max(budget, 600))
                h.update(json.dumps([result.messages, [(i.id, i.status, i.tokens_out) for i in result.items]],
                                    sort_keys=True, default=str).encode("utf-8"))
    return h.hexdigest()


def test_outputs_are_unchanged() -> None:
    assert digest() == EXPECTED, (
        "optimize's outputs changed; if the change of behaviour is meant, set EXPECTED to the new digest "
        "(python tests/test_output_digest.py) and say why in the commit"
    )


if __name__ == "__main__":
    print(digest())
    sys.exit(0)
