"""The options stage alone: each message's forms, their exact costs and
values, on hand-made items; and what the plan makes of the structural forms."""

from __future__ import annotations

import numpy as np
import pytest

from ctxfold.engine.cache import EngineCache
from ctxfold.engine.compaction import placeholder
from ctxfold.engine.config import EngineConfig
from ctxfold.engine.messages import parse_messages, people_in_chat
from ctxfold.engine.options import (
    CLEAR, DROP, KEEP, LENGTH_POWER, NOTE_SHARE, PEOPLE_LENGTH_POWER, PLACEHOLDER_SHARE, PLAIN, RECENT_SHARE, SEAM_SLACK,
    SUMMARY, TIME_NOTE_SHARE, TOOL_CUT_SHARE,
    length_weights, message_options, shortest_tokens, standing_instructions,
)
from ctxfold.engine.plan import plan_items
from ctxfold.engine.results import STATE_KINDS
from ctxfold.engine.run import RunContext
from ctxfold.summarize.head_tail import HeadTailSummarizer
from ctxfold.tokens import REPLY_PRIMING, get_tokenizer

TOK = get_tokenizer(encoding="cl100k_base")


def run(budget: int, config: EngineConfig | None = None, query: str = "") -> RunContext:
    return RunContext(tokenizer=TOK, config=config or EngineConfig(), cache=EngineCache(),
                      summarizer=HeadTailSummarizer(tokenizer=TOK), embedder=None, budget=budget, query=query)


def tool_round(call_id: str, output: str, name: str = "grep", **extra) -> list[dict]:
    return [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": call_id, "content": output, **extra},
    ]


def total(items) -> int:
    return sum(it.tokens for it in items) + REPLY_PRIMING


def text_tokens(it) -> int:
    return int(TOK.count(it.message["content"]))


def options(items, budget, config=None, scores=None, query=""):
    scores = np.ones(len(items)) if scores is None else scores
    return message_options(items, scores, run(budget, config, query), ["free"] * len(items))


def test_a_long_tool_output_has_a_head_and_tail_form():
    items = parse_messages([*tool_round("c1", " ".join(f"w{k}" for k in range(3000))),
                            {"role": "user", "content": "next"}], TOK)
    opts = options(items, total(items), EngineConfig(max_tool_output_tokens=200, protect_last=0))
    assert opts.cuts[1] == (0, 200, 0) and 1 not in opts.summary_targets
    assert opts.costs[1, SUMMARY] == items[1].tokens - text_tokens(items[1]) + 200
    assert opts.values[1, SUMMARY] == pytest.approx(opts.values[1, KEEP] * TOOL_CUT_SHARE)


def test_the_plan_cuts_a_long_tool_output_before_giving_up_anything_else():
    msgs = [{"role": "user", "content": "find the error " * 20}, *tool_round("c1", " ".join(f"w{k}" for k in range(3000))),
            {"role": "assistant", "content": "a long reply " * 40}, {"role": "user", "content": "next"}]
    items = parse_messages(msgs, TOK)
    config = EngineConfig(max_tool_output_tokens=200, protect_last=0)
    plan = plan_items(items, np.ones(len(items)), run(total(items) - 100, config))
    assert plan.choices == [KEEP, KEEP, SUMMARY, KEEP, KEEP] and plan.cuts == {2: 200}


def test_a_placeholder_form_costs_its_text():
    items = parse_messages([*tool_round("c1", "alpha " * 300), {"role": "user", "content": "q"}], TOK)
    opts = options(items, total(items), EngineConfig(protect_last=0))
    stub = placeholder(items[1])
    assert opts.placeholders == {1: stub}
    assert opts.costs[1, CLEAR] == items[1].tokens - text_tokens(items[1]) + TOK.count(stub) + SEAM_SLACK
    assert opts.values[1, CLEAR] == pytest.approx(opts.values[1, KEEP] * PLACEHOLDER_SHARE)


def test_the_lowest_valued_tool_results_are_cleared_and_the_rest_kept():
    msgs = [*tool_round("c1", "alpha " * 300), *tool_round("c2", "beta " * 300), *tool_round("c3", "gamma " * 300),
            {"role": "user", "content": "and now?"}]
    items = parse_messages(msgs, TOK)
    scores = np.array([0.5, 0.2, 0.5, 0.9, 0.5, 0.6, 1.0])
    plan = plan_items(items, scores, run(total(items) - 250, EngineConfig(protect_last=0)))
    assert plan.choices == [KEEP, CLEAR, KEEP, KEEP, KEEP, KEEP, KEEP]
    assert plan.placeholders == {1: placeholder(items[1])}


