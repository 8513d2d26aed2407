"""Direct messages between agents (``store.agent_messages``; Loom's
``node.message`` protocol).

A message goes from a ``source`` agent or node to a ``target`` one, with a
``priority`` in [0, 1], an optional ``ttl_seconds`` after which it is no
longer delivered, the ``parent_task`` it belongs to, the ``session_id`` it was
sent in and free ``metadata``. Messages live in a scope like every record (a
fleet typically shares one scope, e.g. ``Scope(user_id="team")``).
`query_by_target` returns a target's unexpired messages, most urgent first.
"""

from __future__ import annotations

import math
import time
import uuid
from typing import Any

import msgspec

from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.memory.backend import Part
from ctxfold.memory.checks import integer, metadata, number, positive_seconds, text, unit_interval
from ctxfold.memory.scope import Scope, check_scope

__all__ = ["MESSAGE_TYPE", "AgentMessage", "AgentMessages"]

MESSAGE_TYPE = "node.message"


class AgentMessage(msgspec.Struct, kw_only=True):
    """A message from one agent (``source``) to another (``target``), with a priority and an optional TTL."""

    source: str
    target: str
    content: str
    priority: float = 0.5
    ttl_seconds: float | None = None
    """Seconds after ``created_at`` the message expires (``None``: never)."""
    parent_task: str = ""
    session_id: str = ""
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    type: str = MESSAGE_TYPE
    id: str = ""
    created_at: float | None = None

    @property
    def expires_at(self) -> float | None:
        if self.ttl_seconds is None or self.created_at is None or math.isinf(self.ttl_seconds):
            return None
        return self.created_at + self.ttl_seconds


_decoder = msgspec.msgpack.Decoder(AgentMessage)
_encode = msgspec.msgpack.Encoder().encode


class AgentMessages(Part):
    """Messages between agents, by scope (``store.agent_messages``)."""

    def send(self, message: AgentMessage, *, scope: Scope) -> str:
        """Store a message for its target; its id."""
        check_scope(scope, write=True)
        if not isinstance(message, AgentMessage):
            raise InvalidTypeError(f"message: expected an AgentMessage, got {type(message).__name__}")
        p = unit_interval(message.priority, "message.priority")
        if message.ttl_seconds is not None:
            positive_seconds(message.ttl_seconds, "message.ttl_seconds (or None: no expiry)")
        source = text(message.source, "message.source", key=True)
        if not source or not text(message.target, "message.target", key=True):
            raise InvalidInputError("message: source and target must be non-empty agent or node ids")
        message = msgspec.structs.replace(
            message,
            content=text(message.content, "message.content"),
            parent_task=text(message.parent_task, "message.parent_task"),
            session_id=text(message.session_id, "message.session_id", key=True),
            metadata=metadata(message.metadata, "message.metadata"),
            type=text(message.type, "message.type"),
            id=text(message.id, "message.id", key=True),
            created_at=number(message.created_at, "message.created_at", optional=True),
        )
        message = msgspec.structs.replace(
            message,
            id=message.id or uuid.uuid4().hex,
            created_at=time.time() if message.created_at is None else message.created_at,
            priority=p,
        )
        with self.backend.write() as cur:
            sid = self.backend.scope_id(cur, scope, create=True)
            self.backend.execute(
                cur,
                "INSERT INTO agent_messages (scope_id, id, source, target, session_id, priority, created_at, expires_at, "
                "record) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scope_id, id) DO NOTHING",
                (sid, message.id, message.source, message.target, message.session_id, message.priority,
                 message.created_at, message.expires_at, _encode(message)),
            )
        return message.id

    def query_by_target(
        self,
        target: str,
        *,
        scope: Scope,
        session_id: str | None = None,
        include_expired: bool = False,
        limit: int | None = None,
    ) -> list[AgentMessage]:
        """The messages for ``target`` (of ``session_id`` if given), expired ones
        skipped, highest priority first, then oldest first."""
        check_scope(scope, write=False)
        text(target, "target", column=True)
        text(session_id, "session_id", column=True, optional=True)
        limit = integer(limit, "limit", optional=True)
        with self.backend.read() as cur:
            where, params = self.backend.scope_filter(cur, scope)
            sql = f"SELECT record FROM agent_messages WHERE {where} AND target = ?"
            args: list[Any] = [*params, target]
            if session_id is not None:
                sql += " AND session_id = ?"
                args.append(session_id)
            if not include_expired:
                sql += " AND (expires_at IS NULL OR expires_at > ?)"
                args.append(time.time())
            sql += " ORDER BY priority DESC, created_at, rid"
            if limit is not None:
                sql += " LIMIT ?"
                args.append(limit)
            rows = self.backend.execute(cur, sql, args).fetchall()
        return [_decoder.decode(bytes(r[0])) for r in rows]

    def in_session(self, session_id: str, *, scope: Scope, include_expired: bool = False) -> list[AgentMessage]:
        """Every message sent in a session (any target), oldest first."""
        check_scope(scope, write=False)
        text(session_id, "session_id", column=True)
        with self.backend.read() as cur:
            where, params = self.backend.scope_filter(cur, scope)
            sql = f"SELECT record FROM agent_messages WHERE {where} AND session_id = ?"
            args: list[Any] = [*params, session_id]
            if not include_expired:
                sql += " AND (expires_at IS NULL OR expires_at > ?)"
                args.append(time.time())
            rows = self.backend.execute(cur, sql + " ORDER BY created_at, rid", args).fetchall()
        return [_decoder.decode(bytes(r[0])) for r in rows]

    def purge_expired(self) -> int:
        """Delete every expired agent message; how many."""
        with self.backend.write() as cur:
            rows = self.backend.execute(cur, "DELETE FROM agent_messages WHERE expires_at <= ? RETURNING id", (time.time(),))
            return len(rows.fetchall())
