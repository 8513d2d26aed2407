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

from ctxfold._core import select_options
from ctxfold.engine.chunks import CHUNK_SIZE, Chunk
from ctxfold.engine.messages import current_turn
from ctxfold.engine.options import (
    CLEAR, DROP, KEEP, PLAIN, SUMMARY, SUMMARY_SHARE, Options, message_options, system_message_cost,
)
from ctxfold.errors import BudgetError
from ctxfold.text.crossref import resolve_references
from ctxfold.tokens import REPLY_PRIMING
from ctxfold.engine.results import Item
from ctxfold.engine.run import RunContext

__all__ = [
    "Plan", "plan_context", "plan_items", "choose_strategy", "zones", "pull_in_neighbours", "count_gap_markers",
    "gap_marker",
]

# Neighbour expansion: a kept answer lifts the dropped question it replies to
# by this share of its own value.
NEIGHBOUR_SHARE = 0.5
# With `annotate_references`, the share of the room held for reference notes.
REFERENCE_SHARE = 0.02


class Plan(msgspec.Struct, kw_only=True):
    """Every decision about the context: the strategy and one form per
    message, with what rendering needs to write the chosen forms."""

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
    """Messages shortened to head + tail (the current turn, long tool output): the token limit of each content."""
    placeholders: dict[int, str] = msgspec.field(default_factory=dict)
    """The text of each message planned as CLEAR."""
    plain: dict[int, str] = msgspec.field(default_factory=dict)
    """Messages kept (KEEP) without their date note: the text each is kept as."""
    references: dict[int, str] = msgspec.field(default_factory=dict)
    """Kept messages whose pronouns point into messages left out: the line
    naming what they point to (``[refs: it = the payment service]``)."""
    current: list[int] = msgspec.field(default_factory=list)
    """The indices of the current turn."""
    duplicates: dict[int, int] = msgspec.field(default_factory=dict)
    """Messages repeated verbatim later: the index of the last copy."""
    superseded: dict[int, int] = msgspec.field(default_factory=dict)
    """File reads whose path is read again later: the index of the last read."""
    notes: list[str] = msgspec.field(default_factory=list)
    """What the planner had to give up, for the report's warnings."""


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


def gap_marker(omitted: int) -> str:
    """The system message text that stands for a run of `omitted` dropped messages."""
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


def plan_context(items: Sequence[Item], scores: np.ndarray, run: RunContext) -> Plan:
    """Every decision about the context: the strategy (everything as it is
    when it fits, under ``full`` or ``auto``), then one form per message
    (`plan_items`), structural compaction's forms among them."""
    needed = sum(it.tokens for it in items) + REPLY_PRIMING
    strategy: str = run.config.strategy
    if strategy == "auto" or needed <= run.budget:
        strategy = choose_strategy(needed, run.budget)
    if strategy == "full" and needed <= run.budget:
        n = len(items)
        return Plan(strategy="full", choices=[KEEP] * n, summary_targets={}, values=[0.0] * n)
    return plan_items(items, scores, run, "optimal" if strategy == "full" else strategy)