def test_a_superseded_read_is_worth_only_its_placeholder():
    msgs = [
        {"role": "assistant", "content": "/src/app.py\n" + "old " * 200, "kind": "file_read"},
        {"role": "assistant", "content": "/src/app.py\n" + "new " * 200, "kind": "file_read"},
        {"role": "user", "content": "next"},
    ]
    items = parse_messages(msgs, TOK)
    opts = options(items, total(items), EngineConfig(protect_last=0))
    assert opts.superseded == {0: 1}
    assert opts.values[0, KEEP] == pytest.approx(opts.values[0, CLEAR])
    assert opts.values[1, KEEP] > opts.values[1, CLEAR]
    plan = plan_items(items, np.ones(len(items)), run(total(items) - 50, EngineConfig(protect_last=0)))
    assert plan.choices[:2] == [CLEAR, KEEP]


@pytest.mark.parametrize("kind", sorted(STATE_KINDS))
def test_state_kinds_have_no_shorter_form(kind):
    msgs = [*tool_round("c1", "x " * 3000, kind=kind), {"role": "assistant", "content": "y " * 300, "kind": kind},
            {"role": "user", "content": "q"}]
    items = parse_messages(msgs, TOK)
    opts = options(items, total(items), EngineConfig(max_tool_output_tokens=100, protect_last=0))
    room = total(items) - REPLY_PRIMING
    for i in (1, 2):
        assert opts.costs[i, SUMMARY] > room and opts.costs[i, CLEAR] > room and opts.costs[i, DROP] == 0
        assert i not in opts.cuts and i not in opts.placeholders


def test_protected_recent_messages_leave_no_placeholder():
    msgs = [*tool_round("c1", "alpha " * 300), *tool_round("c2", "beta " * 300)]
    items = parse_messages(msgs, TOK)
    opts = options(items, total(items), EngineConfig(protect_last=2))
    assert sorted(opts.placeholders) == [1]


def test_length_weights_compare_each_message_with_its_role():
    items = parse_messages([
        {"role": "user", "content": "word " * 20},
        {"role": "user", "content": "word " * 40},
        {"role": "user", "content": "word " * 80},
        {"role": "assistant", "content": "word " * 400},
    ], TOK)
    weights = length_weights(items, between_people=False)
    tokens = [it.tokens for it in items]
    assert weights[1] == pytest.approx(1.0)  # the users' median
    assert weights[0] == pytest.approx((tokens[0] / tokens[1]) ** LENGTH_POWER)
    assert weights[2] == pytest.approx((tokens[2] / tokens[1]) ** LENGTH_POWER)
    assert weights[3] == pytest.approx(1.0)  # alone in its role: its own median


def test_between_people_length_weights_use_their_own_power():
    items = parse_messages([
        {"role": "user", "content": "Emi: " + "word " * 20},
        {"role": "assistant", "content": "Kate: " + "word " * 20},
        {"role": "user", "content": "Emi: " + "word " * 80},
        {"role": "assistant", "content": "Kate: " + "word " * 20},
        {"role": "user", "content": "Emi: " + "word " * 40},
    ], TOK)
    assert people_in_chat(items) == ("Emi", "Kate")
    weights = length_weights(items, between_people=True)
    assert weights[2] == pytest.approx((items[2].tokens / items[4].tokens) ** PEOPLE_LENGTH_POWER)
    assert PEOPLE_LENGTH_POWER != LENGTH_POWER


def noted_chat(question: str) -> list:
    """Timestamped turns that say "yesterday" (each gets a date note), then `question`."""
    from ctxfold.engine.messages import with_date_annotations

    msgs = []
    for k in range(6):
        stamp = f"2023-05-{10 + k:02d}T09:00:00Z"
        msgs.append({"role": "user", "content": f"Yesterday I fixed bug {k} in the deploy script.", "timestamp": stamp})
        msgs.append({"role": "assistant", "content": f"Good, bug {k} is noted.", "timestamp": stamp})
    msgs.append({"role": "user", "content": question})
    return with_date_annotations(parse_messages(msgs, TOK), TOK)


