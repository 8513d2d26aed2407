"""`ConversationStore`: a conversation-centred view of a memory store, with
the seed API's `get_conversation_stats` and `clear_conversation`.

A `ConversationStore` is bound to a user and an agent (empty by default);
a conversation's messages are written into ``Scope(user_id=..., agent_id=...,
conversation_id=...)``, and its stats and `clear_conversation` cover the
conversation's scopes of that user and agent (any session), so two users'
conversations with the same id never mix. ``user_id=None`` / ``agent_id=None``
make a fleet-wide view that reads and clears the conversation of every user
or agent (it cannot add messages). The compaction summaries of a
conversation are kept in its scope too (``store.caches.put_compaction(...,
scope=conversations.scope(conversation_id))``): the stats count and
`clear_conversation` deletes only those of this user and agent.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from ctxfold.errors import InvalidInputError
from ctxfold.memory.scope import Scope
from ctxfold.memory.tiers import ChatMessage

__all__ = ["ConversationStats", "ConversationStore"]


class ConversationStats(msgspec.Struct, kw_only=True):
    """A conversation's size: messages, tokens, first and last message times, messages per role."""

    conversation_id: str
    messages: int
    tokens: int
    first_message_at: float | None
    last_message_at: float | None
    by_role: dict[str, int]
    memories: int
    episodes: int
    summaries: int


class ConversationStore:
    """``ConversationStore(store)`` or ``ConversationStore("agent.db")`` (a `SqliteStore`)."""

    def __init__(self, store: Any, *, user_id: str | None = "", agent_id: str | None = "") -> None:
        if isinstance(store, (str, os.PathLike)):
            from ctxfold.memory.sqlite import SqliteStore

            store = SqliteStore(store)
        self.store = store
        self.user_id = user_id
        self.agent_id = agent_id

    def scope(self, conversation_id: str) -> Scope:
        """The scope this user's and agent's messages of ``conversation_id`` are stored in."""
        if not isinstance(conversation_id, str) or not conversation_id:
            raise InvalidInputError(f"conversation_id: must be a non-empty str, got {conversation_id!r}")
        return Scope(user_id=self.user_id, agent_id=self.agent_id, conversation_id=conversation_id)

    def _all_sessions(self, conversation_id: str) -> Scope:
        return self.scope(conversation_id).widen("session_id")

    def add_message(self, conversation_id: str, role: str, content: str, **fields: Any) -> None:
        """Append one message (``fields``: the other `ChatMessage` fields) to the conversation."""
        self.store.chat.append(ChatMessage(role=role, content=content, **fields), scope=self.scope(conversation_id))

    def add_messages(self, conversation_id: str, messages: list[Any]) -> int:
        """Append messages (`ChatMessage` or dicts) to the conversation; how many were added."""
        return int(self.store.chat.extend(messages, scope=self.scope(conversation_id)))

    def get_messages(self, conversation_id: str, limit: int | None = None) -> list[ChatMessage]:
        """The conversation's messages (this user/agent, any session), oldest first
        (the last ``limit`` if given)."""
        n = limit if limit is not None else 2**62
        return list(self.store.chat.recent(scope=self._all_sessions(conversation_id), n=n))

    def get_conversation_stats(self, conversation_id: str) -> ConversationStats:
        """Counts over the conversation's scopes (see the module docstring): messages (by role), tokens,
        first and last message time, memories, episodes, cached summaries."""
        wide = self._all_sessions(conversation_id)
        db = self.store.backend
        with db.read() as cur:
            where, params = db.scope_filter(cur, wide)
            rows = db.execute(
                cur, f"SELECT role, COUNT(*), COALESCE(SUM(tokens), 0), MIN(created_at), MAX(created_at) "
                f"FROM chat_messages WHERE {where} GROUP BY role", params,
            ).fetchall()
            memories = db.execute(cur, f"SELECT COUNT(*) FROM memories WHERE {where}", params).fetchone()[0]
            episodes = db.execute(cur, f"SELECT COUNT(*) FROM episodes WHERE {where}", params).fetchone()[0]
            summaries = db.execute(cur, f"SELECT COUNT(*) FROM summaries WHERE {where}", params).fetchone()[0]
        firsts = [r[3] for r in rows if r[3] is not None]
        lasts = [r[4] for r in rows if r[4] is not None]
        return ConversationStats(
            conversation_id=conversation_id,
            messages=sum(int(r[1]) for r in rows),
            tokens=sum(int(r[2]) for r in rows),
            first_message_at=min(firsts) if firsts else None,
            last_message_at=max(lasts) if lasts else None,
            by_role={r[0]: int(r[1]) for r in rows},
            memories=int(memories),
            episodes=int(episodes),
            summaries=int(summaries),
        )

    def clear_conversation(self, conversation_id: str) -> int:
        """Delete everything of the conversation in this store's user/agent (every
        session), its cached summaries included; how many rows went."""
        return int(self.store.clear(self._all_sessions(conversation_id)))

    def close(self) -> None:
        """Close the underlying store."""
        self.store.close()
