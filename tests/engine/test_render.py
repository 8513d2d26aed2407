"""The rendering stage alone: render() of hand-made Plans."""

from __future__ import annotations

import numpy as np
import pytest

from ctxfold import count_messages
from ctxfold.engine.cache import EngineCache
from ctxfold.engine.compaction import placeholder
from ctxfold.engine.config import EngineConfig
from ctxfold.engine.excerpts import EXCERPT_GAP, EXCERPT_MARKER
from ctxfold.engine.messages import current_turn, parse_messages
from ctxfold.engine.options import CLEAR, DROP, KEEP, SEAM_SLACK, SUMMARY, SUMMARY_MARKER
from ctxfold.engine.plan import Plan, gap_marker
from ctxfold.engine.render import render
from ctxfold.engine.run import RunContext
from ctxfold.errors import CtxFoldError
from ctxfold.summarize.head_tail import HeadTailSummarizer
from ctxfold.tokens import REPLY_PRIMING, get_tokenizer

TOK = get_tokenizer(encoding="cl100k_base")
SUMMARIZER = HeadTailSummarizer(tokenizer=TOK)
BIG = 10_000


class Verbose:
    """A summarizer that ignores its targets: the text three times over."""

    def summarize(self, texts, budget, query=None):
        return [t * 3 for t in texts]


def conversation():
    msgs = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "first " + " ".join(f"a{k}" for k in range(200))},
        {"role": "assistant", "content": "reply " + " ".join(f"b{k}" for k in range(200))},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "hit " * 300},
        {"role": "user", "content": "low value aside"},
        {"role": "user", "content": "the question " + " ".join(f"q{k}" for k in range(400))},
    ]
    return parse_messages(msgs, TOK)


def make_plan(choices, targets=None, cuts=None, gap_markers=False, duplicates=None):
    """A plan over `conversation()`, with the placeholders its options would hold."""
    items = conversation()
    placeholders = {i: placeholder(items[i]) for i, c in enumerate(choices) if c == CLEAR and i not in (cuts or {})}
    return Plan(strategy="optimal", choices=choices, summary_targets=targets or {}, values=[0.0] * len(choices),
                cuts=cuts or {}, gap_markers=gap_markers, duplicates=duplicates or {}, placeholders=placeholders,
                current=current_turn(items))


def run(items, plan, budget=BIG, summarizer=SUMMARIZER, scores=None, query="", **kwargs):
    scores = scores if scores is not None else np.linspace(0.9, 0.1, len(items))
    layers = {"semantic": scores}
    context = RunContext(tokenizer=TOK, config=EngineConfig(), cache=EngineCache(), summarizer=summarizer,
                         embedder=None, budget=budget, query=query)
    return render(items, plan, scores, layers, context, **kwargs)


PLAN = [KEEP, SUMMARY, DROP, KEEP, CLEAR, DROP, SUMMARY]


def test_forms_in_order_and_the_count_is_count_messages():
    items = conversation()
    plan = make_plan(PLAN, targets={1: 40}, cuts={6: 100})
    messages, total, results = run(items, plan)
    assert total == count_messages(messages, tokenizer=TOK)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool", "user"]
    assert messages[0] == items[0].message and messages[2] == items[3].message
    assert messages[1]["content"].startswith(SUMMARY_MARKER)
    assert messages[3] == {**items[4].message, "content": placeholder(items[4])}
    # The current turn is cut to its limit, head and tail kept.
    assert TOK.count(messages[4]["content"]) <= 100
    assert messages[4]["content"].startswith("the question q0") and messages[4]["content"].endswith("q399")
    # Each report size is that message's share of the count.
    assert sum(r.tokens_out for r in results) + REPLY_PRIMING == total
    assert [r.tokens_out for r in results][2] == [r.tokens_out for r in results][5] == 0


