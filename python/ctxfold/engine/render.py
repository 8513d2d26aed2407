"""Applying a plan: summaries written, placeholders set, dropped messages
left out, and the exact token count of what comes out."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np

from ctxfold._core import Tokenizer
from ctxfold.summarize.head_tail import head_tail
from ctxfold.engine.cache import EngineCache, content_hash
from ctxfold.engine.chunks import Chunk
from ctxfold.engine.excerpts import EXCERPT_MARKER, excerpt, query_weights
from ctxfold.errors import CtxFoldError
from ctxfold.engine.messages import hard_protected
from ctxfold.engine.options import CLEAR, DROP, KEEP, SEAM_SLACK, SUMMARY, SUMMARY_MARKER
from ctxfold.engine.plan import Plan, gap_marker
from ctxfold.summarize.protocol import Summarizer
from ctxfold.text.temporal import said_day, split_date_note, text_without_said
from ctxfold.tokens import REPLY_PRIMING, count_messages, message_costs
from ctxfold.engine.results import Item, ItemResult, Status
from ctxfold.engine.run import RunContext

__all__ = ["render"]

STATUS: dict[int, Status] = {KEEP: "kept", SUMMARY: "summarized", CLEAR: "cleared", DROP: "dropped"}


def render(
    items: Sequence[Item],
    plan: Plan,
    scores: np.ndarray,
    layers: dict[str, np.ndarray],
    run: RunContext,
    tokens_in: Sequence[int] | None = None,
) -> tuple[list[dict[str, Any]], int, list[ItemResult]]:
    """The plan's messages in order, each in the form the plan chose, with
    the texts its options built. Every form is held to the size the plan
    priced it at, so the result fits `run.budget` by construction; `tokens_in`
    are the caller's message sizes (before date notes) for the report."""
    budget, tokenizer, summarizer, cache = run.budget, run.tokenizer, run.summarizer, run.cache
    contents, excerpted = _summaries(items, plan, summarizer, cache, tokenizer, run.query)
    for i, limit in plan.cuts.items():
        contents[i] = head_tail(str(items[i].message.get("content") or ""), limit, tokenizer)
    for i, text in [*plan.placeholders.items(), *plan.plain.items()]:
        contents[i] = text
    _said_once(items, plan.choices, contents, tokenizer)
    for i, note in plan.references.items():
        contents[i] = f"{contents.get(i, items[i].message['content'])}\n{note}"
    chunk_messages = _chunk_summaries(items, plan.chunks, summarizer, cache, tokenizer)
    messages, _ = _assemble(items, plan.choices, contents, plan.gap_markers, chunk_messages)
    total = _count(messages, tokenizer, cache)
    if total > budget:
        raise CtxFoldError(
            f"internal error: the rendered context is {total} tokens, over the budget of {budget} that the plan "
            "was made for; please report this with the input"
        )
    sizes = list(tokens_in) if tokens_in is not None else [it.tokens for it in items]
    reasons = _reasons(items, plan, scores, sizes, excerpted)
    results = [
        ItemResult(
            id=it.id, index=it.index, role=it.role, tokens_in=sizes[i],
            status="summarized" if i in plan.cuts else STATUS[plan.choices[i]],
            tokens_out=_tokens_out(it, plan.choices[i], contents.get(i), tokenizer),
            score=float(scores[i]), layers={k: float(v[i]) for k, v in layers.items()},
            reason=reasons[i],
        )
        for i, it in enumerate(items)
    ]
    _attribute_chunks(results, plan.chunks, chunk_messages, tokenizer)
    return messages, total, results