def test_a_noted_message_can_be_kept_without_its_note():
    items = noted_chat("Which bug did I fix?")
    assert items[0].date_note == "[dates: Yesterday = 2023-05-09]"
    opts = options(items, total(items), EngineConfig(protect_last=0))
    body = items[0].message["content"][: -len(items[0].date_note) - 1]
    assert opts.plain[0] == body == "Yesterday I fixed bug 0 in the deploy script."
    assert opts.costs[0, PLAIN] == items[0].tokens - TOK.count(items[0].message["content"]) + TOK.count(body)
    assert opts.values[0, PLAIN] == pytest.approx(opts.values[0, KEEP] - opts.base[0] * NOTE_SHARE)
    # A message without a note has no such form.
    assert 1 not in opts.plain and opts.costs[1, PLAIN] > total(items) - REPLY_PRIMING


def test_a_note_is_worth_more_when_the_question_asks_when():
    plain_question = options(noted_chat("Which bug did I fix?"), 10_000, query="Which bug did I fix?")
    time_question = options(noted_chat("When did I fix bug 3?"), 10_000, query="When did I fix bug 3?")
    for opts in (plain_question, time_question):
        assert opts.base[0] > 0
    lost = [(o.values[0, KEEP] - o.values[0, PLAIN]) / o.base[0] for o in (plain_question, time_question)]
    assert lost == pytest.approx([NOTE_SHARE, TIME_NOTE_SHARE]) and TIME_NOTE_SHARE > NOTE_SHARE


