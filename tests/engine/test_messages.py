"""The parse stage alone: parse_messages / parse_with_repairs and
with_date_annotations on small hand-made inputs."""

from __future__ import annotations

import datetime as dt

import pytest

from ctxfold import InvalidInputError, InvalidTypeError, count_messages
from ctxfold.engine.messages import people_in_chat, parse_messages, parse_with_repairs, with_date_annotations
from ctxfold.tokens import REPLY_PRIMING, get_tokenizer

TOK = get_tokenizer(encoding="cl100k_base")


def call(call_id: str, name: str = "search") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": '{"q": "x"}'}}


def agent_turn() -> list[dict]:
    return [
        {"role": "user", "content": "find the report", "id": "u1"},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "search"), call("c2", "read_file")]},
        {"role": "tool", "tool_call_id": "c1", "content": "report.pdf"},
        {"role": "tool", "tool_call_id": "c2", "content": "page one", "kind": "file_read"},
        {"role": "assistant", "content": "Found it.", "importance": 0.9, "pinned": True},
    ]


def test_roles_indices_system_first_and_pinned():
    items = parse_messages(agent_turn(), TOK, system="Be brief.")
    assert [it.role for it in items] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    assert [it.index for it in items] == [0, 1, 2, 3, 4, 5]
    assert items[0].id == "system" and items[0].pinned and items[0].message == {"role": "system", "content": "Be brief."}
    assert items[5].pinned and items[5].importance == 0.9
    assert items[1].importance == 0.5 and not items[1].pinned


def test_tool_pairs_call_ids_names_and_kinds():
    items = parse_messages(agent_turn(), TOK)
    assert items[1].tool_call_ids == ("c1", "c2")
    assert [it.tool_name for it in items[2:4]] == ["search", "read_file"]
    # A tool message without a kind counts as a tool result; a given kind wins.
    assert [it.kind for it in items[2:4]] == ["tool_result", "file_read"]
    assert items[1].text == 'search({"q": "x"})\nread_file({"q": "x"})'
    # Metadata keys stay out of the API message.
    assert set(items[3].message) == {"role", "tool_call_id", "content"}


def test_costs_are_count_messages_per_message_terms():
    msgs = agent_turn()
    items = parse_messages(msgs, TOK, system="Be brief.")
    api = [it.message for it in items]
    assert sum(it.tokens for it in items) + REPLY_PRIMING == count_messages(api, tokenizer=TOK)
    for it in items:
        assert it.tokens == count_messages([it.message], tokenizer=TOK) - REPLY_PRIMING


def test_caller_ids_kept_derived_ids_stable_when_the_front_goes():
    msgs = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
            {"role": "user", "content": "a"}, {"role": "assistant", "content": "c", "id": "mine"}]
    ids = [it.id for it in parse_messages(msgs, TOK)]
    assert ids[3] == "mine"
    assert all(i.startswith("m-") and len(i) == 14 for i in ids[:3])
    # Two identical messages get different ids (their copy number differs).
    assert ids[0] != ids[2]
    # Growing at the end keeps every id.
    grown = [it.id for it in parse_messages([*msgs, {"role": "user", "content": "d"}], TOK)]
    assert grown[:4] == ids
    # Dropping the unique front message keeps the ids of the messages after it.
    assert [it.id for it in parse_messages(msgs[1:], TOK)][:1] == ids[1:2]


def test_duplicate_caller_id_is_an_error_naming_the_message():
    msgs = [{"role": "user", "content": "a", "id": "x"}, {"role": "user", "content": "b", "id": "x"}]
    with pytest.raises(InvalidInputError, match=r"messages\[1\]: id 'x' is used twice"):
        parse_messages(msgs, TOK)


