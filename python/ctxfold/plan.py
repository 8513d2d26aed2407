"""Planning: one choice per message (keep, summary, clear, drop) that fits the
budget exactly and keeps the most value, made by the core's multiple-choice
knapsack. Tool calls and their results share one choice; hard-protected
messages must be kept; soft-protected ones are worth so much that they are
shortened before anything of theirs is dropped."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import numpy as np

from ctxfold._core import Tokenizer, select_options
from ctxfold.compaction import CLEARABLE_KINDS, NEVER_COMPACT, placeholder
from ctxfold.config import EngineConfig
from ctxfold.engine_cache import EngineCache
from ctxfold.errors import BudgetError
from ctxfold.multilevel import CHUNK_SIZE, LEVEL2_SHARE, Chunk, chunk_marker, make_chunks, movable_for_chunks
from ctxfold.tokens import REPLY_PRIMING, count_messages
from ctxfold.types import Item

__all__ = ["Plan", "plan_items", "choose_strategy", "zones", "pull_in_neighbours", "KEEP", "SUMMARY", "CLEAR", "DROP", "SUMMARY_MARKER"]

KEEP, SUMMARY, CLEAR, DROP = 0, 1, 2, 3
SUMMARY_MARKER = "[summary] "
# Value of a soft-protected message kept / shortened: far above any score, so
# the knapsack only shortens or drops one when nothing else is left.
# A soft-protected message is always present (the floor SOFT_PRESENT dwarfs any
# score); whether verbatim or shortened is traded against other messages, with
# a bonus for verbatim worth about half of a top-scored message.
SOFT_PRESENT, SOFT_VERBATIM_BONUS = 5e5, 0.5
# Value grows as a power of the (max-normalised) score: the best-scored
# messages must win over many middling ones of the same total size, while the
# knapsack still prefers a short relevant turn to a long one (measured on the
# LongMemEval-S dev set: see benches/eval_longmemeval.py and the README).
SCORE_POWER = 3.0
SUMMARY_SHARE, CLEAR_SHARE = 0.35, 0.02
# Neighbour expansion: a kept answer lifts the dropped question it replies to
# by this share of its own value.
NEIGHBOUR_SHARE = 0.5
# Joining a marker and a summary can merge a token or two across the seam.
SEAM_SLACK = 2


class Plan(msgspec.Struct, kw_only=True):
    strategy: str
    choices: list[int]
    summary_targets: dict[int, int]
    """Token target of the summary text for each item planned as SUMMARY."""
    values: list[float]
    gap: float = 0.0
    gap_markers: bool = False
    """Whether runs of dropped messages are marked with `[... N messages omitted ...]`."""
    chunks: list[Chunk] = msgspec.field(default_factory=list)
    """MULTI_LEVEL: the chunks of older messages and the summary level chosen for each."""


def message_values(scores: np.ndarray) -> np.ndarray:
    """What keeping each message is worth: its score scaled so the best is 1,
    to the power SCORE_POWER (plus a hair so that everything is worth keeping
    when there is room). Measured alternatives that did not do better on the
    LongMemEval-S dev set: powers 1, 2, 4, 6, 8, and subtracting the
    conversation's median or 80th/90th-percentile score first."""
    clipped = np.clip(scores, 0, None)
    return (clipped / max(float(clipped.max(initial=0.0)), 1e-12)) ** SCORE_POWER + 1e-6


def tool_groups(items: Sequence[Item]) -> np.ndarray:
    """Group id per item: an assistant message with tool calls and every
    result of those calls share the id of the assistant message; -1 alone."""
    groups = np.full(len(items), -1, dtype=np.int64)
    owner: dict[str, int] = {}
    for i, it in enumerate(items):
        for call_id in it.tool_call_ids:
            owner[call_id] = i
            groups[i] = i
        call = it.message.get("tool_call_id")
        if call in owner:
            groups[i] = owner[call]
    return groups


def hard_protected(it: Item) -> bool:
    return it.pinned or it.role in ("system", "developer")


def soft_protected(items: Sequence[Item], config: EngineConfig) -> np.ndarray:
    n = len(items)
    soft = np.zeros(n, dtype=bool)
    soft[max(0, n - config.protect_last):] = True
    last_user = max((i for i, it in enumerate(items) if it.role == "user"), default=None)
    if last_user is not None:
        soft[last_user] = True
    for i, it in enumerate(items):
        soft[i] |= it.kind in ("active_task", "decision")
    return soft


