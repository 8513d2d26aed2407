"""Options: every message's candidate forms, built once, each with its exact
cost (an upper bound of what rendering it costs) and its value for the
query. The plan picks one form per message; rendering writes the picked
forms, with the texts built here.

The forms, one column each: verbatim (KEEP, with its date note when it has
one); shortened (SUMMARY: a summary to a token target, or a head + tail cut
for tool output over `max_tool_output_tokens` and for the current turn); a
restorable placeholder (CLEAR) for tool results, file reads, debug logs and
intermediate outputs; nothing (DROP); verbatim without its date note
(PLAIN). Structural compaction lives here as those cheap forms, so a stale
tool result is cleared, or a long tool output cut, when the knapsack finds
that worth more than whatever else it would give up. Multi_level adds
chunk summaries at two levels."""

from __future__ import annotations

import re
from collections.abc import Sequence

import msgspec
import numpy as np

from ctxfold.engine.chunks import CHUNK_SIZE, LEVEL2_SHARE, Chunk, make_chunks, movable_for_chunks
from ctxfold.engine.compaction import CLEARABLE_KINDS, later_copies, placeholder, read_path, superseded_reads
from ctxfold.engine.config import EngineConfig
from ctxfold.engine.messages import current_turn, hard_protected, tool_groups
from ctxfold.engine.results import STATE_KINDS, Item
from ctxfold.engine.run import RunContext
from ctxfold.errors import BudgetError
from ctxfold.text.entity_repository import critical_messages
from ctxfold.text.temporal import asks_about_time, without_said
from ctxfold.tokens import REPLY_PRIMING, count_messages

__all__ = [
    "Options", "message_options", "message_values", "length_weights", "shortest_tokens", "soft_protected",
    "standing_instructions",
    "critical_protected",
    "system_message_cost", "KEEP", "SUMMARY", "CLEAR", "DROP", "PLAIN", "SUMMARY_MARKER", "SEAM_SLACK",
]

KEEP, SUMMARY, CLEAR, DROP, PLAIN = 0, 1, 2, 3, 4
FORMS = 5
SUMMARY_MARKER = "[summary] "
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
# In a chat between two people value grows nearly in proportion to length:
# the plan packs almost by score alone, leaning a little to short turns,
# which keeps the most evidence there (docs/benchmarks.md).
PEOPLE_LENGTH_POWER = 0.9
# The recent turns are soft-protected while their shortest forms take at most
# this share of the room: at a budget of a few hundred tokens they would
# otherwise crowd out what the question needs (docs/benchmarks.md).
RECENT_SHARE = 0.25
# A question traded against the history (another query was given) at its
# minimal head + tail keeps this share of its value.
SUMMARY_SHARE, MINIMAL_SHARE = 0.35, 0.02
# A placeholder keeps an agent's step visible and recallable (the model need
# not run the tool again to know it ran): worth what a summary is.
PLACEHOLDER_SHARE = SUMMARY_SHARE
# A message's date note (``[dates: yesterday = ...]``) is worth this share of
# the message: it says when once the neighbours that did are gone, but must
# not cost the evidence it annotates; more when the question asks when
# (docs/benchmarks.md, "... date notes as forms of their own").
NOTE_SHARE, TIME_NOTE_SHARE = 0.05, 0.25
# A head + tail cut of a long tool output keeps what such output is read for
# (the command's start, its result at the end): nearly all of its value, so it
# is given up before any other message is.
TOOL_CUT_SHARE = 0.9
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


class Options(msgspec.Struct, kw_only=True):
    """The knapsack's rows and the texts of the forms they stand for."""

    costs: np.ndarray
    """``(n, FORMS)`` token cost of each form (a value above the room: unavailable)."""
    values: np.ndarray
    """``(n, FORMS)`` value of each form."""
    base: np.ndarray
    """What keeping each message verbatim is worth (`message_values`)."""
    hard: np.ndarray
    """Hard-protected: kept verbatim whatever it costs."""
    soft: np.ndarray
    """Soft-protected: always present, verbatim when it fits."""
    groups: np.ndarray
    """Tool groups (`tool_groups`): one choice for a call and its results."""
    fixed: int
    """Tokens taken whatever the plan: hard-protected messages with their tool groups."""
    current: list[int]
    """The current turn (`current_turn`)."""
    summary_targets: dict[int, int]
    """Token target of the summary text of each message whose SHORT form is a summary."""
    cuts: dict[int, tuple[int, int, int]]
    """Head + tail cuts: for each form column, the token limit of the content (0: not a cut)."""
    placeholders: dict[int, str]
    """The text of each CLEAR form."""
    plain: dict[int, str]
    """The content of each PLAIN form: the text without its date note."""
    duplicates: dict[int, int]
    """Messages repeated verbatim later: the index of the last copy."""
    superseded: dict[int, int]
    """File reads whose path is read again later: the index of the last read."""
    chunks: list[Chunk]
    """Multi_level: chunks of older messages, each a row of its own."""
    chunk_costs: np.ndarray
    chunk_values: np.ndarray
    rows: list[int]
    """The messages planned one by one (the rest are in chunks)."""


