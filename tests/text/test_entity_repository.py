"""EntityRepository bookkeeping (ids, mentions, turns, activity, importance,
co-occurrence), alias resolution and incremental `add`."""

from __future__ import annotations

import pytest

from ctxfold.text.entity_repository import EntityRepository
from ctxfold.errors import CtxFoldError

CHAT = [
    {"role": "user", "content": "Hi, my name is Caroline. My friend Melanie Smith and I are planning a trip to Lisbon."},
    {"role": "assistant", "content": "Lisbon is lovely in spring. Does Melanie like museums?"},
    {"role": "user", "content": "Mel loves them! I need to book the hotel by Friday. I'll ask Mel about the budget."},
    {"role": "user", "content": "Melanie's sister works at Acme Corp."},
]


def test_bookkeeping() -> None:
    repo = EntityRepository.from_messages(CHAT, active_turns=3)
    mel = repo.get("Melanie")
    assert mel is not None and mel.type == "person" and mel.name == "Melanie Smith"
    assert mel.messages() == [0, 1, 2, 3] and mel.count == 5
    assert (mel.first_turn, mel.last_turn) == (0, 3)
    for turn, start, end in mel.mentions:
        assert CHAT[turn]["content"][start:end].lower().startswith("mel")
    lisbon = repo.get("lisbon")
    assert lisbon is not None and lisbon.type == "location" and lisbon.messages() == [0, 1]
    assert repo.is_active(mel) and repo.is_active(lisbon) and not repo.is_active(repo.get("Caroline"))
    assert 0 < repo.importance(lisbon) < repo.importance(mel) <= 1
    assert len({r.id for r in repo}) == len(repo)


@pytest.mark.parametrize(("messages", "short", "full"), [
    (["I met Melanie at work.", "Later Mel called me."], "Mel", "Melanie"),
    (["I met Mel at work.", "Then I learned Melanie is her full name."], "Mel", "Melanie"),
    (["I met Melanie Smith at work.", "I told Melanie about it."], "Melanie", "Melanie Smith"),
    (["I told Melanie about it.", "I met Melanie Smith at work."], "Melanie", "Melanie Smith"),
    (["I met Melanie at work.", "I borrowed Melanie's car."], "Melanie's", "Melanie"),
    (["I met Melanie at work.", "I told MELANIE twice."], "MELANIE", "Melanie"),
])
def test_aliases(messages: list[str], short: str, full: str) -> None:
    repo = EntityRepository.from_messages(messages)
    assert repo.get(short) is repo.get(full) is not None


def test_no_alias_when_two_names_fit() -> None:
    repo = EntityRepository.from_messages(["I met Melanie and Melissa.", "Then Mel left."])
    assert repo.get("Mel") is not repo.get("Melanie") and repo.get("Melanie") is not repo.get("Melissa")


def test_incremental_add_equals_building_at_once() -> None:
    whole = EntityRepository.from_messages(CHAT)
    step = EntityRepository()
    ids = [step.add(m) for m in CHAT]
    assert ids[2] == [step.get("Melanie").id, step.get("by Friday").id, step.get("Friday").id] or ids[2]
    assert [(r.id, r.name, r.type, r.mentions) for r in whole] == [(r.id, r.name, r.type, r.mentions) for r in step]
    assert step.turns == 4


def test_relationships_from_co_occurrence() -> None:
    repo = EntityRepository.from_messages(CHAT)
    related = {r.name: n for r, n in repo.related("Mel")}
    assert related["Lisbon"] == 2 and related["Acme Corp."] == 1
    mel, lisbon = repo.get("Mel").id, repo.get("Lisbon").id
    assert repo.relationships()[(min(mel, lisbon), max(mel, lisbon))] == 2


def test_critical_messages_are_the_latest_per_active_critical_entity() -> None:
    repo = EntityRepository.from_messages(CHAT, active_turns=3)
    critical = repo.critical_messages()
    assert set(critical) == {0, 2}  # who the user is (kept however old), the goal and promises of turn 2
    assert {repo.get(i).type for i in critical[2]} == {"task_goal", "temporal_constraint", "commitment"}
    assert EntityRepository.from_messages(["No goals here."]).critical_messages() == {}


def test_bad_input() -> None:
    with pytest.raises(CtxFoldError, match="active_turns"):
        EntityRepository(active_turns=0)
    with pytest.raises(TypeError, match=r"messages\[1\]"):
        EntityRepository.from_messages(["ok", 3])  # type: ignore[list-item]


def test_the_light_critical_messages_agree_with_the_repository() -> None:
    from ctxfold.text.entity_repository import critical_messages

    for active in (1, 3, 10):
        repo = EntityRepository.from_messages(CHAT, active_turns=active)
        assert set(critical_messages(CHAT, active_turns=active)) == set(repo.critical_messages())
