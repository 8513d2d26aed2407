"""`store.agent_messages`: messages between agents, with priorities and TTLs."""

from __future__ import annotations

import time

import pytest
from ctxfold.errors import InvalidInputError
from ctxfold.memory import AgentMessage, Scope
from memory_stores import U1


# --- agent messages -------------------------------------------------------------------------
def test_agent_messages(store) -> None:
    fleet = Scope(user_id="team")
    now = time.time()
    store.agent_messages.send(AgentMessage(source="planner", target="coder", content="low", priority=0.2, session_id="s1"), scope=fleet)
    store.agent_messages.send(AgentMessage(source="planner", target="coder", content="urgent", priority=0.9, session_id="s1"), scope=fleet)
    store.agent_messages.send(AgentMessage(source="planner", target="coder", content="old", ttl_seconds=5, created_at=now - 10,
                                    session_id="s1"), scope=fleet)
    store.agent_messages.send(AgentMessage(source="planner", target="coder", content="other session", session_id="s2",
                                    parent_task="t1", metadata={"k": 1}), scope=fleet)
    store.agent_messages.send(AgentMessage(source="planner", target="tester", content="for tester"), scope=fleet)
    assert [m.content for m in store.agent_messages.query_by_target("coder", scope=fleet, session_id="s1")] == ["urgent", "low"]
    assert len(store.agent_messages.query_by_target("coder", scope=fleet)) == 3
    assert len(store.agent_messages.query_by_target("coder", scope=fleet, include_expired=True)) == 4
    assert store.agent_messages.query_by_target("coder", scope=U1) == []
    other = store.agent_messages.query_by_target("coder", scope=fleet, session_id="s2")[0]
    assert (other.parent_task, other.metadata, other.type) == ("t1", {"k": 1}, "node.message")
    assert [m.content for m in store.agent_messages.in_session("s1", scope=fleet)] == ["low", "urgent"]
    assert store.agent_messages.purge_expired() == 1
    with pytest.raises(InvalidInputError, match="priority"):
        store.agent_messages.send(AgentMessage(source="a", target="b", content="x", priority=1.5), scope=fleet)