def message_values(scores: np.ndarray, items: Sequence[Item], between_people: bool) -> np.ndarray:
    """What keeping each message is worth: its score scaled so the best is 1,
    to the power SCORE_POWER (plus a hair so that everything is worth keeping
    when there is room), times `length_weights`."""
    clipped = np.clip(scores, 0, None)
    values: np.ndarray = ((clipped / max(float(clipped.max(initial=0.0)), 1e-12)) ** SCORE_POWER + 1e-6) * length_weights(
        items, between_people)
    return values


def length_weights(items: Sequence[Item], between_people: bool) -> np.ndarray:
    """(tokens without the date note / median tokens of the same role) ** LENGTH_POWER per message
    (PEOPLE_LENGTH_POWER in a chat `between_people`, see `people_in_chat`):
    1 for a message of its role's typical length."""
    power = PEOPLE_LENGTH_POWER if between_people else LENGTH_POWER
    # A date note says when, not what: the length that counts is the message's own.
    tokens = np.array([max(it.tokens - it.note_tokens, 1) for it in items], dtype=np.float64)
    roles = np.array([it.role for it in items], dtype=object)
    relative = np.ones(len(items))
    for role in set(roles.tolist()):
        same = roles == role
        relative[same] = tokens[same] / float(np.median(tokens[same]))
    weights: np.ndarray = relative ** power
    return weights


def shortest_tokens(item: Item, config: EngineConfig) -> int:
    """About what a soft-protected message costs at its shortest: a summary
    of `config.summary_ratio` of it (at least `config.min_summary_tokens`),
    or the message itself when that is no shorter."""
    return min(item.tokens, max(config.min_summary_tokens, int(item.tokens * config.summary_ratio)))


def soft_protected(
    items: Sequence[Item], config: EngineConfig, recent: bool, between_people: bool, room: int
) -> np.ndarray:
    """Messages kept present (verbatim when they fit, shortened otherwise):
    the last user message, agent-state kinds, the user's standing
    instructions (`standing_instructions`), and with `recent` the last
    `config.protect_last` messages, newest first, while their shortest forms
    take at most RECENT_SHARE of the `room`."""
    n = len(items)
    soft = np.zeros(n, dtype=bool)
    if recent:
        spent = 0
        for i in range(n - 1, max(0, n - config.protect_last) - 1, -1):
            spent += shortest_tokens(items[i], config)
            if spent > RECENT_SHARE * room:
                break
            soft[i] = True
    last_user = max((i for i, it in enumerate(items) if it.role == "user"), default=None)
    if last_user is not None:
        soft[last_user] = True
    for i, it in enumerate(items):
        soft[i] |= it.kind in ("active_task", "decision")
    soft |= standing_instructions(items, between_people)
    return soft


# "Always cite sources when I ask about history.", "From now on, answer in
# French.": a rule for every later answer, at the start of a sentence.
_STANDING = re.compile(
    r"(?:^|[.!?]\s+|\n)\s*(?:please\s+)?(?:always|never(?! mind)|from now on|don'?t ever|do not ever)\b",
    re.I,
)
# A longer message that opens with "Always..." is a task of its own (a prompt
# with its rules), scored like any other.
STANDING_MAX_TOKENS = 80


def standing_instructions(items: Sequence[Item], between_people: bool) -> np.ndarray:
    """The user's standing instructions to the assistant: short user messages
    that set a rule for the answers to come ("Always include version numbers
    when I ask about dependencies"). The next answer needs them whatever the
    question is, so they stay present. None in a chat `between_people`,
    where "never" and "always" are how people talk."""
    out = np.zeros(len(items), dtype=bool)
    if between_people:
        return out
    for i, it in enumerate(items):
        out[i] = it.role == "user" and it.tokens <= STANDING_MAX_TOKENS and _STANDING.search(it.text) is not None
    return out


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