def test_statuses_and_reasons_as_planned():
    items = conversation()
    plan = make_plan(PLAN, targets={1: 40}, cuts={6: 100}, duplicates={5: 6})
    _, _, results = run(items, plan)
    assert [r.status for r in results] == ["kept", "summarized", "dropped", "kept", "cleared", "dropped", "summarized"]
    assert [r.id for r in results] == [it.id for it in items]
    reasons = [r.reason for r in results]
    assert reasons[0] == reasons[3] == ""
    assert reasons[1] == "summarised to at most 40 tokens to make room for higher-value messages"
    assert reasons[4] == "tool result replaced by a placeholder to make room"
    assert reasons[5] == f"exact copy of {items[6].id}, which comes later"
    assert reasons[6] == "current turn cut to head + tail (100 tokens) to fit the budget"
    # The dropped reply (0.633) scores above the lowest kept message (the current turn, 0.1).
    assert reasons[2].startswith(f"dropped: {items[2].tokens} tokens at score 0.633")


def test_dropped_below_every_kept_score_says_so():
    items = conversation()
    scores = np.array([0.5, 0.9, 0.05, 0.8, 0.8, 0.7, 0.6])
    _, _, results = run(items, make_plan([KEEP, KEEP, DROP, DROP, DROP, KEEP, KEEP]), scores=scores)
    assert results[2].reason == "dropped: score 0.050 below every kept message's (lowest kept 0.600)"
    assert results[4].reason.startswith(f"dropped with its tool call {items[3].id}: ")
    assert results[3].reason.startswith("dropped with its tool results: ")


@pytest.mark.parametrize("target", [24, 60])
def test_summaries_held_within_their_targets_whatever_the_summarizer_returns(target):
    items = conversation()
    plan = make_plan([KEEP, SUMMARY, SUMMARY, DROP, DROP, DROP, KEEP], targets={1: target, 2: target})
    for summarizer in (SUMMARIZER, Verbose()):
        messages, total, results = run(items, plan, summarizer=summarizer)
        for m in messages[1:3]:
            assert m["content"].startswith(SUMMARY_MARKER)
            assert TOK.count(m["content"]) <= TOK.count(SUMMARY_MARKER) + target + SEAM_SLACK
        assert total == count_messages(messages, tokenizer=TOK)


def test_gap_markers_name_each_omitted_run():
    items = conversation()
    plan = make_plan([KEEP, DROP, DROP, KEEP, KEEP, DROP, KEEP], gap_markers=True)
    messages, total, _ = run(items, plan)
    assert messages[1] == {"role": "system", "content": gap_marker(2)}
    assert messages[4] == {"role": "system", "content": gap_marker(1)}
    assert len(messages) == 6 and total == count_messages(messages, tokenizer=TOK)


def test_a_long_tool_output_cut_to_head_and_tail_says_so():
    items = conversation()
    plan = make_plan([KEEP, DROP, DROP, KEEP, SUMMARY, DROP, KEEP], cuts={4: 50})
    messages, total, results = run(items, plan, tokens_in=[it.tokens + 1 for it in items])
    cut = messages[2]["content"]
    assert TOK.count(cut) <= 50 and cut.startswith("hit") and "tokens omitted" in cut
    assert (results[4].status, results[4].reason) == ("summarized", "tool output cut to head + tail (50 tokens) to make room")
    assert [r.tokens_in for r in results] == [it.tokens + 1 for it in items]
    assert total == count_messages(messages, tokenizer=TOK)


def test_a_plan_over_the_budget_is_an_internal_error():
    items = conversation()
    full = sum(it.tokens for it in items) + REPLY_PRIMING
    run(items, make_plan([KEEP] * len(items)), budget=full)
    with pytest.raises(CtxFoldError, match="internal error: the rendered context is"):
        run(items, make_plan([KEEP] * len(items)), budget=full - 1)


@pytest.mark.parametrize("target", [24, 60])
def test_a_summary_keeps_the_date_note_of_its_message(target):
    from ctxfold.engine.messages import with_date_annotations

    said = "Yesterday I went to the market and bought apples, pears and plums for the party. " * 4
    items = with_date_annotations(parse_messages([
        {"role": "user", "content": said, "timestamp": "2023-05-08T10:00:00"},
        {"role": "user", "content": "what did I buy?"},
    ], TOK), TOK)
    plan = make_plan([SUMMARY, KEEP], targets={0: target})
    for summarizer in (SUMMARIZER, Verbose()):
        messages, total, _ = run(items, plan, summarizer=summarizer)
        content = messages[0]["content"]
        assert content.startswith(SUMMARY_MARKER) and content.endswith("\n[dates: Yesterday = 2023-05-07]")
        assert TOK.count(content) <= TOK.count(SUMMARY_MARKER) + target + SEAM_SLACK
        assert total == count_messages(messages, tokenizer=TOK)