def _reasons(
    items: Sequence[Item], plan: Plan, scores: np.ndarray, sizes: Sequence[int], excerpted: Collection[int] = ()
) -> list[str]:
    """Why each message is not in the context verbatim ("" when it is), in the caller's sizes."""
    kept = [float(scores[j]) for j, c in enumerate(plan.choices) if c != DROP and not hard_protected(items[j])]
    lowest = min(kept, default=None)
    call_of = {call_id: it.id for it in items for call_id in it.tool_call_ids}
    reasons = []
    for i, (it, choice) in enumerate(zip(items, plan.choices)):
        score = float(scores[i])
        if choice == KEEP:
            reason = ""
        elif i in plan.cuts and i in plan.current:
            reason = f"current turn cut to head + tail ({plan.cuts[i]} tokens) to fit the budget"
        elif i in plan.cuts:
            reason = f"tool output cut to head + tail ({plan.cuts[i]} tokens) to make room"
        elif choice == SUMMARY and i in excerpted:
            reason = (f"shortened to an excerpt of at most {plan.summary_targets.get(i, 0)} tokens, the sentences "
                      "that match the query first, to make room for higher-value messages")
        elif choice == SUMMARY:
            reason = f"summarised to at most {plan.summary_targets.get(i, 0)} tokens to make room for higher-value messages"
        elif choice == CLEAR and i in plan.superseded:
            reason = f"file read replaced by a placeholder: {items[plan.superseded[i]].id} reads the same path later"
        elif choice == CLEAR:
            reason = f"{(it.kind or it.role).replace('_', ' ')} replaced by a placeholder to make room"
        elif i in plan.duplicates:
            reason = f"exact copy of {items[plan.duplicates[i]].id}, which comes later"
        else:
            result_of = it.message.get("tool_call_id")
            call = call_of.get(result_of) if it.role == "tool" and isinstance(result_of, str) else None
            group = f" with its tool call {call}" if call else " with its tool results" if it.tool_call_ids else ""
            if lowest is not None and score < lowest:
                reason = f"dropped{group}: score {score:.3f} below every kept message's (lowest kept {lowest:.3f})"
            else:
                reason = f"dropped{group}: {sizes[i]} tokens at score {score:.3f}; the budget went to more value per token"
        reasons.append(reason)
    return reasons


def _summaries(
    items: Sequence[Item], plan: Plan, summarizer: Summarizer, cache: EngineCache, tokenizer: Tokenizer, query: str
) -> tuple[dict[int, str], set[int]]:
    """The shortened texts of the planned items, and which of them are
    excerpts. With a query, a message whose sentences match it is shortened to
    an excerpt of them (its own words, picked for this question); any other
    is summarised, and a (text, target) pair summarised before is taken from
    `cache` (keyed by content hash), so a conversation that grows by a turn
    re-summarises nothing old. Summaries are made without the query for the
    same reason: the query changes every turn, the old messages do not."""
    order = sorted(plan.summary_targets)
    # A message's date note is kept whole after its summary: a summary keeps
    # "yesterday" but not always the line that says which day that was.
    parts = [_with_room_for_note(str(items[i].message.get("content") or ""), plan.summary_targets[i], tokenizer)
             for i in order]
    marker = int(tokenizer.count(SUMMARY_MARKER))
    # An excerpt is priced as a summary: a longer marker comes out of its text.
    extra = max(0, int(tokenizer.count(EXCERPT_MARKER)) - marker)
    weights = query_weights([it.text for it in items], query, cache) if order and query.strip() else {}
    out: dict[int, str] = {}
    excerpted: set[int] = set()
    for i, (body, note, target) in zip(order, parts):
        quoted = excerpt(body, weights, target - extra, tokenizer) if weights else None
        if quoted is None:
            continue
        text = _noted(EXCERPT_MARKER + quoted, note, marker + plan.summary_targets[i] + SEAM_SLACK, tokenizer)
        if text is not None:
            out[i] = text
            excerpted.add(i)
    rest = [(i, part) for i, part in zip(order, parts) if i not in out]
    found = _cached_summaries([(body, target) for _, (body, _, target) in rest], summarizer, cache)
    for (i, (body, note, target)), summary in zip(rest, found):
        text = _within(SUMMARY_MARKER, summary, target, tokenizer)
        limit = marker + plan.summary_targets[i] + SEAM_SLACK
        # The whole must still fit what the plan priced for the message.
        out[i] = _noted(text, note, limit, tokenizer) or _within(SUMMARY_MARKER, summary, plan.summary_targets[i], tokenizer)
    return out, excerpted


def _noted(text: str, note: str, limit: int, tokenizer: Tokenizer) -> str | None:
    """`text` with the date `note` after it, or None when the two exceed `limit` tokens."""
    whole = f"{text}\n{note}" if note else text
    return whole if int(tokenizer.count(whole)) <= limit else None


