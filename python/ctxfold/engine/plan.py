"""Planning: one choice per message (keep, summary, clear, drop) that fits the
budget exactly and keeps the most value, made by the core's multiple-choice
knapsack. Every promise is a constraint of that one solve, never a repair
after it: tool calls and their results share one choice; hard-protected
messages must be kept; the current turn (the last user message, and the
tool round the input ends with) is never dropped, only shortened when it
cannot fit; every form's cost, gap markers included, is an upper bound of
what rendering it costs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from ctxfold._core import Tokenizer, select_options
from ctxfold.engine.compaction import CLEARABLE_KINDS, Edit, apply_edits, later_copies, placeholder, structural_pass
from ctxfold.engine.config import EngineConfig
from ctxfold.engine.messages import people_in_chat
from ctxfold.errors import BudgetError
from ctxfold.text.entity_repository import critical_messages
from ctxfold.engine.chunks import CHUNK_SIZE, LEVEL2_SHARE, Chunk, chunk_marker, make_chunks, movable_for_chunks
from ctxfold.tokens import REPLY_PRIMING, count_messages
from ctxfold.engine.results import STATE_KINDS, Item
from ctxfold.engine.run import RunContext

__all__ = [
    "Plan", "plan_context", "plan_items", "choose_strategy", "zones", "pull_in_neighbours", "current_turn", "count_gap_markers",
    "gap_marker", "KEEP", "SUMMARY", "CLEAR", "DROP", "SUMMARY_MARKER",
]

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
# knapsack still prefers a short relevant turn to a long one.
SCORE_POWER = 3.0
# Value also grows with a message's length relative to the median of its role,
# to this power: a knapsack left alone favours short turns for their size, while
# a long message often holds the facts; per role, as roles differ in typical length.
LENGTH_POWER = 0.3
# In a chat between two people the plan packs by score alone (value in
# proportion to length), which keeps more evidence there (docs/benchmarks.md).
PEOPLE_LENGTH_POWER = 1.0
SUMMARY_SHARE, CLEAR_SHARE = 0.35, 0.02
# Neighbour expansion: a kept answer lifts the dropped question it replies to
# by this share of its own value.
NEIGHBOUR_SHARE = 0.5
# Joining a marker and a summary can merge a token or two across the seam.
SEAM_SLACK = 2
# The current turn outranks everything else: verbatim, then shortened, then
# at its minimal size; the steps dwarf any sum of other values.
CURRENT_PRESENT = 1e9
# A shortened current turn takes at most this share of the room left beside
# the protected messages, so some history still fits beside it.
CURRENT_SHARE = 0.75
# Messages protected for their critical entities take at most this share of the room.
CRITICAL_SHARE = 0.1
# The smallest form of a current-turn text (head + tail around the omission marker).
CURRENT_MIN_TOKENS = 64


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
    cuts: dict[int, int] = msgspec.field(default_factory=dict)
    """Current-turn messages shortened to head + tail: the token limit of each content."""
    current: list[int] = msgspec.field(default_factory=list)
    """The indices of the current turn."""
    duplicates: dict[int, int] = msgspec.field(default_factory=dict)
    """Messages repeated verbatim later: the index of the last copy."""
    notes: list[str] = msgspec.field(default_factory=list)
    """What the planner had to give up, for the report's warnings."""


def message_values(scores: np.ndarray, items: Sequence[Item] | None = None) -> np.ndarray:
    """What keeping each message is worth: its score scaled so the best is 1,
    to the power SCORE_POWER (plus a hair so that everything is worth keeping
    when there is room); with `items`, times `length_weights(items)`."""
    clipped = np.clip(scores, 0, None)
    values: np.ndarray = (clipped / max(float(clipped.max(initial=0.0)), 1e-12)) ** SCORE_POWER + 1e-6
    if items is not None:
        values *= length_weights(items)
    return values