def test_the_plan_gives_up_notes_before_messages():
    items = noted_chat("Which bug did I fix?")
    notes = sum(TOK.count(it.message["content"]) - TOK.count(it.message["content"][: -len(it.date_note) - 1])
                for it in items if it.date_note)
    # Room for every message, not for every note.
    plan = plan_items(items, np.ones(len(items)), run(total(items) - notes // 2, EngineConfig(protect_last=0)))
    assert DROP not in plan.choices and SUMMARY not in plan.choices
    assert plan.plain and all(items[i].date_note for i in plan.plain)


def test_a_date_note_does_not_make_a_message_longer_for_its_value():
    import datetime as dt

    from ctxfold.engine.messages import with_date_annotations

    msgs = [{"role": "user" if k % 2 == 0 else "assistant", "content": "Ok." if k % 3 else f"Long turn {k} " * 20,
             "timestamp": f"2023-05-{10 + k:02d}T09:00:00Z"} for k in range(8)]
    plain = parse_messages(msgs, TOK)
    noted = with_date_annotations(plain, TOK, said=True, now=dt.datetime(2023, 6, 1, tzinfo=dt.timezone.utc))
    assert all(n.date_note and n.tokens == p.tokens + n.note_tokens and n.note_tokens > 0 for n, p in zip(noted, plain))
    assert np.allclose(length_weights(noted, between_people=False), length_weights(plain, between_people=False))


def test_the_day_said_is_worth_its_room_only_when_the_question_asks_when():
    import datetime as dt

    from ctxfold.engine.messages import with_date_annotations

    msgs = [{"role": "user", "content": f"I fixed bug {k} in the deploy script.", "timestamp": f"2023-05-{10 + k:02d}T09:00:00Z"}
            for k in range(6)]
    now = dt.datetime(2023, 6, 1, tzinfo=dt.timezone.utc)
    for question, share in (("Which bug did I fix?", 0.0), ("When did I fix bug 3?", TIME_NOTE_SHARE)):
        items = with_date_annotations(parse_messages([*msgs, {"role": "user", "content": question}], TOK), TOK,
                                      said=True, now=now)
        assert items[0].date_note.startswith("[said 2023-05-10")
        opts = options(items, 10_000, query=question)
        assert opts.values[0, KEEP] - opts.values[0, PLAIN] == pytest.approx(opts.base[0] * share)


@pytest.mark.parametrize("text, standing", [
    ("Always include version numbers when I ask about software dependencies.", True),
    ("Thanks, that works. From now on, answer in French.", True),
    ("Please never use emojis in your answers.", True),
    ("Don't ever shorten the stack traces you quote.", True),
    ("I always run the tests before I push.", False),
    ("Never mind, the build passes now.", False),
    ("What is the capital of France?", False),
    # A long prompt that opens with a rule is a task of its own.
    ("Always answer as a pirate. " + "Here is the story so far: the ship sailed on. " * 20, False),
])
def test_a_short_user_rule_for_the_answers_to_come_is_a_standing_instruction(text, standing):
    items = parse_messages([{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}], TOK)
    assert standing_instructions(items, between_people=False).tolist() == [standing, False]


def test_standing_instructions_stay_present_whatever_the_question():
    chat = [{"role": "user", "content": "Always include version numbers when I ask about libraries."},
            {"role": "assistant", "content": "Will do."}]
    for k in range(30):
        chat += [{"role": "user", "content": f"Tell me about the harbour of town {k}. " * 6},
                 {"role": "assistant", "content": f"Town {k} has a small harbour with fishing boats. " * 6}]
    items = parse_messages(chat, TOK)
    config = EngineConfig(protect_last=2)
    opts = options(items, 400, config, scores=np.linspace(0.1, 1.0, len(items)), query="Which harbour is the largest?")
    assert opts.soft[0] and not opts.soft[1]
    plan = plan_items(items, np.linspace(0.1, 1.0, len(items)), run(400, config, "Which harbour is the largest?"))
    assert plan.choices[0] == KEEP


def test_between_two_people_always_and_never_are_how_people_talk():
    chat = [{"role": "user", "name": "Ana", "content": "Never again will I eat that much cake."},
            {"role": "assistant", "name": "Ben", "content": "Always the same story with you!"},
            {"role": "user", "name": "Ana", "content": "Always, haha."}]
    items = parse_messages(chat, TOK)
    assert people_in_chat(items) == ("Ana", "Ben")
    assert not standing_instructions(items, between_people=True).any()
    # The same words from a user to an assistant would be rules.
    assert standing_instructions(items, between_people=False).tolist() == [True, False, True]


def test_the_recent_turns_are_protected_newest_first_within_a_share_of_the_room():
    chat = []
    for k in range(12):
        chat += [{"role": "user", "content": f"Question {k} about the harbour of town {k}. " * 3},
                 {"role": "assistant", "content": f"Town {k} has a small harbour with fishing boats and a pier. " * 20}]
    items = parse_messages(chat, TOK)
    n, config = len(items), EngineConfig(protect_last=4)
    shortest = [shortest_tokens(it, config) for it in items]
    # Room for the four newest at their shortest: all four protected, as before.
    roomy = total(items)
    assert options(items, roomy, config).soft[n - 4:].all()
    # A room whose quarter holds only the two newest: the older two are
    # planned by value, like any other message.
    tight = int((shortest[n - 1] + shortest[n - 2] + shortest[n - 3] / 2) / RECENT_SHARE) + REPLY_PRIMING
    soft = options(items, tight, config).soft
    assert soft[n - 1] and soft[n - 2] and not soft[n - 3] and not soft[n - 4]
    scores = np.linspace(1.0, 0.0, n)  # the recent turns score lowest
    plan = plan_items(items, scores, run(tight, config))
    assert plan.choices[n - 1] != DROP and plan.choices[n - 2] != DROP
    assert plan.choices[n - 3] == DROP and plan.choices[n - 4] == DROP


@pytest.mark.parametrize("protect_recent", [True, False])
def test_the_last_user_message_is_worth_its_verbatim_bonus_only_where_the_recent_turns_count(protect_recent):
    # Another query was given: the last user message is always present, and
    # verbatim worth a bonus only for a question about the present.
    chat = [{"role": "user", "content": "Which harbour did you say had the lighthouse?"},
            {"role": "assistant", "content": "The harbour of Ostra has the old lighthouse on its pier. " * 3},
            {"role": "user", "content": "Now tell me about something else entirely, like the weather. " * 20}]
    items = parse_messages(chat, TOK)
    scores = np.array([1.0, 0.75, 0.05])
    context = RunContext(tokenizer=TOK, config=EngineConfig(protect_last=0), cache=EngineCache(),
                         summarizer=HeadTailSummarizer(tokenizer=TOK), embedder=None, budget=total(items) - 30,
                         query="Which harbour has the lighthouse?", question_is_current=False,
                         protect_recent=protect_recent)
    plan = plan_items(items, scores, context)
    # Not everything fits: either the last user message is shortened or the
    # answer goes; the answer stays whole unless the recent turns count.
    assert (plan.choices[2] == KEEP) == protect_recent
    assert (plan.choices[1] == KEEP) != protect_recent