@pytest.mark.parametrize(
    "value, seconds, offset",
    [
        ("2024-05-01T12:00:00Z", 1714564800.0, 0.0),
        ("2024-05-01T14:00:00+02:00", 1714564800.0, 7200.0),
        ("2024-05-01T12:00:00", 1714564800.0, 0.0),
        (dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=-5))), 1714582800.0, -18000.0),
        (1714564800, 1714564800.0, 0.0),
    ],
)
def test_timestamps_as_epoch_seconds_and_offset(value, seconds, offset):
    item = parse_messages([{"role": "user", "content": "q", "timestamp": value}], TOK)[0]
    assert item.timestamp == seconds and item.utc_offset == offset


@pytest.mark.parametrize(
    "message, error, words",
    [
        ({"role": "user", "content": "q", "timestamp": "last tuesday"}, InvalidInputError, "is not ISO 8601"),
        ({"role": "user", "content": "q", "timestamp": float("inf")}, InvalidInputError, "must be finite"),
        ({"role": "user", "content": "q", "importance": 2}, InvalidInputError, r"importance'\]: must be in \[0, 1\]"),
        ({"role": "user", "content": "q", "pinned": "yes"}, InvalidTypeError, r"pinned'\]: expected bool"),
        ({"role": "robot", "content": "q"}, InvalidInputError, "unknown role 'robot'"),
    ],
)
def test_bad_fields_name_the_message(message, error, words):
    with pytest.raises(error, match=r"messages\[1\]"):
        parse_messages([{"role": "user", "content": "ok"}, message], TOK)
    with pytest.raises(error, match=words):
        parse_messages([{"role": "user", "content": "ok"}, message], TOK)


def test_orphan_tool_result_repaired_and_reported_or_raised():
    msgs = [{"role": "tool", "tool_call_id": "zz", "content": "orphan"}, {"role": "user", "content": "q"}]
    items, repairs = parse_with_repairs(msgs, TOK)
    assert [it.role for it in items] == ["user", "user"]
    assert items[0].message["content"].endswith("\norphan")
    assert [(r.index, r.kind) for r in repairs] == [(0, "orphan_tool_result")]
    # The repaired message's cost is that of what will be sent.
    assert items[0].tokens == count_messages([items[0].message], tokenizer=TOK) - REPLY_PRIMING
    with pytest.raises(InvalidInputError):
        parse_with_repairs(msgs, TOK, on_invalid="raise")


def test_date_notes_on_timestamped_user_and_assistant_text_only():
    stamp = "2023-05-08T10:00:00+02:00"
    msgs = [
        {"role": "user", "content": "I met Anna yesterday.", "timestamp": stamp},
        {"role": "assistant", "content": "Nice, yesterday then.", "timestamp": stamp, "pinned": True},
        {"role": "user", "content": "And yesterday too."},
        {"role": "assistant", "content": "No dates here.", "timestamp": stamp},
    ]
    items = parse_messages(msgs, TOK)
    out = with_date_annotations(items, TOK)
    assert out[0].message["content"] == "I met Anna yesterday.\n[dates: yesterday = 2023-05-07]"
    assert out[0].tokens == count_messages([out[0].message], tokenizer=TOK) - REPLY_PRIMING
    assert out[0].tokens > items[0].tokens
    # Scoring reads, and restore returns, the words as written.
    assert out[0].text == "I met Anna yesterday." and out[0].source == msgs[0]
    # Pinned, untimestamped and date-free messages are the same objects.
    assert out[1] is items[1] and out[2] is items[2] and out[3] is items[3]


def test_date_note_uses_the_timestamps_own_day():
    # 23:30 at UTC-5 is already the next day in UTC: the note follows the writer's calendar.
    msg = {"role": "user", "content": "I moved yesterday.", "timestamp": "2023-05-08T23:30:00-05:00"}
    out = with_date_annotations(parse_messages([msg], TOK), TOK)
    assert out[0].message["content"].endswith("[dates: yesterday = 2023-05-07]")


PEOPLE = [
    {"role": "user", "content": "Emi: I got back from Kyoto yesterday."},
    {"role": "assistant", "content": "Kate Lee: How was it?"},
    {"role": "user", "content": "Emi: Rainy, but the temples were worth it."},
    {"role": "assistant", "content": "Kate Lee: I want to go in spring."},
]


