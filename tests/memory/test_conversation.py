"""`ConversationStore`: a user's conversations over a store, and it never
leaves its user's scope."""

from __future__ import annotations

import pytest
from ctxfold.errors import InvalidInputError
from ctxfold.memory import ConversationStore, Memory
from memory_stores import Backend


# --- ConversationStore ----------------------------------------------------------------------
def test_conversation_store(store) -> None:
    conversations = ConversationStore(store, user_id="u1")
    conversations.add_message("c1", "user", "hello there")
    conversations.add_messages("c1", [{"role": "assistant", "content": "hi, how can I help?"}])
    conversations.add_message("c2", "user", "another conversation")
    store.add(Memory(content="c1 fact"), scope=conversations.scope("c1"))
    store.caches.put_compaction("c1", 0, 2, 1, "h", "greeting", 1, scope=conversations.scope("c1"))
    stats = conversations.get_conversation_stats("c1")
    assert (stats.messages, stats.by_role, stats.memories, stats.summaries) == (2, {"user": 1, "assistant": 1}, 1, 1)
    assert stats.tokens > 0 and stats.first_message_at <= stats.last_message_at
    assert [m.content for m in conversations.get_messages("c1", limit=1)] == ["hi, how can I help?"]
    assert conversations.clear_conversation("c1") >= 4
    assert conversations.get_conversation_stats("c1").messages == 0
    assert conversations.get_conversation_stats("c2").messages == 1
    # bound to a user: another user's conversation of the same id is not touched
    bob, fleet = ConversationStore(store, user_id="bob"), ConversationStore(store, user_id=None)
    bob.add_message("c2", "user", "bob's c2")
    assert [m.content for m in conversations.get_messages("c2")] == ["another conversation"]
    assert fleet.get_conversation_stats("c2").messages == 2
    conversations.clear_conversation("c2")
    assert [m.content for m in bob.get_messages("c2")] == ["bob's c2"]
    with pytest.raises(InvalidInputError, match="wide scope"):
        fleet.add_message("c3", "user", "x")


def test_conversation_store_stays_in_its_user(backend: Backend) -> None:
    """A `ConversationStore` bound to a user reads, counts and clears that user's
    conversation only, even when another user has a conversation of the same id
    (ids like "main" or "1" are common)."""
    from ctxfold.memory import ConversationStore

    with backend.open() as store:
        alice, bob = ConversationStore(store, user_id="alice"), ConversationStore(store, user_id="bob")
        alice.add_message("c1", "user", "alice asks about the Berlin office")
        bob.add_message("c1", "user", "bob asks about invoices")
        bob.add_message("c1", "assistant", "invoices are due in thirty days")
        assert [m.content for m in alice.get_messages("c1")] == ["alice asks about the Berlin office"]
        assert alice.get_conversation_stats("c1").messages == 1, "alice's stats count bob's messages"
        alice.clear_conversation("c1")
        assert alice.get_messages("c1") == []
        assert len(bob.get_messages("c1")) == 2, "alice's clear_conversation deleted bob's conversation"
        assert bob.get_conversation_stats("c1").messages == 2