def system_message_cost(content: str, run: RunContext) -> int:
    """The exact cost of a system message holding `content` (a marker or a chunk summary's frame)."""
    return int(count_messages([{"role": "system", "content": content}], tokenizer=run.tokenizer)) - REPLY_PRIMING


def message_options(
    items: Sequence[Item], scores: np.ndarray, run: RunContext, zone: Sequence[str], chunked: bool = False
) -> Options:
    """Every message's forms under the zones the plan chose (`plan.zones`):
    free (any form), window (verbatim first), summarize (no verbatim copy),
    heavy (summary at most 15%), key (verbatim or dropped, nothing between);
    `chunked` (multi_level) adds the chunk rows. Raises `BudgetError` when the
    protected messages, or the current turn at its smallest, cannot fit."""
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
    turn = current_turn(items)
    current = [i for i in turn if not fixed_mask[i]]
    last_user = max((i for i, it in enumerate(items) if it.role == "user"), default=None)
    traded = {last_user} if not run.question_is_current and last_user in current else set()
    cuts, cut_costs = _current_forms(
        items, current, text_tokens, room - fixed, budget, fixed, {i: config.summary_ratio for i in traded}
    )
    between_people = run.people is not None
    soft = (soft_protected(items, config, run.protect_recent, between_people, room) | np.array([z == "window" for z in zone])
            | critical_protected(items, config, room)) & ~hard
    targets: dict[int, int] = {}
    placeholders: dict[int, str] = {}
    marker = int(tokenizer.count(SUMMARY_MARKER))
    base = message_values(scores, items, between_people)
    duplicates = later_copies(items)
    for i in duplicates:
        # An exact copy of a later message adds nothing while that one is there.
        base[i] = 0.0
    stale = superseded_reads(items)
    cut_limit = config.max_tool_output_tokens
    # Built as Python lists (one row per message: keep, summary, clear, drop,
    # then plain), then one array: element-wise numpy writes would cost more
    # than the solve.
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
                # Another query was given: the last user message is always
                # present, but verbatim it is worth a bonus only where the
                # recent turns count (the question is about the present).
                bonus = SOFT_VERBATIM_BONUS if run.protect_recent else 0.0
                value[:] = [CURRENT_PRESENT + bonus + b, CURRENT_PRESENT + b * SUMMARY_SHARE,
                            CURRENT_PRESENT + b * MINIMAL_SHARE, 0.0]
            else:
                value[:] = [3 * CURRENT_PRESENT + b, 2 * CURRENT_PRESENT + b, CURRENT_PRESENT + b, 0.0]
            continue
        if it.tool_call_ids:
            # The call itself stays whole; its results carry the shortening.
            cost[SUMMARY] = cost[CLEAR] = it.tokens
            value[SUMMARY] = value[CLEAR] = value[KEEP] * 0.999
            continue
        if it.kind in STATE_KINDS:
            continue
        worth = b
        if i in stale and not is_soft:
            # The later read holds the file as it is now: this copy is worth its placeholder.
            worth = value[KEEP] = b * PLACEHOLDER_SHARE
        if it.role == "tool" and text_tokens[i] > cut_limit and not fixed_mask[i]:
            cuts[i] = (0, cut_limit, 0)
            cost[SUMMARY] = it.tokens - text_tokens[i] + cut_limit
            value[SUMMARY] = SOFT_PRESENT + b * TOOL_CUT_SHARE if is_soft else worth * TOOL_CUT_SHARE
        else:
            ratio = min(config.summary_ratio, 0.15) if zone[i] == "heavy" else config.summary_ratio
            target = max(config.min_summary_tokens, int(text_tokens[i] * ratio))
            if zone[i] != "key" and text_tokens[i] > target + marker + SEAM_SLACK:
                targets[i] = target
                cost[SUMMARY] = it.tokens - text_tokens[i] + marker + target + SEAM_SLACK
                value[SUMMARY] = SOFT_PRESENT + b * SUMMARY_SHARE if is_soft else worth * SUMMARY_SHARE
        if (i in targets or i in cuts) and zone[i] in ("summarize", "heavy") and not fixed_mask[i]:
            cost[KEEP] = unavailable
        if it.kind in CLEARABLE_KINDS and not is_soft:
            stub = placeholder(it)
            stub_tokens = int(tokenizer.count(stub))
            if stub_tokens + SEAM_SLACK < text_tokens[i]:
                placeholders[i] = stub
                cost[CLEAR] = it.tokens - text_tokens[i] + stub_tokens + SEAM_SLACK
                value[CLEAR] = b * PLACEHOLDER_SHARE
    plain = _plain_forms(items, cost_rows, value_rows, base, groups, text_tokens, room, run)
    costs = np.array(cost_rows, dtype=np.int64).reshape(n, FORMS)
    values = np.array(value_rows, dtype=np.float64).reshape(n, FORMS)
    chunks: list[Chunk] = []
    if chunked:
        movable = movable_for_chunks(items, hard | soft | _in_current(n, current), groups, CHUNK_SIZE)
        chunks = make_chunks(items, movable, groups, tokenizer, config.summary_ratio, config.min_summary_tokens)
    in_chunk = {i for c in chunks for i in c.indices}
    chunk_costs, chunk_values = _chunk_options(chunks, base, room, run)
    return Options(
        costs=costs, values=values, base=base, hard=hard, soft=soft, groups=groups, fixed=fixed,
        current=turn, summary_targets=targets, cuts=cuts, placeholders=placeholders, plain=plain,
        duplicates=duplicates, superseded=_last_reads(items, stale), chunks=chunks, chunk_costs=chunk_costs,
        chunk_values=chunk_values, rows=[i for i in range(n) if i not in in_chunk],
    )