def test_a_message_kept_without_its_date_note_is_sent_as_written():
    items = conversation()
    plain = {1: "first words only"}
    plan = make_plan([KEEP, KEEP, DROP, DROP, DROP, DROP, KEEP])
    plan.plain = plain
    messages, total, results = run(items, plan)
    assert messages[1] == {**items[1].message, "content": "first words only"}
    assert (results[1].status, results[1].reason) == ("kept", "")
    assert results[1].tokens_out == count_messages([messages[1]], tokenizer=TOK) - REPLY_PRIMING
    assert total == count_messages(messages, tokenizer=TOK)


TRIP = (
    "Here is a plan for your week in Portugal. On Monday, walk the old town and the riverside. "
    "On Tuesday, take the train to Sintra and see the palaces. For your stay, the Hotel Aurora in Porto "
    "has a rooftop pool and costs 120 euros a night. On Wednesday, rest. On Thursday, try a cooking class. "
    "On Friday, fly home from Lisbon in the evening. Pack light, as the weather is mild."
)


def trip(question):
    return parse_messages([
        {"role": "user", "content": "Plan a week in Portugal for me."},
        {"role": "assistant", "content": TRIP},
        {"role": "user", "content": question},
    ], TOK)


def trip_plan(items, target):
    return Plan(strategy="optimal", choices=[KEEP, SUMMARY, KEEP], summary_targets={1: target}, values=[0.0] * 3,
                current=current_turn(items))


@pytest.mark.parametrize("target", [30, 45, 70])
def test_with_a_query_a_summary_is_an_excerpt_of_the_sentences_that_match_it(target):
    items = trip("Which hotel had the rooftop pool?")
    messages, total, results = run(items, trip_plan(items, target), query="Which hotel had the rooftop pool?")
    content = messages[1]["content"]
    assert content.startswith(EXCERPT_MARKER) and "rooftop pool" in content
    # Priced as a summary of the same target: the plan's arithmetic holds.
    assert TOK.count(content) <= TOK.count(SUMMARY_MARKER) + target + SEAM_SLACK
    assert all(part in TRIP for part in content.removeprefix(EXCERPT_MARKER).split(EXCERPT_GAP))
    assert results[1].status == "summarized"
    assert results[1].reason == (f"shortened to an excerpt of at most {target} tokens, the sentences that match the "
                                 "query first, to make room for higher-value messages")
    assert total == count_messages(messages, tokenizer=TOK)


def test_a_summary_without_a_query_or_a_matching_sentence_is_the_summarizers():
    items = trip("Which hotel had the rooftop pool?")
    for query in ("", "How do volcanoes form?"):
        messages, _, results = run(items, trip_plan(items, 40), query=query)
        assert messages[1]["content"].startswith(SUMMARY_MARKER)
        assert results[1].reason == "summarised to at most 40 tokens to make room for higher-value messages"


def test_an_excerpt_keeps_the_date_note_of_its_message():
    from ctxfold.engine.messages import with_date_annotations

    items = with_date_annotations(parse_messages([
        {"role": "assistant", "content": "Yesterday you said the Hotel Aurora has a rooftop pool. The old town is "
         "lovely. The trains are slow but scenic. Pack light, as the weather is mild. Try the custard tarts at "
         "the corner bakery, and book the river cruise early.",
         "timestamp": "2023-05-08T10:00:00"},
        {"role": "user", "content": "Which hotel had the rooftop pool?"},
    ], TOK), TOK)
    plan = Plan(strategy="optimal", choices=[SUMMARY, KEEP], summary_targets={0: 40}, values=[0.0] * 2,
                current=current_turn(items))
    messages, total, _ = run(items, plan, query="Which hotel had the rooftop pool?")
    content = messages[0]["content"]
    assert content.startswith(EXCERPT_MARKER) and content.endswith("\n[dates: Yesterday = 2023-05-07]")
    assert TOK.count(content) <= TOK.count(SUMMARY_MARKER) + 40 + SEAM_SLACK
    assert total == count_messages(messages, tokenizer=TOK)