def choose_strategy(tokens: int, budget: int) -> str:
    """`auto`: the OpenScroll progression by how far over budget the history is:
    fits -> full, up to 2x -> windowed, up to 5x -> compacted, beyond ->
    multi_level (chunk summaries at two levels)."""
    ratio = tokens / budget
    if ratio <= 1:
        return "full"
    if ratio <= 2:
        return "windowed"
    if ratio <= 5:
        return "compacted"
    return "multi_level"


def zones(items: Sequence[Item], strategy: str, room: int) -> list[str]:
    """What each message may become under `strategy`:
    free (any option), window (verbatim first), summarize (no verbatim copy),
    heavy (summary at most 15%), key (verbatim or dropped, nothing between)."""
    n = len(items)
    if strategy == "windowed":
        # The newest messages up to ~70% of the room stay verbatim, older ones are summarised.
        out, used = ["summarize"] * n, 0
        for i in range(n - 1, -1, -1):
            used += items[i].tokens
            if used > 0.7 * room:
                break
            out[i] = "window"
        return out
    if strategy == "multi_level":
        # The recent chunk verbatim first; older messages go into chunk summaries.
        return ["free"] * max(0, n - CHUNK_SIZE) + ["window"] * min(n, CHUNK_SIZE)
    if strategy == "compacted":
        # Oldest 40%: heavy summary; middle 35%: key messages only; newest 25%: verbatim.
        old, middle = round(n * 0.40), round(n * 0.75)
        return ["heavy" if i < old else "key" if i < middle else "window" for i in range(n)]
    return ["free"] * n


def plan_items(
    items: Sequence[Item],
    scores: np.ndarray,
    budget: int,
    config: EngineConfig,
    tokenizer: Tokenizer,
    strategy: str = "optimal",
    cache: EngineCache | None = None,
) -> Plan:
    n = len(items)
    room = budget - REPLY_PRIMING
    hard = np.array([hard_protected(it) for it in items], dtype=bool)
    fixed = int(sum(it.tokens for it, h in zip(items, hard) if h))
    if fixed > room:
        raise BudgetError(
            f"budget: the system prompt, pinned messages and tool definitions alone need {fixed + REPLY_PRIMING} "
            f"tokens but the budget is {budget} ({fixed - room} over); raise the budget or unpin messages"
        )
    zone = zones(items, strategy, room)
    soft = (soft_protected(items, config) | np.array([z == "window" for z in zone])) & ~hard
    targets: dict[int, int] = {}
    marker = int(tokenizer.count(SUMMARY_MARKER))
    base = message_values(scores)
    cache = cache if cache is not None else EngineCache()
    contents = [it.message.get("content") for it in items]
    strings = [c for c in contents if isinstance(c, str)]
    by_text = dict(zip(strings, cache.count_texts(strings, tokenizer)))
    # Built as Python lists (one row per message: keep, summary, clear, drop),
    # then one array: element-wise numpy writes would cost more than the solve.
    unavailable = room + 1
    cost_rows: list[list[int]] = []
    value_rows: list[list[float]] = []
    for i, (it, b, is_soft) in enumerate(zip(items, base.tolist(), soft.tolist())):
        cost = [it.tokens, unavailable, unavailable, 0]
        value = [SOFT_PRESENT + SOFT_VERBATIM_BONUS + b if is_soft else b, 0.0, 0.0, 0.0]
        cost_rows.append(cost)
        value_rows.append(value)
        if it.tool_call_ids:
            # The call itself stays whole; its results carry the shortening.
            cost[SUMMARY] = cost[CLEAR] = it.tokens
            value[SUMMARY] = value[CLEAR] = value[KEEP] * 0.999
            continue
        text_tokens = by_text[contents[i]] if isinstance(contents[i], str) else 0
        ratio = min(config.summary_ratio, 0.15) if zone[i] == "heavy" else config.summary_ratio
        target = max(config.min_summary_tokens, int(text_tokens * ratio))
        if zone[i] != "key" and text_tokens > target + marker + SEAM_SLACK and it.kind not in NEVER_COMPACT:
            targets[i] = target
            cost[SUMMARY] = it.tokens - text_tokens + marker + target + SEAM_SLACK
            value[SUMMARY] = SOFT_PRESENT + b * SUMMARY_SHARE if is_soft else b * SUMMARY_SHARE
            if zone[i] in ("summarize", "heavy") and not hard[i]:
                cost[KEEP] = unavailable
        if it.kind in CLEARABLE_KINDS and not is_soft:
            stub = int(tokenizer.count(placeholder(it)))
            if stub + SEAM_SLACK < text_tokens:
                cost[CLEAR] = it.tokens - text_tokens + stub + SEAM_SLACK
                value[CLEAR] = b * CLEAR_SHARE
    costs = np.array(cost_rows, dtype=np.int64).reshape(n, 4)
    values = np.array(value_rows, dtype=np.float64).reshape(n, 4)
    groups = tool_groups(items)
    chunks: list[Chunk] = []
    if strategy == "multi_level":
        movable = movable_for_chunks(items, hard, groups, CHUNK_SIZE) & ~soft
        chunks = make_chunks(items, movable, groups, tokenizer, config.summary_ratio, config.min_summary_tokens)
    in_chunk = {i for c in chunks for i in c.indices}
    rows = [i for i in range(n) if i not in in_chunk]
    chunk_costs, chunk_values = _chunk_options(chunks, items, base, room, tokenizer)

    def solve() -> tuple[np.ndarray, dict]:
        return select_options(
            np.vstack([costs[rows], chunk_costs]), np.vstack([values[rows], chunk_values]), room,
            protected=np.concatenate([hard[rows], np.zeros(len(chunks), dtype=bool)]),
            groups=np.concatenate([groups[rows], np.full(len(chunks), -1, dtype=np.int64)]), return_info=True,
        )

    choices, info = solve()
    if config.expand_neighbours and pull_in_neighbours(items, rows, choices, values, base):
        choices, info = solve()
    chosen = [DROP] * n
    chosen_values = [0.0] * n
    for row, i in enumerate(rows):
        # A tool call shares its results' choice but is itself always kept whole.
        c = int(choices[row])
        chosen[i] = KEEP if items[i].tool_call_ids and c in (SUMMARY, CLEAR) else c
        chosen_values[i] = float(values[i, chosen[i]])
    for k, chunk in enumerate(chunks):
        option = int(choices[len(rows) + k])
        chunk.level = {0: 1, 1: 2}.get(option, 0)
        for i in chunk.indices:
            chosen[i] = SUMMARY if chunk.level else DROP
            chosen_values[i] = float(chunk_values[k, option]) / len(chunk.indices)
    return Plan(
        strategy=strategy,
        choices=chosen,
        summary_targets={i: targets[i] for i in rows if chosen[i] == SUMMARY and i in targets},
        values=chosen_values,
        gap=float(info["gap"]),
        gap_markers=strategy == "compacted",
        chunks=chunks,
    )