def plan_items(items: Sequence[Item], scores: np.ndarray, run: RunContext, strategy: str = "optimal") -> Plan:
    """One form per message within `run.budget`, from `message_options` under
    `strategy`'s zones: the knapsack's choice, solved again while gap markers
    or neighbour expansion change what it must fit or what things are worth.
    `run.question_is_current` says that the last user message is what the
    next answer is for (no other query was given), so its verbatim form
    outranks any history; otherwise it is still always present, but its form
    is traded against the history by value. `run.protect_recent`: whether
    the last `config.protect_last` messages are soft-protected."""
    n = len(items)
    room = run.budget - REPLY_PRIMING
    options = message_options(items, scores, run, zones(items, strategy, room), chunked=strategy == "multi_level")
    values, rows, chunks = options.values, options.rows, options.chunks
    gap_markers = strategy == "compacted"
    # Gap markers cost tokens only once the choices are known: the room holds
    # a reserve for them, raised and solved again until the markers fit it.
    marker_cost = system_message_cost(gap_marker(n), run) if gap_markers else 0
    reserve = 0
    # Reference notes are known only once the choices are: a share of the
    # room is held for them (unless the protected messages need it).
    held = int(room * REFERENCE_SHARE) if run.config.annotate_references else 0

    def solve() -> tuple[np.ndarray, Any]:
        return select_options(
            np.vstack([options.costs[rows], options.chunk_costs]), np.vstack([values[rows], options.chunk_values]),
            room - reserve - held,
            protected=np.concatenate([options.hard[rows], np.zeros(len(chunks), dtype=bool)]),
            groups=np.concatenate([options.groups[rows], np.full(len(chunks), -1, dtype=np.int64)]), return_info=True,
        )

    try:
        choices, info = solve()
    except BudgetError:
        if not held:
            raise
        held = 0
        choices, info = solve()
    # Between two people the second speaker does not answer the first: the
    # cross-reference layer already lifts both neighbours of a relevant message.
    if run.config.expand_neighbours and run.people is None and pull_in_neighbours(
            items, rows, choices, values, options.base):
        choices, info = solve()
    notes: list[str] = []
    unmarked = choices, info
    while gap_markers:
        needed = count_gap_markers([int(c) != DROP for c in choices]) * marker_cost
        if needed <= reserve:
            break
        reserve = needed
        try:
            if room - reserve - held < options.fixed:
                raise BudgetError("no room for the gap markers")
            choices, info = solve()
        except BudgetError:
            # The markers only point out gaps: without room for them the
            # context goes without, as planned before they were reserved.
            (choices, info), gap_markers = unmarked, False
            notes.append("no room for gap markers: omitted runs of messages are not marked")
    chosen, plain = _chosen(items, options, choices)
    planned = set(rows)  # messages in a chunk take the chunk's form, not their own
    chosen_values = [0.0] * n
    for row, i in enumerate(rows):
        chosen_values[i] = float(values[i, int(choices[row])])
    for k, chunk in enumerate(chunks):
        option = int(choices[len(rows) + k])
        chunk.level = {0: 1, 1: 2}.get(option, 0)
        for i in chunk.indices:
            chosen_values[i] = float(options.chunk_values[k, option]) / len(chunk.indices)
    spent = int(np.vstack([options.costs[rows], options.chunk_costs])[np.arange(len(choices)), choices].sum())
    free = room - (reserve if gap_markers else 0) - spent
    references = (_reference_notes(items, chosen, plain, chosen_values, free, run)
                  if run.config.annotate_references else {})
    return Plan(
        strategy=strategy,
        choices=chosen,
        summary_targets={i: t for i, t in options.summary_targets.items() if chosen[i] == SUMMARY and i in planned},
        values=chosen_values,
        gap=float(info["gap"]),
        gap_markers=gap_markers,
        chunks=chunks,
        cuts={i: limits[chosen[i]] for i, limits in options.cuts.items()
              if i in planned and chosen[i] in (SUMMARY, CLEAR) and limits[chosen[i]]},
        placeholders={i: text for i, text in options.placeholders.items() if chosen[i] == CLEAR},
        plain=plain,
        references=references,
        current=options.current,
        duplicates=options.duplicates,
        superseded=options.superseded,
        notes=notes,
    )


def _chosen(items: Sequence[Item], options: Options, choices: np.ndarray) -> tuple[list[int], dict[int, str]]:
    """The knapsack's choice per message, in the plan's terms, and the
    messages kept without their date note (the text each is kept as). A tool
    call that shares its results' shortened form is itself kept whole, and
    so is a current-turn message whose group was shortened around it, or a
    member without a note of a group kept without notes; a message in a
    chunk is summarised with it or dropped with it."""
    chosen = [DROP] * len(items)
    plain: dict[int, str] = {}
    for row, i in enumerate(options.rows):
        c = int(choices[row])
        if c == PLAIN:
            if i in options.plain:
                plain[i] = options.plain[i]
            c = KEEP
        chosen[i] = KEEP if items[i].tool_call_ids and c in (SUMMARY, CLEAR) else c
    for i in options.current:
        forms = options.cuts.get(i)
        if forms and chosen[i] in (SUMMARY, CLEAR) and not forms[chosen[i]]:
            chosen[i] = KEEP
    for k, chunk in enumerate(options.chunks):
        option = int(choices[len(options.rows) + k])
        for i in chunk.indices:
            chosen[i] = SUMMARY if option in (0, 1) else DROP
    return chosen, plain


def _reference_notes(
    items: Sequence[Item], chosen: Sequence[int], plain: dict[int, str], values: Sequence[float], free: int,
    run: RunContext,
) -> dict[int, str]:
    """A line after each verbatim message whose references resolve
    (`resolve_references`) into a message that is not there verbatim, naming
    what they point to; most valuable messages first, each while its exact
    cost fits the `free` tokens the plan left."""
    verbatim = {i for i, c in enumerate(chosen) if c == KEEP}
    found: dict[int, list[str]] = {}
    for ref in resolve_references([it.text for it in items]):
        if ref.message in verbatim and ref.antecedent_message not in verbatim:
            named = f"{ref.text} = {ref.antecedent}"
            if named not in found.setdefault(ref.message, []):
                found[ref.message].append(named)
    out: dict[int, str] = {}
    for i in sorted(found, key=lambda i: -values[i]):
        content = items[i].message.get("content")
        if not isinstance(content, str):
            continue
        text = plain.get(i, content)
        note = f"[refs: {'; '.join(found[i])}]"
        cost = int(run.tokenizer.count(f"{text}\n{note}")) - int(run.tokenizer.count(text))
        if cost <= free:
            out[i] = note
            free -= cost
    return out


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
        values[j, [KEEP, SUMMARY, PLAIN]] += boost * np.array([1.0, SUMMARY_SHARE, 1.0])
        lifted = True
    return lifted


