"""The planning stage alone: plan_items on hand-made items and scores, its
promises checked against the prices of the forms it chose."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ctxfold import BudgetError
from ctxfold.engine.cache import EngineCache
from ctxfold.engine.config import EngineConfig
from ctxfold.engine.messages import current_turn, parse_messages, tool_groups
from ctxfold.engine.options import (
    CLEAR, DROP, KEEP, SEAM_SLACK, SUMMARY, SUMMARY_MARKER,
)
from ctxfold.engine.plan import plan_items
from ctxfold.engine.run import RunContext
from ctxfold.summarize.head_tail import HeadTailSummarizer
from ctxfold.tokens import REPLY_PRIMING, count_messages, get_tokenizer

TOK = get_tokenizer(encoding="cl100k_base")
CONFIG = EngineConfig()


def run(budget: int, config: EngineConfig = CONFIG, **facts) -> RunContext:
    """A run of `budget` tokens with a fresh cache; planning reads no summarizer, embedder or query."""
    return RunContext(tokenizer=TOK, config=config, cache=EngineCache(), summarizer=HeadTailSummarizer(tokenizer=TOK),
                      embedder=None, budget=budget, query="", **facts)


def text_tokens(it) -> int:
    content = it.message.get("content")
    return int(TOK.count(content)) if isinstance(content, str) else 0


def planned_cost(items, plan) -> int:
    """What the chosen forms may cost at most, by the plan's own pricing."""
    marker = int(TOK.count(SUMMARY_MARKER))
    cost = 0
    in_chunks = {i for c in plan.chunks for i in c.indices}
    for c in plan.chunks:
        if c.level:
            frame = count_messages([{"role": "system", "content": c.markers[c.level - 1]}], tokenizer=TOK) - REPLY_PRIMING
            cost += frame + c.targets[c.level - 1] + SEAM_SLACK
    for i, (it, choice) in enumerate(zip(items, plan.choices)):
        if choice == DROP or i in in_chunks:
            continue
        if i in plan.cuts:
            cost += it.tokens - text_tokens(it) + plan.cuts[i]
        elif choice == KEEP:
            cost += it.tokens
        elif choice == SUMMARY:
            cost += it.tokens - text_tokens(it) + marker + plan.summary_targets[i] + SEAM_SLACK
        elif choice == CLEAR:
            cost += it.tokens - text_tokens(it) + int(TOK.count(plan.placeholders[i])) + SEAM_SLACK
    return cost


def chat(turns: int, system: bool = True) -> list[dict]:
    msgs = [{"role": "system", "content": "You are terse."}] if system else []
    for k in range(turns):
        msgs.append({"role": "user", "content": f"question {k} " + "word " * 40})
        msgs.append({"role": "assistant", "content": f"answer {k} " + "text " * 60})
    msgs.append({"role": "user", "content": "final question"})
    return msgs


def test_everything_kept_when_it_fits():
    items = parse_messages(chat(3), TOK)
    budget = sum(it.tokens for it in items) + REPLY_PRIMING
    plan = plan_items(items, np.ones(len(items)), run(budget))
    assert plan.choices == [KEEP] * len(items)
    assert plan.current == [len(items) - 1]


def test_chosen_forms_fit_the_room_and_the_best_scored_history_wins():
    items = parse_messages(chat(8), TOK)
    scores = np.full(len(items), 0.1)
    scores[3:5] = 1.0  # the second exchange
    plan = plan_items(items, scores, run(400))
    assert planned_cost(items, plan) <= 400 - REPLY_PRIMING
    assert plan.choices[0] == KEEP  # system
    assert plan.choices[3] != DROP and plan.choices[4] != DROP
    assert plan.choices[-1] == KEEP
    # A low-scored exchange outside the protected tail goes first.
    assert plan.choices[1] == plan.choices[2] == DROP
    for i, target in plan.summary_targets.items():
        assert plan.choices[i] == SUMMARY and target >= CONFIG.min_summary_tokens


def test_pinned_message_kept_verbatim_whatever_its_score():
    msgs = chat(8)
    msgs[1]["pinned"] = True
    items = parse_messages(msgs, TOK)
    scores = np.linspace(1.0, 0.5, len(items))
    scores[1] = 0.0
    plan = plan_items(items, scores, run(400))
    assert plan.choices[1] == KEEP