def _plain_forms(
    items: Sequence[Item], cost_rows: list[list[int]], value_rows: list[list[float]], base: np.ndarray,
    groups: np.ndarray, text_tokens: Sequence[int], room: int, run: RunContext,
) -> dict[int, str]:
    """Adds the PLAIN column to the rows: a message with a date note can be
    kept without it, worth NOTE_SHARE of its value less; a tool group's other
    members stay whole in that column, so the group can take it. Returns the
    content of each PLAIN form."""
    noted = [i for i, it in enumerate(items) if it.date_note and cost_rows[i][KEEP] <= room]
    about_time = asks_about_time(run.query)
    # The day a message was said answers questions about time; elsewhere only its dates are worth their room.
    shares = {i: TIME_NOTE_SHARE if about_time else NOTE_SHARE if without_said(items[i].date_note) else 0.0 for i in noted}
    bodies = [str(items[i].message["content"])[: -len(items[i].date_note) - 1] for i in noted]
    plain = dict(zip(noted, bodies))
    body_tokens = dict(zip(noted, run.cache.count_texts(bodies, run.tokenizer)))
    for i, (cost, value) in enumerate(zip(cost_rows, value_rows)):
        if i in plain:
            cost.append(cost[KEEP] - text_tokens[i] + body_tokens[i])
            value.append(value[KEEP] - float(base[i]) * shares[i])
        elif groups[i] >= 0:
            cost.append(cost[KEEP])
            value.append(value[KEEP] * 0.999)
        else:
            cost.append(room + 1)
            value.append(0.0)
    return plain


def _in_current(n: int, current: Sequence[int]) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[list(current)] = True
    return mask


def _last_reads(items: Sequence[Item], stale: set[int]) -> dict[int, int]:
    """For each superseded file read, the index of the last read of its path."""
    last: dict[str, int] = {}
    paths = {i: read_path(it) for i, it in enumerate(items) if it.kind == "file_read"}
    for i, path in paths.items():
        if path:
            last[path] = i
    return {i: last[path] for i in stale if (path := paths.get(i))}


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


def _chunk_options(chunks: Sequence[Chunk], base: np.ndarray, room: int, run: RunContext) -> tuple[np.ndarray, np.ndarray]:
    """Knapsack rows of the chunks: level-1 summary, level-2 summary, -, drop.
    Costs are upper bounds: framing, marker, the target and the seam slack."""
    costs = np.full((len(chunks), FORMS), room + 1, dtype=np.int64)
    values = np.zeros((len(chunks), FORMS), dtype=np.float64)
    for k, chunk in enumerate(chunks):
        costs[k, DROP] = 0
        if not chunk.text.strip():
            continue  # nothing to summarise: the chunk can only be dropped
        worth = float(base[chunk.indices].sum()) * SUMMARY_SHARE
        for option, (marker, target) in enumerate(zip(chunk.markers, chunk.targets)):
            costs[k, option] = system_message_cost(marker, run) + target + SEAM_SLACK
            values[k, option] = worth * (1.0 if option == 0 else LEVEL2_SHARE)
    return costs, values