def length_weights(items: Sequence[Item]) -> np.ndarray:
    """(tokens / median tokens of the same role) ** LENGTH_POWER per message
    (PEOPLE_LENGTH_POWER in a chat between two people): 1 for a message of its
    role's typical length."""
    power = LENGTH_POWER if people_in_chat(items) is None else PEOPLE_LENGTH_POWER
    tokens = np.array([max(it.tokens, 1) for it in items], dtype=np.float64)
    roles = np.array([it.role for it in items], dtype=object)
    relative = np.ones(len(items))
    for role in set(roles.tolist()):
        same = roles == role
        relative[same] = tokens[same] / float(np.median(tokens[same]))
    weights: np.ndarray = relative ** power
    return weights


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


def soft_protected(items: Sequence[Item], config: EngineConfig, recent: bool = True) -> np.ndarray:
    """Messages kept present (verbatim when they fit, shortened otherwise):
    the last user message, agent-state kinds, and with `recent` the last
    `config.protect_last` messages."""
    n = len(items)
    soft = np.zeros(n, dtype=bool)
    if recent:
        soft[max(0, n - config.protect_last):] = True
    last_user = max((i for i, it in enumerate(items) if it.role == "user"), default=None)
    if last_user is not None:
        soft[last_user] = True
    for i, it in enumerate(items):
        soft[i] |= it.kind in ("active_task", "decision")
    return soft


def critical_protected(items: Sequence[Item], config: EngineConfig, room: int) -> np.ndarray:
    """With ``protect_critical_entities``: the latest user message per
    active critical entity (`critical_messages`), newest
    first, while their full size stays within CRITICAL_SHARE of the room."""
    out = np.zeros(len(items), dtype=bool)
    if not config.protect_critical_entities:
        return out
    found = critical_messages([{"role": it.role, "content": it.text} for it in items])
    spent = 0
    for i in sorted(found, reverse=True):
        if spent + items[i].tokens <= CRITICAL_SHARE * room:
            out[i] = True
            spent += items[i].tokens
    return out


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


def current_turn(items: Sequence[Item]) -> list[int]:
    """The messages the next answer is for: the last user message and, when
    the input ends with tool results, the assistant message that made those
    calls with all of its results."""
    current = set()
    last_user = max((i for i, it in enumerate(items) if it.role == "user"), default=None)
    if last_user is not None:
        current.add(last_user)
    if items and items[-1].role == "tool":
        groups = tool_groups(items)
        if groups[-1] >= 0:
            current.update(i for i in range(len(items)) if groups[i] == groups[-1])
    return sorted(current)


def gap_marker(omitted: int) -> str:
    return f"[... {omitted} messages omitted ...]"


def count_gap_markers(present: Sequence[bool]) -> int:
    """How many gap markers rendering puts in: one before each present
    message that follows a run of absent ones."""
    markers, gap = 0, False
    for here in present:
        if here:
            markers += gap
            gap = False
        else:
            gap = True
    return markers


def plan_context(items: Sequence[Item], scores: np.ndarray, run: RunContext) -> tuple[list[Item], dict[int, Edit], Plan]:
    """Every decision about the context: the strategy (everything as it is
    when it fits, under ``full`` or ``auto``), then the structural edits (the
    cheap, reversible forms, until the messages fit; protected messages
    untouched), then one choice per message (`plan_items`). Returns the
    items as edited, the edits by index, and the plan."""
    budget, config, tokenizer = run.budget, run.config, run.tokenizer
    needed = sum(it.tokens for it in items) + REPLY_PRIMING
    strategy: str = config.strategy
    if strategy == "auto" or needed <= budget:
        strategy = choose_strategy(needed, budget)
    if strategy == "full" and needed <= budget:
        n = len(items)
        return list(items), {}, Plan(strategy="full", choices=[KEEP] * n, summary_targets={}, values=[0.0] * n)
    keep = np.array([hard_protected(it) for it in items], dtype=bool) | soft_protected(items, config)
    edits = structural_pass(items, budget - REPLY_PRIMING, keep.tolist(), tokenizer, config.max_tool_output_tokens)
    compacted = apply_edits(items, edits, tokenizer)
    plan = plan_items(compacted, scores, run, "optimal" if strategy == "full" else strategy)
    return compacted, edits, plan