def test_current_turn_shortened_never_dropped():
    msgs = [*chat(2), {"role": "user", "content": " ".join(f"w{k}" for k in range(1500))}]
    items = parse_messages(msgs, TOK)
    plan = plan_items(items, np.ones(len(items)), run(300))
    last = len(items) - 1
    assert plan.current == [last]
    assert plan.choices[last] in (SUMMARY, CLEAR) and 0 < plan.cuts[last] < text_tokens(items[last])
    assert planned_cost(items, plan) <= 300 - REPLY_PRIMING


def test_current_turn_includes_the_tool_round_the_input_ends_with():
    msgs = [*chat(6), {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "ra " * 100},
        {"role": "tool", "tool_call_id": "b", "content": "rb " * 100}]
    items = parse_messages(msgs, TOK)
    n = len(items)
    assert current_turn(items) == [n - 4, n - 3, n - 2, n - 1]
    plan = plan_items(items, np.zeros(n), run(350))
    assert all(plan.choices[i] != DROP for i in range(n - 4, n))
    assert plan.choices[n - 3] == KEEP  # the call itself stays whole
    assert planned_cost(items, plan) <= 350 - REPLY_PRIMING


def test_tool_call_and_its_results_share_one_choice():
    msgs = [{"role": "user", "content": "start"}]
    for k in range(4):
        msgs += [{"role": "assistant", "content": None, "tool_calls": [
                     {"id": f"c{k}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": f"c{k}", "content": f"result {k} " * 80}]
    msgs.append({"role": "user", "content": "go on"})
    items = parse_messages(msgs, TOK)
    scores = np.zeros(len(items))
    scores[1] = 1.0  # the first call scores high, its result low
    plan = plan_items(items, scores, run(250, protect_recent=False))
    groups = tool_groups(items)
    for g in set(groups.tolist()) - {-1}:
        dropped = {plan.choices[i] == DROP for i in range(len(items)) if groups[i] == g}
        assert len(dropped) == 1
    assert plan.choices[1] != DROP and plan.choices[2] != DROP
    assert DROP in plan.choices


def test_protect_recent_false_leaves_the_last_turns_unprotected():
    items = parse_messages(chat(8), TOK)
    n = len(items)
    scores = np.linspace(1.0, 0.0, n)  # the recent turns score lowest
    protected = plan_items(items, scores, run(450))
    free = plan_items(items, scores, run(450, protect_recent=False))
    tail = range(n - CONFIG.protect_last, n - 1)
    assert all(protected.choices[i] != DROP for i in tail)
    assert any(free.choices[i] == DROP for i in tail)
    # Either way the current turn is there.
    assert protected.choices[-1] == free.choices[-1] == KEEP


def test_budget_below_the_fixed_messages_is_a_budget_error():
    items = parse_messages([{"role": "system", "content": "rule " * 200}, {"role": "user", "content": "hi"}], TOK)
    with pytest.raises(BudgetError, match="raise the budget or unpin messages"):
        plan_items(items, np.ones(2), run(100))


@st.composite
def histories(draw):
    msgs: list[dict] = []
    if draw(st.booleans()):
        msgs.append({"role": "system", "content": "system " * draw(st.integers(1, 20))})
    for k in range(draw(st.integers(1, 12))):
        size = draw(st.integers(1, 150))
        shape = draw(st.sampled_from(["user", "assistant", "tool", "pinned"]))
        if shape == "tool":
            msgs += [{"role": "assistant", "content": None, "tool_calls": [
                         {"id": f"c{k}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                     {"role": "tool", "tool_call_id": f"c{k}", "content": "out " * size}]
        else:
            role = "user" if shape == "pinned" else shape
            msgs.append({"role": role, "content": f"m{k} " * size, "pinned": shape == "pinned"})
    if draw(st.booleans()):
        msgs.append({"role": "user", "content": "now " * draw(st.integers(1, 200))})
    return msgs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.data(), st.booleans())
def test_plan_promises_hold_for_random_scores_and_costs(msgs, data, protect_recent):
    items = parse_messages(msgs, TOK)
    n = len(items)
    scores = np.array(data.draw(st.lists(st.floats(0, 1), min_size=n, max_size=n)))
    full = sum(it.tokens for it in items) + REPLY_PRIMING
    budget = data.draw(st.integers(min(80, full), full + 10))
    try:
        plan = plan_items(items, scores, run(budget, protect_recent=protect_recent))
    except BudgetError:
        assume(False)
    assert planned_cost(items, plan) <= budget - REPLY_PRIMING
    for i, it in enumerate(items):
        if it.pinned or it.role == "system":
            assert plan.choices[i] == KEEP
    for i in current_turn(items):
        assert plan.choices[i] != DROP
    groups = tool_groups(items)
    for g in set(groups.tolist()) - {-1}:
        assert len({plan.choices[i] == DROP for i in range(n) if groups[i] == g}) == 1
    if full <= budget:
        assert plan.choices == [KEEP] * n


def test_a_long_relevant_message_is_not_traded_for_two_shorter_weaker_ones():
    msgs = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "The long one: " + "fact " * 95},
        {"role": "user", "content": "short a " + "fact " * 45},
        {"role": "user", "content": "short b " + "fact " * 45},
        {"role": "user", "content": "short c " + "fact " * 45},
        {"role": "user", "content": "final question"},
    ]
    items = parse_messages(msgs, TOK)
    scores = np.array([0.0, 1.0, 0.84, 0.84, 0.0, 0.5])
    # Room for the long message or for two short ones, not for both.
    budget = items[0].tokens + items[-1].tokens + REPLY_PRIMING + 110
    plan = plan_items(items, scores, run(budget, EngineConfig(protect_last=0)))
    assert plan.choices[1] == KEEP
    assert plan.choices[2] == plan.choices[3] == DROP


def test_a_long_tool_output_in_a_chunk_takes_the_chunks_form():
    msgs = [{"role": "user", "content": "start " * 20}]
    for k in range(30):
        msgs += [{"role": "assistant", "content": None, "tool_calls": [
                     {"id": f"c{k}", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                 {"role": "tool", "tool_call_id": f"c{k}", "content": f"result {k} " * 80}]
    msgs.append({"role": "user", "content": "final"})
    items = parse_messages(msgs, TOK)
    plan = plan_items(items, np.ones(len(items)), run(3500, EngineConfig(max_tool_output_tokens=50)), "multi_level")
    in_chunks = {i for c in plan.chunks for i in c.indices}
    assert in_chunks and any(c.level for c in plan.chunks)
    # Only messages planned one by one are cut; a chunk's messages are in its summary or dropped with it.
    assert plan.cuts and not in_chunks & set(plan.cuts)
    assert planned_cost(items, plan) <= 3500 - REPLY_PRIMING


def reference_chat():
    return parse_messages([
        {"role": "system", "content": "You are an on-call assistant."},
        {"role": "user", "content": "The payment service keeps timing out. " + "Nobody knows why yet. " * 6},
        {"role": "assistant", "content": "I see. " + "Queue depth is normal and latency is within bounds. " * 3},
        {"role": "user", "content": "Can you restart it now?"},
    ], TOK)


@pytest.mark.parametrize("annotate", [False, True])
def test_a_reference_into_a_dropped_message_is_named_after_the_kept_one(annotate):
    items = reference_chat()
    scores = np.array([1.0, 0.0, 1.0, 1.0])
    room = items[0].tokens + items[2].tokens + items[3].tokens + 20  # not enough for message 1
    config = EngineConfig(annotate_references=annotate, protect_last=1)
    plan = plan_items(items, scores, run(room + REPLY_PRIMING, config))
    assert plan.choices == [KEEP, DROP, KEEP, KEEP]
    assert plan.references == ({3: "[refs: it = the payment service]"} if annotate else {})


def test_no_reference_note_while_the_antecedent_is_there():
    items = reference_chat()
    plan = plan_items(items, np.ones(4), run(10_000, EngineConfig(annotate_references=True)))
    assert DROP not in plan.choices and plan.references == {}