def _said_once(items: Sequence[Item], choices: Sequence[int], contents: dict[int, str], tokenizer: Tokenizer) -> None:
    """Only the first message of each day among those sent keeps the ``said``
    part of its note: the ones after it on that day are read under it. Each is
    priced with it, so taking it out only frees tokens (kept when it does not)."""
    last = ""
    for i, (it, choice) in enumerate(zip(items, choices)):
        if choice != KEEP and not (choice == SUMMARY and i in contents):
            continue  # not sent as a message of its own (dropped, cleared, or inside a chunk's summary)
        text = contents.get(i, it.message.get("content"))
        if not isinstance(text, str):
            continue
        day = said_day(split_date_note(text)[1])
        if not day:
            continue
        if day == last:
            shorter = text_without_said(text)
            if int(tokenizer.count(shorter)) <= int(tokenizer.count(text)):
                contents[i] = shorter
        last = day


# The fewest tokens a summary keeps beside a date note (a short sentence).
MIN_NOTED_SUMMARY = 8


def _with_room_for_note(content: str, target: int, tokenizer: Tokenizer) -> tuple[str, str, int]:
    """(text to summarise, date note to append, the summary's own target):
    the note's tokens come out of the target when a short sentence is left."""
    body, note = split_date_note(content)
    if not note:
        return content, "", target
    rest = target - int(tokenizer.count("\n" + note))
    return (body, note, rest) if rest >= MIN_NOTED_SUMMARY else (content, "", target)


def _within(prefix: str, text: str, target: int, tokenizer: Tokenizer) -> str:
    """`prefix + text` with `text` cut to `target` tokens and the whole to the
    size the plan priced (prefix + target + seam slack): a summarizer may
    return more than asked, and the budget must hold whatever it returns."""
    limit = int(tokenizer.count(prefix)) + target + SEAM_SLACK
    text = text if tokenizer.count_until(text, target) is not None else tokenizer.truncate(text, target)
    while (over := int(tokenizer.count(prefix + text)) - limit) > 0:
        text = tokenizer.truncate(text, max(0, int(tokenizer.count(text)) - over))
    return prefix + text


def _count(messages: list[dict[str, Any]], tokenizer: Tokenizer, cache: EngineCache) -> int:
    """`count_messages(messages)`, exactly: its per-message terms add up, so
    messages counted before (the kept ones) come from the cache."""
    return REPLY_PRIMING + sum(cache.costs_of(messages, lambda todo: message_costs(todo, tokenizer)))


def _chunk_summaries(
    items: Sequence[Item], chunks: Sequence[Chunk], summarizer: Summarizer, cache: EngineCache, tokenizer: Tokenizer
) -> dict[int, dict[str, Any]]:
    """One system message per summarised chunk, keyed by the chunk's first
    index. Level 2 summarises the level-1 summary; both are cached."""
    active = [c for c in chunks if c.level]
    texts = _cached_summaries([(c.text, c.targets[0]) for c in active], summarizer, cache)
    deeper = [k for k, c in enumerate(active) if c.level == 2]
    for k, text in zip(deeper, _cached_summaries([(texts[k], active[k].targets[1]) for k in deeper], summarizer, cache)):
        texts[k] = text
    return {
        c.indices[0]: {"role": "system", "content": _within(c.markers[c.level - 1], text, c.targets[c.level - 1], tokenizer)}
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
            results[chunk.indices[0]].tokens_out = count_messages([message], tokenizer=tokenizer) - REPLY_PRIMING


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
            messages.append({"role": "system", "content": gap_marker(omitted)})
        omitted = 0
        message = dict(it.message)
        if i in contents:
            message["content"] = contents[i]
        messages.append(message)
        kept.append(i)
    return messages, kept


def _tokens_out(it: Item, choice: int, content: str | None, tokenizer: Tokenizer) -> int:
    if choice == DROP:
        return 0
    if content is None:
        return it.tokens
    return count_messages([{**it.message, "content": content}], tokenizer=tokenizer) - REPLY_PRIMING
