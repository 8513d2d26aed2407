"""Relative time expressions: a table of resolutions (month and year
boundaries, leap years, each weekday as the anchor, time zones, number
words), unresolvable cases with their reasons, text that holds no
reference, in-place annotation, and the engine annotating timestamped
messages within the budget while `restore` returns the original."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxfold import BudgetError, ContextEngine, EngineConfig, InvalidInputError, InvalidTypeError, count_messages
from ctxfold.text.temporal import (
    asks_about_time,
    date_note,
    with_date_note,
    NO_TIMESTAMP,
    NOTHING_EARLIER,
    NOTHING_LATER,
    OUT_OF_RANGE,
    VAGUE,
    annotate_dates,
    resolve_dates,
    strip_date_annotations,
    age_phrase,
    said_day,
    said_note,
    split_date_note,
    without_said,
    note_with_said,
    text_without_said,
    asked_days,
    named_days,
    noted_days,
)

MON = "2023-05-08T10:00:00Z"  # a Monday
WED = "2023-05-10T10:00:00Z"
EST = dt.timezone(dt.timedelta(hours=-5))

# (text, anchor, the first reference's dates: "YYYY-MM-DD" or "first to last")
RESOLVED = [
    ("I went yesterday.", MON, "2023-05-07"),
    ("today is fine", MON, "2023-05-08"),
    ("see you tomorrow", MON, "2023-05-09"),
    ("dinner tonight?", MON, "2023-05-08"),
    ("I slept badly last night", MON, "2023-05-07"),
    ("this morning I ran", MON, "2023-05-08"),
    ("this evening works", MON, "2023-05-08"),
    ("the day before yesterday", MON, "2023-05-06"),
    ("the day after tomorrow", MON, "2023-05-10"),
    ("we came in the day before yesterday", MON, "2023-05-06"),
    ("only many more days ago than three weeks ago", MON, "2023-04-17"),
    ("last week was busy", MON, "2023-05-01 to 2023-05-07"),
    ("this week is busy", MON, "2023-05-08 to 2023-05-14"),
    ("next week is busy", MON, "2023-05-15 to 2023-05-21"),
    ("last weekend", MON, "2023-05-06 to 2023-05-07"),
    ("this weekend", MON, "2023-05-13 to 2023-05-14"),
    ("next weekend", MON, "2023-05-20 to 2023-05-21"),
    ("this past weekend", MON, "2023-05-06 to 2023-05-07"),
    ("last month", MON, "2023-04-01 to 2023-04-30"),
    ("this month", MON, "2023-05-01 to 2023-05-31"),
    ("next month", MON, "2023-06-01 to 2023-06-30"),
    ("last year", MON, "2022-01-01 to 2022-12-31"),
    ("next year", MON, "2024-01-01 to 2024-12-31"),
    ("Last Year's trip", MON, "2022-01-01 to 2022-12-31"),
    ("3 days ago", MON, "2023-05-05"),
    ("three days ago", MON, "2023-05-05"),
    ("ten days ago", MON, "2023-04-28"),
    ("a day ago", MON, "2023-05-07"),
    ("a week ago", MON, "2023-05-01"),
    ("two weeks ago", MON, "2023-04-24"),
    ("a fortnight ago", MON, "2023-04-24"),
    ("a couple of days ago", MON, "2023-05-06"),
    ("two months ago", MON, "2023-03-01 to 2023-03-31"),
    ("twelve months ago", MON, "2022-05-01 to 2022-05-31"),
    ("twenty years ago", MON, "2003-01-01 to 2003-12-31"),
    ("in two weeks", MON, "2023-05-22"),
    ("in one week", MON, "2023-05-15"),
    ("in three days' time", MON, "2023-05-11"),
    ("a week from now", MON, "2023-05-15"),
    ("in 3 months", MON, "2023-08-01 to 2023-08-31"),
    ("in 2 years", MON, "2025-01-01 to 2025-12-31"),
    ("earlier this week", WED, "2023-05-08 to 2023-05-09"),
    ("later this week", WED, "2023-05-11 to 2023-05-14"),
    ("later this month", MON, "2023-05-09 to 2023-05-31"),
    ("earlier this year", MON, "2023-01-01 to 2023-05-07"),
    ("last December", MON, "2022-12-01 to 2022-12-31"),
    ("next december", MON, "2023-12-01 to 2023-12-31"),
    ("last May", MON, "2022-05-01 to 2022-05-31"),
    ("next May", MON, "2024-05-01 to 2024-05-31"),
    ("this May", MON, "2023-05-01 to 2023-05-31"),
    ("last March", MON, "2023-03-01 to 2023-03-31"),
    ("next March", MON, "2024-03-01 to 2024-03-31"),
    # month and year boundaries
    ("yesterday", "2023-01-01T09:00:00Z", "2022-12-31"),
    ("tomorrow", "2023-12-31T09:00:00Z", "2024-01-01"),
    ("tomorrow", "2023-04-30T09:00:00Z", "2023-05-01"),
    ("yesterday", "2023-03-01T09:00:00Z", "2023-02-28"),
    ("last month", "2023-01-15T09:00:00Z", "2022-12-01 to 2022-12-31"),
    ("next month", "2023-12-05T09:00:00Z", "2024-01-01 to 2024-01-31"),
    ("last week", "2023-01-04T09:00:00Z", "2022-12-26 to 2023-01-01"),
    ("next week", "2023-12-28T09:00:00Z", "2024-01-01 to 2024-01-07"),
    ("5 days ago", "2023-01-03T09:00:00Z", "2022-12-29"),
    ("last month", "2023-03-10T09:00:00Z", "2023-02-01 to 2023-02-28"),
    # leap years
    ("yesterday", "2024-03-01T09:00:00Z", "2024-02-29"),
    ("tomorrow", "2024-02-28T09:00:00Z", "2024-02-29"),
    ("tomorrow", "2024-02-29T09:00:00Z", "2024-03-01"),
    ("last month", "2024-03-10T09:00:00Z", "2024-02-01 to 2024-02-29"),
    ("a year ago", "2024-02-29T09:00:00Z", "2023-01-01 to 2023-12-31"),
    ("in 4 days", "2024-02-27T09:00:00Z", "2024-03-02"),
    ("a week ago", "2024-03-03T09:00:00Z", "2024-02-25"),
    ("yesterday", "2000-03-01T09:00:00Z", "2000-02-29"),
    ("yesterday", "1900-03-01T09:00:00Z", "1900-02-28"),
    # time zones: the writer's calendar date, not UTC's
    ("yesterday", "2023-05-07T23:30:00-05:00", "2023-05-06"),
    ("today", "2023-05-07T23:30:00-05:00", "2023-05-07"),
    ("today", "2023-05-08T04:30:00+00:00", "2023-05-08"),
    ("today", "2023-05-08T08:00:00+09:00", "2023-05-08"),
    ("today", dt.datetime(2023, 5, 7, 23, 30, tzinfo=EST), "2023-05-07"),
    ("today", dt.datetime(2023, 5, 7, 23, 30), "2023-05-07"),
    ("today", 1683588600.0, "2023-05-08"),
    ("today", dt.date(2023, 5, 8), "2023-05-08"),
]

# (anchor weekday, "last Friday", "next Monday", "this Wednesday", "on Sunday" (past), "on Sunday" (future))
WEEKDAYS = [
    ("2023-05-08", "2023-05-05", "2023-05-15", "2023-05-10", "2023-05-07", "2023-05-14"),  # Monday
    ("2023-05-09", "2023-05-05", "2023-05-15", "2023-05-10", "2023-05-07", "2023-05-14"),  # Tuesday
    ("2023-05-10", "2023-05-05", "2023-05-15", "2023-05-10", "2023-05-07", "2023-05-14"),  # Wednesday
    ("2023-05-11", "2023-05-05", "2023-05-15", "2023-05-10", "2023-05-07", "2023-05-14"),  # Thursday
    ("2023-05-12", "2023-05-05", "2023-05-15", "2023-05-10", "2023-05-07", "2023-05-14"),  # Friday
    ("2023-05-13", "2023-05-12", "2023-05-15", "2023-05-10", "2023-05-07", "2023-05-14"),  # Saturday
    ("2023-05-14", "2023-05-12", "2023-05-15", "2023-05-10", "2023-05-07", "2023-05-21"),  # Sunday
]

# (text, anchor, reason)
UNRESOLVED = [
    ("a few days ago", MON, VAGUE),
    ("several weeks ago", MON, VAGUE),
    ("some years ago", MON, VAGUE),
    ("in a few months", MON, VAGUE),
    ("yesterday", None, NO_TIMESTAMP),
    ("last week", None, NO_TIMESTAMP),
    ("3 days ago", None, NO_TIMESTAMP),
    ("earlier this week", MON, NOTHING_EARLIER),
    ("later this week", "2023-05-14T10:00:00Z", NOTHING_LATER),
    ("9999 years ago", MON, OUT_OF_RANGE),
    ("tomorrow", "9999-12-31T10:00:00Z", OUT_OF_RANGE),
]

# Text without any relative date.
NOTHING = [
    "this may be the fix",
    "I may go later",
    "This may well work",
    "wait a second",
    "give me a minute",
    "a second opinion",
    "the last week has been hard",
    "for the next month we rest",
    "we swim on Fridays",
    "the next day we left",
    "last time it broke",
    "We met on 2023-05-01.",
    "Mayday at the marching band",
    "in a second",
    "2 hours ago",
]


@pytest.mark.parametrize(("text", "anchor", "expected"), RESOLVED)
def test_resolves(text, anchor, expected) -> None:
    refs = resolve_dates(text, anchor)
    assert refs, f"no reference found in {text!r}"
    assert refs[0].label == expected
    assert refs[0].reason == "" and 0 < refs[0].confidence <= 1
    assert text[refs[0].start:refs[0].end] == refs[0].text


@pytest.mark.parametrize("row", WEEKDAYS, ids=[w[0] for w in WEEKDAYS])
def test_weekday_arithmetic_from_each_weekday(row) -> None:
    day, last_friday, next_monday, this_wednesday, past_sunday, future_sunday = row
    anchor = f"{day}T12:00:00Z"
    assert resolve_dates("I saw it last Friday", anchor)[0].label == last_friday
    assert resolve_dates("next Monday", anchor)[0].label == next_monday
    assert resolve_dates("this Wednesday", anchor)[0].label == this_wednesday
    assert resolve_dates("we met on Sunday", anchor)[0].label == past_sunday
    assert resolve_dates("I will see her on Sunday", anchor)[0].label == future_sunday
    assert resolve_dates("I have to go back to work on Sunday, sadly.", anchor)[0].label == future_sunday
    assert resolve_dates("We'll talk on Sunday", anchor)[0].label == future_sunday


@pytest.mark.parametrize(("text", "anchor", "reason"), UNRESOLVED)
def test_unresolvable_says_why(text, anchor, reason) -> None:
    refs = resolve_dates(text, anchor)
    assert len(refs) == 1
    ref = refs[0]
    assert not ref.resolved and ref.first is None and ref.last is None
    assert ref.confidence == 0.0 and ref.reason == reason and ref.label == ""
    assert annotate_dates(text, anchor) == text


@pytest.mark.parametrize("text", NOTHING)
def test_no_false_positives(text) -> None:
    assert resolve_dates(text, MON) == []
    assert annotate_dates(text, MON) == text


def test_granularity_and_confidence_order() -> None:
    refs = resolve_dates("yesterday, last week, last weekend, last month, last year, on Friday, a couple of days ago", MON)
    assert [r.granularity for r in refs] == ["day", "week", "weekend", "month", "year", "day", "day"]
    yesterday, *_, on_friday, couple = refs
    assert yesterday.confidence > on_friday.confidence > couple.confidence > 0


def test_several_references_in_one_text() -> None:
    text = "Yesterday I booked it; next week we fly, and two days ago it was still open."
    assert [r.text for r in resolve_dates(text, MON)] == ["Yesterday", "next week", "two days ago"]


def test_spans_in_texts_whose_case_changes_length() -> None:
    text = "İstanbul was great yesterday, and next May we go back."
    refs = resolve_dates(text, MON)
    assert [(r.text, text[r.start:r.end], r.label) for r in refs] == [
        ("yesterday", "yesterday", "2023-05-07"), ("next May", "next May", "2024-05-01 to 2024-05-31")]
    assert resolve_dates("İ: this may be it", MON) == []


def test_annotate_in_place() -> None:
    assert annotate_dates("I went yesterday.", MON) == "I went yesterday [2023-05-07]."
    assert annotate_dates("last week was long", MON) == "last week [2023-05-01 to 2023-05-07] was long"
    assert annotate_dates("today's special", MON) == "today's [2023-05-08] special"
    text = "Yesterday I booked it; next week we fly."
    once = annotate_dates(text, MON)
    assert once == "Yesterday [2023-05-07] I booked it; next week [2023-05-15 to 2023-05-21] we fly."
    assert annotate_dates(once, MON) == once
    assert strip_date_annotations(once) == text
    twice = "I ate steak today, so today's walk was slow; yesterday too. Today I rest."
    assert annotate_dates(twice, MON) == (
        "I ate steak today [2023-05-08], so today's walk was slow; yesterday [2023-05-07] too. Today [2023-05-08] I rest.")


def test_annotate_leaves_absolute_dates_and_what_it_cannot_place() -> None:
    for text in ("yesterday (May 7) was fine", "yesterday, 2023-05-07, it rained", "yesterday 7th May", "We met on 5/7/2023."):
        assert annotate_dates(text, MON) == text
    assert annotate_dates("yesterday", None) == "yesterday"
    assert annotate_dates("a few days ago", MON) == "a few days ago"
    assert annotate_dates("on Friday", MON, min_confidence=0.9) == "on Friday"


def test_bad_arguments_name_themselves() -> None:
    with pytest.raises(InvalidTypeError, match="anchor"):
        resolve_dates("yesterday", [2023])
    with pytest.raises(InvalidInputError, match="anchor.*ISO 8601"):
        resolve_dates("yesterday", "last tuesday")
    with pytest.raises(InvalidTypeError, match="text"):
        resolve_dates(None, MON)  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="text"):
        annotate_dates(b"yesterday", None)  # type: ignore[arg-type]


# -- the engine ----------------------------------------------------------------------


def _chat(n: int = 40) -> list[dict]:
    msgs = []
    for k in range(n):
        day = dt.datetime(2023, 5, 1 + k % 20, 21, 0, tzinfo=EST)
        msgs.append({"role": "user", "content": f"Note {k}: yesterday I fixed the deploy script number {k}. " * 4,
                     "timestamp": day.isoformat()})
        msgs.append({"role": "assistant", "content": f"Good, item {k} noted for next week. " * 3, "timestamp": day.isoformat()})
    msgs.append({"role": "user", "content": "What did I fix yesterday?", "timestamp": "2023-05-21T23:30:00-05:00"})
    return msgs


def test_engine_annotates_timestamped_messages_within_budget() -> None:
    engine = ContextEngine(encoding="cl100k_base")
    msgs = _chat()
    res = engine.optimize(msgs, budget=1000)
    assert res.tokens == count_messages(res.messages, encoding="cl100k_base") <= 1000
    # The current turn, in its own zone: 23:30 at UTC-5 is the 21st, whatever the UTC date says.
    # It is also the latest message, so "now" (said today).
    assert res.messages[-1]["content"] == "What did I fix yesterday?\n[said 2023-05-21, today; dates: yesterday = 2023-05-20]"
    kept = [m["content"] for m in res.messages[:-1]]
    assert any("dates: yesterday = 2023-05-" in c for c in kept)
    # The words stay as written: each kept message is its original plus the note.
    originals = {m["content"] for m in msgs}
    assert all(strip_date_annotations(c) in originals or c.startswith("[summary]") for c in kept)
    for item in res.items:
        if item.status != "kept":
            assert "[" not in engine.restore(item.id)["content"]
    assert res.report.tokens_in == count_messages(msgs, encoding="cl100k_base")


def test_engine_switch_and_what_is_never_annotated() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "log", "arguments": '{"when": "yesterday"}'}}
    msgs = [
        {"role": "system", "content": "Answer about yesterday.", "timestamp": MON},
        {"role": "user", "content": "pinned: yesterday", "pinned": True, "timestamp": MON},
        {"role": "user", "content": "no stamp: yesterday"},
        {"role": "assistant", "content": "calling about yesterday", "tool_calls": [call], "timestamp": MON},
        {"role": "tool", "tool_call_id": "c1", "content": '{"note": "yesterday"}', "timestamp": MON},
        {"role": "user", "content": "And yesterday?", "timestamp": MON},
    ]
    res = ContextEngine(encoding="cl100k_base").optimize(msgs, budget=4000)
    out = res.messages
    assert [m["content"] for m in out[:3]] == ["Answer about yesterday.", "pinned: yesterday", "no stamp: yesterday"]
    assert (out[3]["content"] == "calling about yesterday\n[said 2023-05-08, today; dates: yesterday = 2023-05-07]"
            and out[3]["tool_calls"] == [call])
    assert out[4]["content"] == '{"note": "yesterday"}'
    # The same day as the message before it: the day is said once.
    assert out[5]["content"] == "And yesterday?\n[dates: yesterday = 2023-05-07]"
    assert res.tokens == count_messages(out, encoding="cl100k_base")
    off = ContextEngine(encoding="cl100k_base", config=EngineConfig(annotate_dates=False)).optimize(msgs, budget=4000)
    assert [m["content"] for m in off.messages] == [m["content"] for m in msgs]


def test_session_annotates_its_verbatim_tail_and_keeps_its_prefix() -> None:
    session = ContextEngine(encoding="cl100k_base").session()
    msgs = [{"role": "user" if k % 2 == 0 else "assistant", "content": f"Turn {k}: yesterday I did thing {k}.",
             "timestamp": f"2023-05-{1 + k:02d}T10:00:00Z"} for k in range(9)]
    first = session.optimize(msgs, budget=4000)
    grown = session.optimize([*msgs, {"role": "assistant", "content": "Noted.", "timestamp": "2023-05-10T10:00:00Z"},
                              {"role": "user", "content": "And tomorrow?", "timestamp": "2023-05-11T10:00:00Z"}],
                             budget=4000)
    assert grown.report.cache.kept
    assert grown.messages[:len(first.messages)] == first.messages
    assert [m["content"] for m in grown.messages][:2] == [
        "Turn 0: yesterday I did thing 0.\n[said 2023-05-01; dates: yesterday = 2023-04-30]",
        "Turn 1: yesterday I did thing 1.\n[said 2023-05-02; dates: yesterday = 2023-05-01]"]
    assert grown.messages[-1]["content"] == "And tomorrow?\n[said 2023-05-11; dates: tomorrow = 2023-05-12]"
    assert grown.tokens == count_messages(grown.messages, encoding="cl100k_base") <= 4000


PHRASES = ["yesterday", "last week", "two days ago", "on Friday", "next month", "today's", "in 3 weeks", "we", "met",
           "Kate", "deploy", "the", "budget", "a few days ago", "2023-05-01"]


@st.composite
def dated_chats(draw):
    msgs = []
    start = dt.datetime(2023, 12, 30, 20, 0, tzinfo=dt.timezone(dt.timedelta(hours=draw(st.integers(-12, 14)))))
    for k in range(draw(st.integers(1, 25))):
        text = " ".join(draw(st.lists(st.sampled_from(PHRASES), min_size=1, max_size=60)))
        message = {"role": "user" if k % 2 == 0 else "assistant", "content": text}
        if draw(st.booleans()):
            message["timestamp"] = (start + dt.timedelta(hours=7 * k)).isoformat()
        if draw(st.integers(0, 9)) == 0:
            message["pinned"] = True
        msgs.append(message)
    return msgs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dated_chats(), st.integers(40, 2000), st.sampled_from(["optimal", "windowed", "compacted", "multi_level"]),
       st.sampled_from([None, "2023-12-25T00:00:00Z", "2024-01-02T12:00:00+09:00", "2026-01-01T00:00:00Z"]))
def test_annotated_output_fits_exactly_and_keeps_the_current_turn(msgs, budget, strategy, now) -> None:
    engine = ContextEngine(encoding="cl100k_base", config=EngineConfig(strategy=strategy))
    try:
        res = engine.optimize(msgs, budget=budget, now=now)
    except BudgetError:
        return
    assert res.tokens == count_messages(res.messages, encoding="cl100k_base") <= budget
    contents = [strip_date_annotations(m["content"]) for m in res.messages]
    days = [said_day(split_date_note(m["content"])[1]) for m in res.messages]
    assert len([d for d in days if d]) == len(set(d for d in days if d))  # each day said once
    for m in msgs:
        if m.get("pinned"):
            assert m["content"] in [x["content"] for x in res.messages]  # pins verbatim, never annotated
    last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
    present = [r for r in res.items if r.index == last_user]
    assert present and present[0].status != "dropped"
    if present[0].status == "kept":
        assert msgs[last_user]["content"] in contents


@pytest.mark.parametrize(("text", "note"), [
    ("I went yesterday and again yesterday.", "[dates: yesterday = 2023-05-07]"),
    ("Yesterday and last week.", "[dates: Yesterday = 2023-05-07; last week = 2023-05-01 to 2023-05-07]"),
    ("yesterday (May 7) was fun", ""),  # the text already says the date
    ("a few days ago", ""),  # vague: nothing sure enough to write
    ("no dates here", ""),
])
def test_date_note_lists_each_phrase_once(text, note) -> None:
    anchor = "2023-05-08T12:00:00Z"
    assert date_note(text, anchor) == note
    noted = with_date_note(text, anchor)
    assert noted == (f"{text}\n{note}" if note else text)
    assert with_date_note(noted, anchor) == noted  # a second pass adds nothing
    assert strip_date_annotations(noted) == text


@pytest.mark.parametrize(
    "question, about_time",
    [
        ("When did Emi go to Paris?", True),
        ("What did I fix yesterday?", True),
        ("How long ago did we meet?", True),
        ("What is the date of the concert?", True),
        ("Which month did the lease start?", True),
        ("What did Kate do last weekend?", True),
        ("How many days did the trip take?", True),
        ("What does Kate like to cook?", False),
        ("Where did the team meet?", False),
        ("Who won the chess game?", False),
    ],
)
def test_asks_about_time(question: str, about_time: bool) -> None:
    assert asks_about_time(question) is about_time


# -- when a message was said, counted from now ----------------------------------------


D = dt.date


@pytest.mark.parametrize("then, now, phrase", [
    (D(2023, 6, 17), D(2023, 6, 17), "today"),
    (D(2023, 6, 16), D(2023, 6, 17), "yesterday"),
    (D(2023, 6, 15), D(2023, 6, 17), "2 days ago"),
    (D(2023, 6, 17), D(2023, 6, 20), "3 days ago"),
    (D(2023, 3, 20), D(2023, 4, 1), "12 days ago"),  # across a month's end
    (D(2023, 6, 4), D(2023, 6, 17), "13 days ago"),
    (D(2023, 6, 3), D(2023, 6, 17), "2 weeks ago"),
    (D(2023, 4, 1), D(2023, 5, 1), "4 weeks ago"),
    (D(2023, 4, 19), D(2023, 6, 17), "8 weeks ago"),  # 59 days
    (D(2023, 2, 14), D(2023, 4, 18), "2 months ago"),
    (D(2023, 11, 1), D(2024, 2, 1), "3 months ago"),  # across a year's end
    (D(2023, 11, 2), D(2024, 2, 1), "2 months ago"),  # a day short of three calendar months
    (D(2024, 2, 29), D(2024, 6, 1), "3 months ago"),  # from a leap day
    (D(2022, 7, 1), D(2024, 6, 30), "23 months ago"),
    (D(2022, 6, 1), D(2024, 6, 1), "2 years ago"),
    (D(2013, 6, 18), D(2023, 6, 17), "9 years ago"),
    (D(2023, 6, 18), D(2023, 6, 17), "1 day after now"),  # a message in the future of now
    (D(2023, 6, 20), D(2023, 6, 17), "3 days after now"),
    (D(2023, 7, 1), D(2023, 6, 17), "2 weeks after now"),
    (D(2023, 9, 17), D(2023, 6, 17), "3 months after now"),
])
def test_age_phrase(then: dt.date, now: dt.date, phrase: str) -> None:
    assert age_phrase(then, now) == phrase


def test_age_phrase_takes_the_day_of_a_datetime_and_rejects_the_rest() -> None:
    assert age_phrase(dt.datetime(2023, 6, 16, 23, 59), dt.datetime(2023, 6, 17, 0, 1)) == "yesterday"
    with pytest.raises(InvalidTypeError, match="then, now"):
        age_phrase("2023-06-16", D(2023, 6, 17))  # type: ignore[arg-type]


@pytest.mark.parametrize("anchor, now, note", [
    ("2023-06-17T17:40:00", "2023-06-20T16:30:00", "said 2023-06-17, 3 days ago"),
    ("2023-06-17T17:40:00", None, "said 2023-06-17"),
    # 23:30 at UTC-5 is the 21st there; now (03:00 UTC on the 22nd) is still the 21st in that zone.
    ("2023-05-21T23:30:00-05:00", "2023-05-22T03:00:00Z", "said 2023-05-21, today"),
    ("2023-05-21T23:30:00-05:00", "2023-05-22T06:00:00Z", "said 2023-05-21, yesterday"),
    # Naive and epoch-second times are UTC.
    (dt.datetime(2023, 5, 21, 12), dt.datetime(2023, 5, 28, 12), "said 2023-05-21, 7 days ago"),
    (1684670400, 1684670400 + 86400 * 30, "said 2023-05-21, 4 weeks ago"),
    (dt.datetime(2023, 5, 21, 12, tzinfo=EST), D(2023, 5, 20), "said 2023-05-21, 1 day after now"),
])
def test_said_note_in_the_message_time_zone(anchor, now, note) -> None:
    assert said_note(anchor, now) == note


@pytest.mark.parametrize("now, error, match", [
    ("next tuesday", InvalidInputError, "now: 'next tuesday' is not ISO 8601"),
    (True, InvalidTypeError, "now: expected"),
    (1e20, InvalidInputError, "now: epoch seconds"),
])
def test_said_note_names_a_bad_now(now, error, match) -> None:
    with pytest.raises(error, match=match):
        said_note(MON, now)


def test_a_said_note_joins_the_date_note_and_comes_off_whole_or_in_part() -> None:
    noted = with_date_note("I went rafting yesterday.", "2023-06-17T17:40:00", said=True, now="2023-06-20T09:00:00")
    assert noted == "I went rafting yesterday.\n[said 2023-06-17, 3 days ago; dates: yesterday = 2023-06-16]"
    body, note = split_date_note(noted)
    assert body == "I went rafting yesterday." and strip_date_annotations(noted) == body
    assert said_day(note) == "2023-06-17" and without_said(note) == "[dates: yesterday = 2023-06-16]"
    only = with_date_note("Rafting was fun.", "2023-06-17T17:40:00", said=True, now="2023-06-17T20:00:00")
    assert only == "Rafting was fun.\n[said 2023-06-17, today]"
    assert split_date_note(only) == ("Rafting was fun.", "[said 2023-06-17, today]") and without_said("[said 2023-06-17, today]") == ""
    assert with_date_note(only, MON, said=True, now=MON) == only  # a second pass adds nothing
    assert said_day("[dates: yesterday = 2023-06-16]") == "" and without_said("[dates: x = 2023-06-16]") == "[dates: x = 2023-06-16]"
    # Without `said` nothing changes from before.
    assert with_date_note("Rafting was fun.", MON) == "Rafting was fun."
    assert note_with_said("said 2023-06-17", "[dates: yesterday = 2023-06-16]") == "[said 2023-06-17; dates: yesterday = 2023-06-16]"
    assert note_with_said("said 2023-06-17", "") == "[said 2023-06-17]"
    assert text_without_said(noted) == "I went rafting yesterday.\n[dates: yesterday = 2023-06-16]"
    assert text_without_said(only) == "Rafting was fun." and text_without_said("plain") == "plain"


def _days_chat() -> list[dict]:
    """Two messages on each of three days, then a question three days after the last."""
    msgs = []
    for day, topic in ((10, "rafting in Oregon"), (12, "a bird watching workshop"), (17, "the New Yorker issue")):
        msgs.append({"role": "user", "content": f"I talked about {topic} today.", "timestamp": f"2023-06-{day}T09:00:00Z"})
        msgs.append({"role": "assistant", "content": f"Noted: {topic}.", "timestamp": f"2023-06-{day}T09:01:00Z"})
    msgs.append({"role": "user", "content": "How many days ago did I go rafting?", "timestamp": "2023-06-20T16:30:00Z"})
    return msgs


def test_the_engine_says_when_on_the_first_kept_message_of_each_day() -> None:
    engine = ContextEngine(encoding="cl100k_base")
    res = engine.optimize(_days_chat(), budget=4000)
    notes = [split_date_note(m["content"])[1] for m in res.messages]
    assert notes == [
        "[said 2023-06-10, 10 days ago; dates: today = 2023-06-10]", "",
        "[said 2023-06-12, 8 days ago; dates: today = 2023-06-12]", "",
        "[said 2023-06-17, 3 days ago; dates: today = 2023-06-17]", "",
        "[said 2023-06-20, today]",
    ]
    assert res.tokens == count_messages(res.messages, encoding="cl100k_base")
    # `now` moves the count, not the days; the originals stay as passed.
    later = engine.optimize(_days_chat(), budget=4000, now=dt.datetime(2023, 9, 1, tzinfo=dt.timezone.utc))
    assert [split_date_note(m["content"])[1].split(";")[0] for m in later.messages[::2]] == [
        "[said 2023-06-10, 2 months ago", "[said 2023-06-12, 2 months ago", "[said 2023-06-17, 2 months ago",
        "[said 2023-06-20, 2 months ago]"]
    # Without its neighbour, the second message of a day says the day itself.
    alone = engine.optimize([m for k, m in enumerate(_days_chat()) if k != 2], budget=4000)
    assert alone.messages[2]["content"] == "Noted: a bird watching workshop.\n[said 2023-06-12, 8 days ago]"
    off = ContextEngine(encoding="cl100k_base", config=EngineConfig(annotate_dates=False)).optimize(_days_chat(), budget=4000)
    assert [m["content"] for m in off.messages] == [m["content"] for m in _days_chat()]


@pytest.mark.parametrize("now, error, match", [
    ("the day after", InvalidInputError, r"now: 'the day after' is not ISO 8601"),
    (float("nan"), InvalidInputError, "now: must be finite"),
    (1e20, InvalidInputError, "now: .* outside the calendar"),
    ([2023, 6, 20], InvalidTypeError, "now: expected ISO 8601 str, datetime or number, got list"),
])
def test_optimize_names_a_bad_now(now, error, match) -> None:
    with pytest.raises(error, match=match):
        ContextEngine(encoding="cl100k_base").optimize(_days_chat(), budget=4000, now=now)


def test_a_time_question_keeps_the_notes_another_question_gives_up() -> None:
    engine = ContextEngine(encoding="cl100k_base")
    noted = {}
    for question in ("What did I fix yesterday?", "Which deploy script did I fix?"):
        res = engine.optimize(_chat(), budget=1000, query=question)
        assert res.tokens == count_messages(res.messages, encoding="cl100k_base") <= 1000
        noted[question] = sum("\n[said " in m["content"] or "\n[dates: " in m["content"] for m in res.messages[:-1])
    assert noted["What did I fix yesterday?"] > 0 == noted["Which deploy script did I fix?"]


def test_a_session_says_the_day_only_and_its_prefix_stays_put_as_days_pass() -> None:
    session = ContextEngine(encoding="cl100k_base").session()
    msgs = _days_chat()[:-1]
    first = session.optimize(msgs, budget=4000)
    grown = session.optimize([*msgs, *_days_chat()[-1:], {"role": "assistant", "content": "Since the 10th.",
                                                          "timestamp": "2023-06-20T16:31:00Z"}], budget=4000)
    assert grown.report.cache.kept and grown.messages[:len(first.messages)] == first.messages
    notes = [split_date_note(m["content"])[1] for m in grown.messages]
    # A count from "now" would go stale in the kept prefix: only the day, once per day.
    assert notes == ["[said 2023-06-10; dates: today = 2023-06-10]", "", "[said 2023-06-12; dates: today = 2023-06-12]",
                     "", "[said 2023-06-17; dates: today = 2023-06-17]", "", "[said 2023-06-20]", ""]


TODAY = dt.date(2024, 3, 1)


@pytest.mark.parametrize("text, days", [
    ("on 16.01.2024", [("2024-01-16", "2024-01-16")]),
    ("on 2024-01-16", [("2024-01-16", "2024-01-16")]),
    ("on 1/16/2024", [("2024-01-16", "2024-01-16")]),
    ("on 16/1/2024", [("2024-01-16", "2024-01-16")]),  # 16 cannot be a month: day first
    ("on January 16, 2024", [("2024-01-16", "2024-01-16")]),
    ("on December 28 2023", [("2023-12-28", "2023-12-28")]),
    ("on Sept. 3, 2023", [("2023-09-03", "2023-09-03")]),
    ("on 29 Dec 2023", [("2023-12-29", "2023-12-29")]),
    ("on the 3rd of March", [("2023-03-03", "2023-03-03")]),  # March 3 of this year is after today
    ("on January 16th", [("2024-01-16", "2024-01-16")]),
    ("for April 6-7 and April 8", [("2023-04-06", "2023-04-07"), ("2023-04-08", "2023-04-08")]),
    ("on May 5", [("2023-05-05", "2023-05-05")]),
    ("you may 5 times", []),  # the verb
    ("reading 11/22/63 by Stephen King", []),  # a two-digit year: a title as often as a date
    ("on February 30, 2024", []),
    ("in May 2023", []),  # a month is not a day
    ("nothing here", []),
])
def test_named_days_reads_the_dates_people_write(text, days):
    assert named_days(text, TODAY) == [(dt.date.fromisoformat(a), dt.date.fromisoformat(b)) for a, b in days]


def test_asked_days_reads_named_dates_and_leaves_out_those_after_now():
    assert asked_days("What did I do on 16.01.2024 and 16.05.2024?", "2024-03-01T12:00:00") == [
        (dt.date(2024, 1, 16), dt.date(2024, 1, 16))]
    assert asked_days("What did I do 3 days ago and on Feb 1?", "2024-03-01T12:00:00") == [
        (dt.date(2024, 2, 27), dt.date(2024, 2, 27)), (dt.date(2024, 2, 1), dt.date(2024, 2, 1))]
    assert asked_days("What did I do on 16.01.2024?", None) == []


def test_noted_days_are_the_days_and_periods_a_date_note_names():
    assert noted_days("[said 2023-05-24; dates: yesterday = 2023-05-23; last week = 2023-05-15 to 2023-05-21]") == [
        (dt.date(2023, 5, 23), dt.date(2023, 5, 23)), (dt.date(2023, 5, 15), dt.date(2023, 5, 21))]
    assert noted_days("[said 2023-05-24]") == [] and noted_days("") == []