def plan_items(items: Sequence[Item], scores: np.ndarray, run: RunContext, strategy: str = "optimal") -> Plan:
    """One choice per message within `run.budget`; `run.question_is_current`
    says that the last user message is what the next answer is for (no other
    query was given), so its verbatim form outranks any history; otherwise it
    is still always present, but its form is traded against the history by
    value. `run.protect_recent`: whether the last `config.protect_last`
    messages are soft-protected."""
    budget, config, tokenizer, cache = run.budget, run.config, run.tokenizer, run.cache
    n = len(items)
    room = budget - REPLY_PRIMING
    hard = np.array([hard_protected(it) for it in items], dtype=bool)
    groups = tool_groups(items)
    # A protected message keeps its whole tool group (the knapsack gives a
    # group with a protected member option 0), so the group counts as fixed.
    fixed_groups = {int(g) for g, h in zip(groups, hard) if h and g >= 0}
    fixed_mask = hard | np.array([g >= 0 and int(g) in fixed_groups for g in groups], dtype=bool)
    fixed = int(sum(it.tokens for it, f in zip(items, fixed_mask) if f))
    if fixed > room:
        raise BudgetError(
            f"budget: the system prompt, pinned messages and tool definitions alone need {fixed + REPLY_PRIMING} "
            f"tokens but the budget is {budget} ({fixed - room} over); raise the budget or unpin messages"
        )
    contents = [it.message.get("content") for it in items]
    strings = [c for c in contents if isinstance(c, str)]
    by_text = dict(zip(strings, cache.count_texts(strings, tokenizer)))
    text_tokens = [by_text[c] if isinstance(c, str) else 0 for c in contents]
    current = [i for i in current_turn(items) if not fixed_mask[i]]
    last_user = max((i for i, it in enumerate(items) if it.role == "user"), default=None)
    traded = {last_user} if not run.question_is_current and last_user in current else set()
    cuts, cut_costs = _current_forms(
        items, current, text_tokens, room - fixed, budget, fixed, {i: config.summary_ratio for i in traded}
    )
    zone = zones(items, strategy, room)
    soft = (soft_protected(items, config, run.protect_recent) | np.array([z == "window" for z in zone])
            | critical_protected(items, config, room)) & ~hard
    targets: dict[int, int] = {}
    marker = int(tokenizer.count(SUMMARY_MARKER))
    base = message_values(scores, items)
    duplicates = later_copies(items)
    for i in duplicates:
        # An exact copy of a later message adds nothing while that one is there.
        base[i] = 0.0
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
        if i in cut_costs:
            # The current turn: verbatim, shortened or minimal, never dropped.
            cost[:] = [*cut_costs[i], unavailable]
            if i in traded:
                value[:] = [CURRENT_PRESENT + SOFT_VERBATIM_BONUS + b, CURRENT_PRESENT + b * SUMMARY_SHARE,
                            CURRENT_PRESENT + b * CLEAR_SHARE, 0.0]
            else:
                value[:] = [3 * CURRENT_PRESENT + b, 2 * CURRENT_PRESENT + b, CURRENT_PRESENT + b, 0.0]
            continue
        if it.tool_call_ids:
            # The call itself stays whole; its results carry the shortening.
            cost[SUMMARY] = cost[CLEAR] = it.tokens
            value[SUMMARY] = value[CLEAR] = value[KEEP] * 0.999
            continue
        ratio = min(config.summary_ratio, 0.15) if zone[i] == "heavy" else config.summary_ratio
        target = max(config.min_summary_tokens, int(text_tokens[i] * ratio))
        if zone[i] != "key" and text_tokens[i] > target + marker + SEAM_SLACK and it.kind not in STATE_KINDS:
            targets[i] = target
            cost[SUMMARY] = it.tokens - text_tokens[i] + marker + target + SEAM_SLACK
            value[SUMMARY] = SOFT_PRESENT + b * SUMMARY_SHARE if is_soft else b * SUMMARY_SHARE
            if zone[i] in ("summarize", "heavy") and not fixed_mask[i]:
                cost[KEEP] = unavailable
        if it.kind in CLEARABLE_KINDS and not is_soft:
            stub = int(tokenizer.count(placeholder(it)))
            if stub + SEAM_SLACK < text_tokens[i]:
                cost[CLEAR] = it.tokens - text_tokens[i] + stub + SEAM_SLACK
                value[CLEAR] = b * CLEAR_SHARE
    costs = np.array(cost_rows, dtype=np.int64).reshape(n, 4)
    values = np.array(value_rows, dtype=np.float64).reshape(n, 4)
    chunks: list[Chunk] = []
    if strategy == "multi_level":
        movable = movable_for_chunks(items, hard | soft | _in_current(n, current), groups, CHUNK_SIZE)
        chunks = make_chunks(items, movable, groups, tokenizer, config.summary_ratio, config.min_summary_tokens)
    in_chunk = {i for c in chunks for i in c.indices}
    rows = [i for i in range(n) if i not in in_chunk]
    chunk_costs, chunk_values = _chunk_options(chunks, items, base, room, tokenizer)
    gap_markers = strategy == "compacted"
    # Gap markers cost tokens only once the choices are known: the room holds
    # a reserve for them, raised and solved again until the markers fit it.
    marker_cost = _system_message_cost(gap_marker(n), tokenizer) if gap_markers else 0
    reserve = 0

    def solve() -> tuple[np.ndarray, Any]:
        return select_options(
            np.vstack([costs[rows], chunk_costs]), np.vstack([values[rows], chunk_values]), room - reserve,
            protected=np.concatenate([hard[rows], np.zeros(len(chunks), dtype=bool)]),
            groups=np.concatenate([groups[rows], np.full(len(chunks), -1, dtype=np.int64)]), return_info=True,
        )

    choices, info = solve()
    if config.expand_neighbours and pull_in_neighbours(items, rows, choices, values, base):
        choices, info = solve()
    notes: list[str] = []
    unmarked = choices, info
    while gap_markers:
        needed = count_gap_markers([int(c) != DROP for c in choices]) * marker_cost
        if needed <= reserve:
            break
        reserve = needed
        try:
            if room - reserve < fixed:
                raise BudgetError("no room for the gap markers")
            choices, info = solve()
        except BudgetError:
            # The markers only point out gaps: without room for them the
            # context goes without, as planned before they were reserved.
            (choices, info), gap_markers = unmarked, False
            notes.append("no room for gap markers: omitted runs of messages are not marked")
    chosen = [DROP] * n
    chosen_values = [0.0] * n
    for row, i in enumerate(rows):
        # A tool call shares its results' choice but is itself always kept whole.
        c = int(choices[row])
        chosen[i] = KEEP if items[i].tool_call_ids and c in (SUMMARY, CLEAR) else c
        chosen_values[i] = float(values[i, chosen[i]])
    for i, forms in cuts.items():
        if chosen[i] in (SUMMARY, CLEAR) and not forms[chosen[i]]:
            chosen[i] = KEEP  # a current-turn message whose group was shortened, itself whole
    for k, chunk in enumerate(chunks):
        option = int(choices[len(rows) + k])
        chunk.level = {0: 1, 1: 2}.get(option, 0)
        for i in chunk.indices:
            chosen[i] = SUMMARY if chunk.level else DROP
            chosen_values[i] = float(chunk_values[k, option]) / len(chunk.indices)
    return Plan(
        strategy=strategy,
        choices=chosen,
        summary_targets={
            i: targets[i] for i in rows if chosen[i] == SUMMARY and i in targets and i not in cut_costs
        },
        values=chosen_values,
        gap=float(info["gap"]),
        gap_markers=gap_markers,
        chunks=chunks,
        cuts={i: cuts[i][chosen[i]] for i in cuts if chosen[i] in (SUMMARY, CLEAR) and cuts[i][chosen[i]]},
        current=current_turn(items),
        duplicates=duplicates,
        notes=notes,
    )


