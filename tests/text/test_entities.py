"""The entity extractor: a table of examples per type, the untyped views the
scoring and the extractive summaries use, and `entity_recall`."""

from __future__ import annotations

import pytest

from ctxfold.text.entities import STOP_WORDS, entity_recall, extract_entities, extract_mentions, places, verbatim_entities
from ctxfold.errors import CtxFoldError

# (text, type, the mention's text)
TYPED = [
    ("My name is Caroline and I like tea.", "user_identity", "Caroline"),
    ("I live in Denver, by the way.", "user_identity", "I live in Denver"),
    ("I work at Acme Corp as a nurse.", "user_identity", "I work at Acme Corp as a nurse"),
    ("My friend Melanie came over.", "person", "Melanie"),
    ("We had lunch with Dr. Smith today.", "person", "Smith"),
    ("Sarah told me the news.", "person", "Sarah"),
    ("She joined Globex Inc. last year.", "organisation", "Globex Inc."),
    ("He studies at the University of Michigan now.", "organisation", "University of Michigan"),
    ("Initech LLC sent the invoice.", "organisation", "Initech LLC"),
    ("We flew to New York City in June.", "location", "New York City"),
    ("The office moved to Lisbon.", "location", "Lisbon"),
    ("She grew up in Texas, near Austin.", "location", "Texas"),
    ("The launch is on 2024-03-15.", "date", "2024-03-15"),
    ("It happened on May 3rd, 2023 at home.", "date", "May 3rd, 2023"),
    ("Payday is the 5th of June.", "date", "5th of June"),
    ("See you next Friday then.", "date", "next Friday"),
    ("I saw it yesterday.", "date", "yesterday"),
    ("Paid on 5/21/2023 in cash.", "date", "5/21/2023"),
    ("Let us meet at 3:30 pm.", "time", "3:30 pm"),
    ("The alarm went off at 7am again.", "time", "7am"),
    ("Lunch at noon works.", "time", "noon"),
    ("The ticket cost $1,200 in total.", "money", "$1,200"),
    ("That is 300 dollars too much.", "money", "300 dollars"),
    ("Conversion went up 15% this week.", "percent", "15%"),
    ("Only 2.5 percent replied.", "percent", "2.5 percent"),
    ("Write to bob.lee@example.com today.", "email", "bob.lee@example.com"),
    ("The docs are at https://example.com/docs/start.", "url", "https://example.com/docs/start"),
    ("Open src/ctxfold/engine.py first.", "path", "src/ctxfold/engine.py"),
    ("Edit ~/notes/todo.md tonight.", "path", "~/notes/todo.md"),
    ("Put it in config.yaml please.", "path", "config.yaml"),
    ("Call count_tokens on each message.", "code", "count_tokens"),
    ("Then ContextEngine does the rest.", "code", "ContextEngine"),
    ("Run `pytest -q` before pushing.", "code", "`pytest -q`"),
    ("Use engine.optimize() for that.", "code", "engine.optimize()"),
    ("Upgrade to v2.1 now.", "version", "v2.1"),
    ("We pinned 1.26.4 in the lock file.", "version", "1.26.4"),
    ("My car broke down.", "personal", "My car"),
    ("Our meeting moved.", "personal", "Our meeting"),
    ("I need to renew my passport before the trip.", "task_goal", "I need to renew my passport before the trip"),
    ("My goal is to run a marathon.", "task_goal", "My goal is to run a marathon"),
    ("I'll send the draft tonight.", "commitment", "I'll send the draft tonight"),
    ("Let's keep the old schema.", "commitment", "Let's keep the old schema"),
    ("Please finish it by Friday.", "temporal_constraint", "by Friday"),
    ("Pay the rent before the 15th.", "temporal_constraint", "before the 15th"),
    ("Ship it by end of the month.", "temporal_constraint", "by end of the month"),
    ("We talked to NASA about it.", "other", "NASA"),
]


@pytest.mark.parametrize(("text", "kind", "value"), TYPED)
def test_each_type_is_found(text: str, kind: str, value: str) -> None:
    found = [(m.type, m.text) for m in extract_mentions(text)]
    assert (kind, value) in found, found


@pytest.mark.parametrize(("text", "kind", "value"), TYPED)
def test_spans_point_at_the_text(text: str, kind: str, value: str) -> None:
    for m in extract_mentions(text):
        assert text[m.start:m.end] == m.text


NOT_ENTITIES = [
    ("and/or he/she", "path"),
    ("It may rain.", "date"),
    ("The test passed.", "other"),
    ("So we went home.", "other"),
    ("I am happy to help", "user_identity"),
    ("He costs nothing", "money"),
    ("version 3 of 24/7 support", "path"),
    ("Saving $50 may help a lot.", "date"),
    ("I have to say it was great.", "task_goal"),
    ("I will admit the ending was weak.", "commitment"),
    ("We watched McGregor win again.", "code"),
    ("Yes Im fine, lol.", "other"),
]


@pytest.mark.parametrize(("text", "kind"), NOT_ENTITIES)
def test_near_misses_are_not_entities(text: str, kind: str) -> None:
    assert [m for m in extract_mentions(text) if m.type == kind and not m.weak] == []


def test_a_sentence_first_word_is_weak_unless_a_person_cue_names_it() -> None:
    weak = {m.text: m.weak for m in extract_mentions("Melanie's sister called. Then Bob said hi.")}
    assert weak == {"Melanie's": True, "Bob": False}


def test_keys_fold_case_possessives_and_titles() -> None:
    keys = {m.key for m in extract_mentions("Melanie's car. I met Dr. Smith and MELANIE.")}
    assert {"melanie", "smith"} <= keys


def test_gazetteer_is_shipped_and_small() -> None:
    names = places()
    assert {"france", "new york", "california", "tokyo", "washington d.c."} <= names
    assert 200 < len(names) < 1000


def test_one_stop_list_for_both_untyped_views() -> None:
    text = "Remember: Sounds Fine played for Melanie in Lisbon on 5/21."
    assert "remember" in STOP_WORDS and "sounds" in STOP_WORDS
    assert verbatim_entities(text) == ["Fine", "Melanie", "Lisbon", "5/21"]
    assert {"melanie", "lisbon", "5/21"} <= extract_entities(text)
    assert "remember" not in extract_entities(text)


@pytest.mark.parametrize(("original", "compressed", "expected"), [
    ("So Melanie flew to Lisbon on 2024-03-15.", "So Melanie flew to Lisbon on 2024-03-15.", 1.0),
    ("So Melanie flew to Lisbon on 2024-03-15.", "melanie went to LISBON", 2 / 3),
    ("So Melanie flew to Lisbon on 2024-03-15.", "Someone travelled.", 0.0),
    ("no entities here at all", "", 1.0),
])
def test_entity_recall(original: str, compressed: str, expected: float) -> None:
    assert entity_recall(original, compressed) == pytest.approx(expected)


def test_entity_recall_takes_messages() -> None:
    original = [{"role": "user", "content": "I asked Melanie about Lisbon."}, {"role": "assistant", "content": "Sure."}]
    assert entity_recall(original, [{"role": "user", "content": "Melanie?"}]) == pytest.approx(0.5)


def test_bad_input_names_the_argument() -> None:
    with pytest.raises(CtxFoldError, match="compressed"):
        entity_recall("Melanie", 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="text"):
        extract_mentions(None)  # type: ignore[arg-type]
