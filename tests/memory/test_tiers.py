"""The memory tiers: short-term messages, working memory, episodes and the tiers facade."""

from __future__ import annotations

import pytest
from ctxfold.errors import InvalidInputError
from ctxfold.memory import Episode, Memory, MemoryTiers, WorkingMemory
from memory_stores import U1, U2


# --- tiers --------------------------------------------------------------------------------
def test_short_term_and_working_memory(store) -> None:
    store.chat.extend([{"role": "user", "content": f"message {i}"} for i in range(30)], scope=U1)
    last = store.chat.recent(scope=U1, n=5)
    assert [m.content for m in last] == [f"message {i}" for i in range(25, 30)]
    assert all(m.tokens > 0 and m.timestamp for m in last)
    assert store.chat.recent(scope=U2) == []
    assert store.working.get(scope=U1) == WorkingMemory()
    wm = store.working.update(scope=U1, add_entities=["Berlin", "Anna"], add_goals=["book room"], add_questions=["when?"])
    wm = store.working.update(scope=U1, add_entities=["Berlin"], resolve_questions=["when?"], state={"step": 2})
    assert (wm.entities, wm.goals, wm.pending_questions, wm.state) == (["Berlin", "Anna"], ["book room"], [], {"step": 2})
    assert store.working.get(scope=U1).entities == ["Berlin", "Anna"]
    assert store.working.get(scope=U2).entities == []
    store.working.set(WorkingMemory(goals=["x"]), scope=U1)
    assert store.working.get(scope=U1).goals == ["x"]


def test_episodes_and_tiers_facade(store) -> None:
    tiers = MemoryTiers(store, U1, short_term_n=2)
    tiers.record_episode("Deployment failed and was rolled back", 0.9)
    tiers.record_episode("User said hello", 0.1)
    tiers.record_episode("Customer signed the contract", 0.7)
    assert [e.significance for e in tiers.episodic()] == [0.9, 0.7, 0.1]
    assert [e.content for e in store.episodes.all(scope=U1, min_significance=0.5)] == [
        "Deployment failed and was rolled back", "Customer signed the contract"
    ]
    recalled = tiers.episodic("the deployment rollback", k=1)
    assert recalled[0].content.startswith("Deployment") and recalled[0].score > 0
    for i in range(3):
        tiers.remember("user", f"turn {i}")
    assert [m.content for m in tiers.short_term()] == ["turn 1", "turn 2"]
    tiers.update_working(add_goals=["ship"])
    assert tiers.working.goals == ["ship"]
    store.add(Memory(content="The deploy window is Tuesday"), scope=U1)
    assert tiers.long_term("deploy window", threshold=0.0)[0].content == "The deploy window is Tuesday"
    assert store.episodes.all(scope=U2) == []
    with pytest.raises(InvalidInputError, match="significance"):
        store.episodes.add(Episode(content="x", significance=2), scope=U1)