def answered_turn(items: Sequence[Item], i: int) -> int | None:
    """The message `items[i]` answers: the user turn before an assistant turn."""
    if items[i].role == "assistant" and i > 0 and items[i - 1].role == "user":
        return i - 1
    return None


def pull_in_neighbours(
    items: Sequence[Item], rows: Sequence[int], choices: np.ndarray, values: np.ndarray, base: np.ndarray
) -> bool:
    """Neighbour expansion: a user turn whose answer the first solve kept but
    that was itself dropped is lifted by NEIGHBOUR_SHARE of the answer's
    value (the answer makes little sense without its question); True when
    anything was lifted, so the knapsack solves again."""
    row_of = {i: row for row, i in enumerate(rows)}
    lifted = False
    for row, i in enumerate(rows):
        j = answered_turn(items, i)
        if j is None or j not in row_of or int(choices[row]) == DROP or int(choices[row_of[j]]) != DROP:
            continue
        boost = NEIGHBOUR_SHARE * float(base[i])
        values[j, [KEEP, SUMMARY]] += boost * np.array([1.0, SUMMARY_SHARE])
        lifted = True
    return lifted


def _chunk_options(
    chunks: Sequence[Chunk], items: Sequence[Item], base: np.ndarray, room: int, tokenizer: Tokenizer
) -> tuple[np.ndarray, np.ndarray]:
    """Knapsack rows of the chunks: level-1 summary, level-2 summary, -, drop.
    Costs are upper bounds: framing, marker, the target and the seam slack."""
    costs = np.full((len(chunks), 4), room + 1, dtype=np.int64)
    values = np.zeros((len(chunks), 4), dtype=np.float64)
    for k, chunk in enumerate(chunks):
        worth = float(base[chunk.indices].sum()) * SUMMARY_SHARE
        for option, (level, target) in enumerate(zip((1, 2), chunk.targets)):
            framing = int(count_messages([{"role": "system", "content": chunk_marker(chunk, items, level)}], tokenizer=tokenizer))
            costs[k, option] = framing - REPLY_PRIMING + target + SEAM_SLACK
            values[k, option] = worth * (1.0 if level == 1 else LEVEL2_SHARE)
        costs[k, DROP] = 0
    return costs, values
