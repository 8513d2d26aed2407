"""Applying a plan: summaries written, placeholders set, dropped messages
left out, and the exact token count of what comes out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ctxfold._core import Tokenizer
from ctxfold.compaction import Edit, placeholder
from ctxfold.engine_cache import EngineCache, content_hash
from ctxfold.multilevel import Chunk, chunk_marker
from ctxfold.plan import CLEAR, DROP, KEEP, SUMMARY, SUMMARY_MARKER, Plan, hard_protected, tool_groups
from ctxfold.summarize import Summarizer
from ctxfold.tokens import REPLY_PRIMING, count_messages, message_costs
from ctxfold.types import Item, ItemResult

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
    cache: EngineCache | None = None,
    edits: dict[int, Edit] | None = None,
) -> tuple[list[dict[str, Any]], int, list[ItemResult]]:
    cache = EngineCache() if cache is None else cache
    contents = _summaries(items, plan, summarizer, cache)
    for i, it in enumerate(items):
        if plan.choices[i] == CLEAR:
            contents[i] = placeholder(it)
    chunk_messages = _chunk_summaries(items, plan.chunks, summarizer, cache)
    messages, kept = _assemble(items, plan.choices, contents, plan.gap_markers, chunk_messages)
    total = _count(messages, tokenizer, cache)
    # The plan's costs are upper bounds (gap markers excepted), so this is a
    # guard: drop the least valuable droppable message, with its tool group
    # (a chunk summary goes as a whole).
    groups = tool_groups(items)
    order = sorted((i for i in kept if not hard_protected(items[i])), key=lambda i: plan.values[i])
    while total > budget and order:
        first = order.pop(0)
        for j in range(len(items)):
            if j == first or (groups[first] >= 0 and groups[j] == groups[first]):
                plan.choices[j] = DROP
        for chunk in plan.chunks:
            if first in chunk.indices:
                chunk.level = 0
                chunk_messages.pop(chunk.indices[0], None)
                for j in chunk.indices:
                    plan.choices[j] = DROP
        messages, kept = _assemble(items, plan.choices, contents, plan.gap_markers, chunk_messages)
        total = _count(messages, tokenizer, cache)
    results = [
        ItemResult(
            id=it.id, index=it.index, role=it.role, status=STATUS[plan.choices[i]], tokens_in=it.tokens,
            tokens_out=_tokens_out(it, plan.choices[i], contents.get(i), tokenizer),
            score=float(scores[i]), layers={k: float(v[i]) for k, v in layers.items()},
        )
        for i, it in enumerate(items)
    ]
    _attribute_chunks(results, plan.chunks, chunk_messages, tokenizer)
    for i, edit in (edits or {}).items():
        # A structurally compacted message the plan kept is reported as what the edit made of it.
        if plan.choices[i] == KEEP:
            results[i].status, results[i].reason = edit.status, edit.reason  # type: ignore[assignment]
        elif plan.choices[i] != DROP:
            results[i].reason = edit.reason
    return messages, total, results


def _summaries(
    items: Sequence[Item], plan: Plan, summarizer: Summarizer, cache: EngineCache
) -> dict[int, str]:
    """Summaries of the planned items; a (text, target) pair summarised before is
    taken from `cache` (keyed by content hash), so a conversation that grows by a
    turn re-summarises nothing old. Summaries are made without the query for
    the same reason: the query changes every turn, the old messages do not."""
    order = sorted(plan.summary_targets)
    texts = [str(items[i].message.get("content") or "") for i in order]
    found = _cached_summaries([(t, plan.summary_targets[i]) for t, i in zip(texts, order)], summarizer, cache)
    return {i: SUMMARY_MARKER + s for i, s in zip(order, found)}


def _count(messages: list[dict[str, Any]], tokenizer: Tokenizer, cache: EngineCache) -> int:
    """`count_messages(messages)`, exactly: its per-message terms add up, so
    messages counted before (the kept ones) come from the cache."""
    return REPLY_PRIMING + sum(cache.costs_of(messages, lambda todo: message_costs(todo, tokenizer)))


def _chunk_summaries(
    items: Sequence[Item], chunks: Sequence[Chunk], summarizer: Summarizer, cache: EngineCache
) -> dict[int, dict[str, Any]]:
    """One system message per summarised chunk, keyed by the chunk's first
    index. Level 2 summarises the level-1 summary; both are cached."""
    active = [c for c in chunks if c.level]
    texts = _cached_summaries([(c.text, c.targets[0]) for c in active], summarizer, cache)
    deeper = [k for k, c in enumerate(active) if c.level == 2]
    for k, text in zip(deeper, _cached_summaries([(texts[k], active[k].targets[1]) for k in deeper], summarizer, cache)):
        texts[k] = text
    return {
        c.indices[0]: {"role": "system", "content": chunk_marker(c, items, c.level) + text}
        for c, text in zip(active, texts)
    }


def _cached_summaries(requests: list[tuple[str, int]], summarizer: Summarizer, cache: EngineCache) -> list[str]:
    keys = [(content_hash(text), target) for text, target in requests]
    found = [cache.summary(k) for k in keys]
    missing = [k for k, f in enumerate(found) if f is None]
    if missing:
        fresh = summarizer.summarize([requests[k][0] for k in missing], [requests[k][1] for k in missing])
        for k, summary in zip(missing, fresh):
            cache.put_summary(keys[k], summary)
            found[k] = summary
    return [str(f) for f in found]


def _attribute_chunks(
    results: list[ItemResult], chunks: Sequence[Chunk], chunk_messages: dict[int, dict[str, Any]], tokenizer: Tokenizer
) -> None:
    """A chunk summary's tokens are reported on the chunk's first message."""
    for chunk in chunks:
        message = chunk_messages.get(chunk.indices[0])
        for i in chunk.indices:
            results[i].tokens_out = 0
            results[i].reason = f"in a level-{chunk.level} chunk summary" if message else "in a dropped chunk"
        if message:
            results[chunk.indices[0]].tokens_out = count_messages([message], tokenizer=tokenizer) - 3


def _assemble(
    items: Sequence[Item],
    choices: list[int],
    contents: dict[int, str],
    gap_markers: bool = False,
    chunk_messages: dict[int, dict[str, Any]] | None = None,
) -> tuple[list[dict[str, Any]], list[int]]:
    messages: list[dict[str, Any]] = []
    kept: list[int] = []
    omitted = 0
    chunk_messages = chunk_messages or {}
    for i, it in enumerate(items):
        if i in chunk_messages:
            messages.append(chunk_messages[i])
            kept.append(i)
            continue
        if choices[i] == DROP or (choices[i] == SUMMARY and i not in contents):
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