def _in_current(n: int, current: Sequence[int]) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[list(current)] = True
    return mask


def _current_forms(
    items: Sequence[Item],
    current: Sequence[int],
    text_tokens: Sequence[int],
    free: int,
    budget: int,
    fixed: int,
    ratios: dict[int, float],
) -> tuple[dict[int, tuple[int, int, int]], dict[int, tuple[int, int, int]]]:
    """The three forms of each current-turn message (verbatim, shortened,
    minimal): the token limit of the content for each shortened form (0 =
    verbatim) and each form's cost. Texts share CURRENT_SHARE of the room
    left beside everything fixed, in proportion to their size, or keep at
    most `ratios[i]` of their size where one is given; a tool call and any
    message without text content stay whole in every form. Raises
    `BudgetError` when even the minimal forms cannot fit."""
    shrinkable = [i for i in current if isinstance(items[i].message.get("content"), str)
                  and not items[i].tool_call_ids and text_tokens[i] > CURRENT_MIN_TOKENS]
    overhead = sum(items[i].tokens - (text_tokens[i] if i in shrinkable else 0) for i in current)
    minimal = overhead + CURRENT_MIN_TOKENS * len(shrinkable)
    if minimal > free:
        full = sum(items[i].tokens for i in current)
        raise BudgetError(
            f"budget: the current turn needs at least {minimal} tokens even shortened ({full} in full) and "
            f"the system prompt, pinned messages and reply priming {fixed + REPLY_PRIMING}, but the budget is "
            f"{budget}; raise the budget to at least {minimal + fixed + REPLY_PRIMING}"
        )
    share = max(0, int((free - overhead) * CURRENT_SHARE))
    total_text = sum(text_tokens[i] for i in shrinkable) or 1
    cuts: dict[int, tuple[int, int, int]] = {}
    costs: dict[int, tuple[int, int, int]] = {}
    for i in current:
        if i not in shrinkable:
            cuts[i] = (0, 0, 0)
            costs[i] = (items[i].tokens,) * 3
            continue
        head_room = items[i].tokens - text_tokens[i]
        shortened = share * text_tokens[i] // total_text
        if i in ratios:
            shortened = min(shortened, int(text_tokens[i] * ratios[i]))
        shortened = min(text_tokens[i], max(CURRENT_MIN_TOKENS, shortened))
        cuts[i] = (0, shortened if shortened < text_tokens[i] else 0, CURRENT_MIN_TOKENS)
        costs[i] = (items[i].tokens, head_room + shortened, head_room + CURRENT_MIN_TOKENS)
    return cuts, costs


def _system_message_cost(content: str, tokenizer: Tokenizer) -> int:
    return int(count_messages([{"role": "system", "content": content}], tokenizer=tokenizer)) - REPLY_PRIMING


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
        costs[k, DROP] = 0
        if not chunk.text.strip():
            continue  # nothing to summarise: the chunk can only be dropped
        worth = float(base[chunk.indices].sum()) * SUMMARY_SHARE
        for option, (level, target) in enumerate(zip((1, 2), chunk.targets)):
            framing = _system_message_cost(chunk_marker(chunk, items, level), tokenizer)
            costs[k, option] = framing + target + SEAM_SLACK
            values[k, option] = worth * (1.0 if level == 1 else LEVEL2_SHARE)
    return costs, values