def test_a_chat_between_two_named_people_is_recognised():
    items = parse_messages(PEOPLE, TOK)
    assert [it.speaker for it in items] == ["Emi", "Kate Lee", "Emi", "Kate Lee"]
    assert people_in_chat(items) == ("Emi", "Kate Lee")


def test_the_name_field_names_the_speaker():
    msgs = [{"role": "user", "name": "ana", "content": "hi"}, {"role": "assistant", "name": "bo", "content": "hey"}]
    assert people_in_chat(parse_messages(msgs, TOK)) == ("ana", "bo")


@pytest.mark.parametrize("messages", [
    # an assistant chat: no names
    [{"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4."}],
    # a label opening one assistant message is not a speaker
    [{"role": "user", "content": "Emi: hi"}, {"role": "assistant", "content": "Note: 4."},
     {"role": "user", "content": "Emi: and 3+3?"}, {"role": "assistant", "content": "6."}],
    # one name on both sides
    [{"role": "user", "content": "Emi: hi"}, {"role": "assistant", "content": "Emi: hi again"}],
    # nobody on the other side
    [{"role": "user", "content": "Emi: hi"}],
    # a transcript's role labels are not people
    [{"role": "user", "content": "Human: hi"}, {"role": "assistant", "content": "AI: hello"}],
])
def test_other_chats_are_not_between_people(messages):
    assert people_in_chat(parse_messages(messages, TOK)) is None


def test_said_after_first_prices_only_the_first_message_of_a_day_with_its_day():
    from ctxfold.engine.messages import said_after_first, with_date_annotations

    msgs = [{"role": "user" if k % 2 == 0 else "assistant", "content": f"Point {k} about the deploy, yesterday.",
             "timestamp": f"2023-06-{10 + k // 2}T09:0{k}:00Z"} for k in range(4)]
    items = with_date_annotations(parse_messages(msgs, TOK), TOK, said=True, now=dt.datetime(2023, 6, 20, tzinfo=dt.timezone.utc))
    assert [it.date_note for it in items] == [
        "[said 2023-06-10, 10 days ago; dates: yesterday = 2023-06-09]", "[said 2023-06-10, 10 days ago; dates: yesterday = 2023-06-09]",
        "[said 2023-06-11, 9 days ago; dates: yesterday = 2023-06-10]", "[said 2023-06-11, 9 days ago; dates: yesterday = 2023-06-10]"]
    repriced = said_after_first(items, [0, 1, 3], TOK)
    assert repriced is not None
    assert [it.date_note for it in repriced] == [
        items[0].date_note, "[dates: yesterday = 2023-06-09]", items[2].date_note, items[3].date_note]
    assert repriced[1].message["content"] == "Point 1 about the deploy, yesterday.\n[dates: yesterday = 2023-06-09]"
    assert repriced[1].tokens == count_messages([repriced[1].message], tokenizer=TOK) - REPLY_PRIMING < items[1].tokens
    assert said_after_first(items, [0, 2], TOK) is None  # no kept message follows one of its day


def test_said_after_first_also_prices_a_message_left_out_as_it_would_follow():
    from ctxfold.engine.messages import said_after_first, with_date_annotations

    msgs = [{"role": "user", "content": f"Point {k}.", "timestamp": f"2023-06-{10 + k // 3}T09:0{k}:00Z"} for k in range(6)]
    items = with_date_annotations(parse_messages(msgs, TOK), TOK, said=True, now=dt.datetime(2023, 6, 20, tzinfo=dt.timezone.utc))
    # Kept: 1, 2 (day 10) and 4 (day 11). 0 comes before the day's first kept message, so it keeps the day if kept;
    # 2 follows 1, and 5 would follow 4; 3 would follow a message of day 10.
    repriced = said_after_first(items, [1, 2, 4], TOK)
    assert repriced is not None
    assert [bool(it.date_note) for it in repriced] == [True, True, False, True, True, False]
    assert said_after_first(items, [1, 4], TOK) is None  # no kept message loses its day: the plan stands
