"""Anthropic Messages API: fit a long tool-using conversation, with prompt
caching breakpoints, into a budget and get back `(system, messages)` ready
for `client.messages.create`.

Runs offline: the request is validated with the `anthropic` package's own
types and printed in short instead of being sent.

    python examples/anthropic_messages.py
"""

from __future__ import annotations

from typing import Any

from anthropic.types import MessageParam, TextBlockParam
from pydantic import TypeAdapter

from ctxfold.integrations.anthropic import MessageFitter

BUDGET = 2000
EPHEMERAL = {"type": "ephemeral"}
SYSTEM = [{"type": "text", "text": "You are a research assistant. Cite the search results you use.",
           "cache_control": EPHEMERAL}]


def conversation(turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        messages += [
            {"role": "user", "content": f"Find papers on topic {i}: sparse attention variant {i}."},
            {"role": "assistant", "content": [
                {"type": "text", "text": f"Searching for topic {i}."},
                {"type": "tool_use", "id": f"toolu_{i:03d}", "name": "search", "input": {"query": f"topic {i}"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{i:03d}",
                 "content": [{"type": "text", "text": f"Result {i}: " + "abstract sentence about the method; " * 15}]},
            ]},
            {"role": "assistant", "content": f"Topic {i}: three relevant papers, the best from 202{i % 5}."},
        ]
    # Breakpoints: the end of an early turn, the end of the middle, the newest turn.
    messages[3]["content"] = [{"type": "text", "text": messages[3]["content"], "cache_control": EPHEMERAL}]
    messages[2 * turns + 1]["content"][0]["cache_control"] = EPHEMERAL
    messages.append({"role": "user", "content": [
        {"type": "text", "text": "Which paper on topic 7 should I read first?", "cache_control": EPHEMERAL}]})
    return messages


def main() -> None:
    messages = conversation(50)
    fitter = MessageFitter(budget=BUDGET)
    system, fitted = fitter.fit(messages, system=SYSTEM)

    # The SDK's request types (pydantic validates an Iterable field as it is iterated).
    TypeAdapter(list[TextBlockParam]).validate_python(system)
    message_type = TypeAdapter(MessageParam)
    for m in fitted:
        content = message_type.validate_python(m)["content"]
        if not isinstance(content, str):
            list(content)
    print(f"in: {len(messages)} messages; out: {len(fitted)} turns")
    print(fitter.last_result.report.to_text().splitlines()[0])
    breakpoints = [(k, b["type"]) for k, m in enumerate(fitted) if not isinstance(m["content"], str)
                   for b in m["content"] if isinstance(b, dict) and "cache_control" in b]
    print(f"cache breakpoints (turn, block): {breakpoints}; system: {'cache_control' in system[-1]}")
    assert len(breakpoints) + ('cache_control' in system[-1]) <= 4
    print("request: client.messages.create(model=..., max_tokens=1024, system=system, messages=fitted)")


if __name__ == "__main__":
    main()
