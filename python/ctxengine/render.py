"""Applying a plan: summaries written, placeholders set, dropped messages
left out, and the exact token count of what comes out."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from ctxengine._core import Tokenizer
from ctxengine.compaction import placeholder
from ctxengine.plan import CLEAR, DROP, KEEP, SUMMARY, SUMMARY_MARKER, Plan, hard_protected, tool_groups
from ctxengine.summarize import Summarizer
from ctxengine.tokens import count_messages
from ctxengine.types import Item, ItemResult

__all__ = ["render"]

STATUS = {KEEP: "kept", SUMMARY: "summarized", CLEAR: "cleared", DROP: "dropped"}


def render(
    items: Sequence[Item],
    plan: Plan,
    scores: np.ndarray,
    layers: dict[str, np.ndarray],
    budget: int,
    tokenizer: Tokenizer,
    summarizer: Summarizer,
    query: str,
    cache: dict[tuple[str, int], str] | None = None,
) -> tuple[list[dict[str, Any]], int, list[ItemResult]]:
    contents = _summaries(items, plan, summarizer, query, {} if cache is None else cache)
    for i, it in enumerate(items):
        if plan.choices[i] == CLEAR:
            contents[i] = placeholder(it)
    messages, kept = _assemble(items, plan.choices, contents, plan.gap_markers)
    total = count_messages(messages, tokenizer=tokenizer)
    # The plan's costs are upper bounds (gap markers excepted), so this is a
    # guard: drop the least valuable droppable message, with its tool group.
    groups = tool_groups(items)
    order = sorted((i for i in kept if not hard_protected(items[i])), key=lambda i: plan.values[i])
    while total > budget and order:
        first = order.pop(0)
        for j in range(len(items)):
            if j == first or (groups[first] >= 0 and groups[j] == groups[first]):
                plan.choices[j] = DROP
        messages, kept = _assemble(items, plan.choices, contents, plan.gap_markers)
        total = count_messages(messages, tokenizer=tokenizer)
    results = [
        ItemResult(
            id=it.id, index=it.index, role=it.role, status=STATUS[plan.choices[i]], tokens_in=it.tokens,
            tokens_out=_tokens_out(it, plan.choices[i], contents.get(i), tokenizer),
            score=float(scores[i]), layers={k: float(v[i]) for k, v in layers.items()},
        )
        for i, it in enumerate(items)
    ]
    return messages, total, results


def _summaries(
    items: Sequence[Item], plan: Plan, summarizer: Summarizer, query: str, cache: dict[tuple[str, int], str]
) -> dict[int, str]:
    """Summaries of the planned items; a (text, target) pair summarised before is
    taken from `cache` (keyed by content hash), so a conversation that grows by a
    turn re-summarises nothing old."""
    texts = {i: str(items[i].message.get("content") or "") for i in plan.summary_targets}
    keys = {i: (hashlib.sha256(t.encode("utf-8")).hexdigest(), plan.summary_targets[i]) for i, t in texts.items()}
    missing = sorted(i for i in texts if keys[i] not in cache)
    if missing:
        fresh = summarizer.summarize([texts[i] for i in missing], [plan.summary_targets[i] for i in missing], query=query or None)
        cache.update({keys[i]: s for i, s in zip(missing, fresh)})
    return {i: SUMMARY_MARKER + cache[keys[i]] for i in texts}


def _assemble(
    items: Sequence[Item], choices: list[int], contents: dict[int, str], gap_markers: bool = False
) -> tuple[list[dict[str, Any]], list[int]]:
    messages: list[dict[str, Any]] = []
    kept: list[int] = []
    omitted = 0
    for i, it in enumerate(items):
        if choices[i] == DROP:
            omitted += 1
            continue
        if gap_markers and omitted:
            messages.append({"role": "system", "content": f"[... {omitted} messages omitted ...]"})
        omitted = 0
        message = dict(it.message)
        if choices[i] in (SUMMARY, CLEAR) and i in contents:
            message["content"] = contents[i]
        messages.append(message)
        kept.append(i)
    return messages, kept


def _tokens_out(it: Item, choice: int, content: str | None, tokenizer: Tokenizer) -> int:
    if choice == DROP:
        return 0
    if choice == KEEP or content is None:
        return it.tokens
    return count_messages([{**it.message, "content": content}], tokenizer=tokenizer) - 3
