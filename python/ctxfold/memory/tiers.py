"""The memory tiers of multi-turn memory, all kept per scope:

- **short-term** (``store.chat``, `ChatHistory`): the messages of a
  conversation; ``store.chat.recent(scope=..., n=...)`` gives the last N;
- **working memory** (``store.working``, `WorkingMemories`): one
  `WorkingMemory` per scope (active entities, goals, pending questions,
  conversation state), read and updated atomically;
- **long-term** (``store.memories``): the typed memories, searched
  semantically (``search``, top-k with a similarity threshold);
- **episodic** (``store.episodes``, `Episodes`): significant events
  (`Episode`) with a significance score, listed by significance or recalled
  by similarity.

`MemoryTiers` bundles the four for one scope.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any

import msgspec

from ctxfold._core import count_tokens
from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.memory.backend import Part
from ctxfold.memory.embedding import embed_texts, from_blobs, to_blob
from ctxfold.memory.matrix import select_top
from ctxfold.memory.checks import integer, metadata, number, text, text_list, unit_interval
from ctxfold.memory.scope import Scope, check_scope

if TYPE_CHECKING:
    from ctxfold.memory.store import SqlStore
    from ctxfold.memory.records import Memory

__all__ = ["ChatHistory", "ChatMessage", "Episode", "Episodes", "MemoryTiers", "WorkingMemories", "WorkingMemory"]


class ChatMessage(msgspec.Struct, kw_only=True):
    """One message of a conversation (short-term tier). ``tokens`` is counted
    (o200k_base) when left at 0."""

    role: str
    content: str
    tokens: int = 0
    timestamp: float | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)


class WorkingMemory(msgspec.Struct, kw_only=True):
    """What the conversation is about right now."""

    entities: list[str] = msgspec.field(default_factory=list)
    goals: list[str] = msgspec.field(default_factory=list)
    pending_questions: list[str] = msgspec.field(default_factory=list)
    state: dict[str, Any] = msgspec.field(default_factory=dict)
    updated_at: float | None = None


class Episode(msgspec.Struct, kw_only=True):
    """A significant event; ``significance`` in [0, 1]."""

    content: str
    significance: float = 0.5
    id: str = ""
    timestamp: float | None = None
    tags: list[str] = msgspec.field(default_factory=list)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    score: float = 0.0
    """Cosine similarity to the query of `Episodes.recall`."""


def _check_message(m: ChatMessage, argument: str) -> ChatMessage:
    return msgspec.structs.replace(
        m,
        role=text(m.role, f"{argument}.role", column=True),
        content=text(m.content, f"{argument}.content"),
        tokens=integer(m.tokens, f"{argument}.tokens"),
        timestamp=number(m.timestamp, f"{argument}.timestamp", optional=True),
        metadata=metadata(m.metadata, f"{argument}.metadata"),
    )


def _check_working(w: WorkingMemory, argument: str) -> WorkingMemory:
    return msgspec.structs.replace(
        w,
        entities=text_list(w.entities, f"{argument}.entities"),
        goals=text_list(w.goals, f"{argument}.goals"),
        pending_questions=text_list(w.pending_questions, f"{argument}.pending_questions"),
        state=metadata(w.state, f"{argument}.state"),
        updated_at=number(w.updated_at, f"{argument}.updated_at", optional=True),
    )


_msg_decoder = msgspec.msgpack.Decoder(ChatMessage)
_wm_decoder = msgspec.msgpack.Decoder(WorkingMemory)
_ep_decoder = msgspec.msgpack.Decoder(Episode)
_encode = msgspec.msgpack.Encoder().encode


class ChatHistory(Part):
    """The short-term tier (``store.chat``): each scope's conversation messages."""

    def extend(self, messages: list[ChatMessage | dict[str, Any]], *, scope: Scope) -> int:
        """Append messages (`ChatMessage` or ``{"role", "content"}`` dicts) to the
        scope's conversation in one transaction; how many."""
        check_scope(scope, write=True)
        if isinstance(messages, (str, dict, ChatMessage)):
            raise InvalidTypeError(
                f"messages: expected a list of messages, got one {type(messages).__name__}. "
                "Fix: use append() or [message]"
            )
        now = time.time()
        rows = []
        for i, m in enumerate(messages):
            if isinstance(m, dict):
                try:
                    m = msgspec.convert(m, ChatMessage)
                except msgspec.ValidationError as e:
                    raise InvalidInputError(f"messages[{i}]: {e}; pass {{'role': str, 'content': str}}") from e
            if not isinstance(m, ChatMessage):
                raise InvalidTypeError(f"messages[{i}]: expected a ChatMessage or dict, got {type(m).__name__}")
            m = _check_message(m, f"messages[{i}]")
            tokens = m.tokens or int(count_tokens(m.content))
            m = msgspec.structs.replace(m, tokens=tokens, timestamp=now if m.timestamp is None else m.timestamp)
            rows.append(m)
        if not rows:
            return 0
        with self.backend.write() as cur:
            sid = self.backend.scope_id(cur, scope, create=True)
            self.backend.executemany(
                cur, "INSERT INTO chat_messages (scope_id, role, tokens, created_at, record) VALUES (?, ?, ?, ?, ?)",
                [(sid, m.role, m.tokens, m.timestamp, _encode(m)) for m in rows],
            )
        return len(rows)

    def append(self, message: ChatMessage | dict[str, Any], *, scope: Scope) -> None:
        """Append one message (see `extend`)."""
        self.extend([message], scope=scope)

    def recent(self, *, scope: Scope, n: int = 20) -> list[ChatMessage]:
        """The last ``n`` messages of the scope, oldest first (short-term memory)."""
        check_scope(scope, write=False)
        n = integer(n, "n")
        with self.backend.read() as cur:
            where, params = self.backend.scope_filter(cur, scope)
            rows = self.backend.execute(
                cur, f"SELECT record FROM chat_messages WHERE {where} ORDER BY rid DESC LIMIT ?", (*params, n)
            ).fetchall()
        return [_msg_decoder.decode(r[0]) for r in reversed(rows)]

class WorkingMemories(Part):
    """The working tier (``store.working``): one `WorkingMemory` per scope."""

    idempotent = frozenset({"set", "update"})

    def get(self, *, scope: Scope) -> WorkingMemory:
        """The scope's working memory (empty if none was set)."""
        check_scope(scope, write=True)
        with self.backend.read() as cur:
            return self._working(cur, scope)

    def _working(self, cur: Any, scope: Scope) -> WorkingMemory:
        sid = self.backend.scope_id(cur, scope, create=False)
        row = None if sid is None else self.backend.execute(cur, "SELECT record FROM working WHERE scope_id = ?", (sid,)).fetchone()
        return WorkingMemory() if row is None else _wm_decoder.decode(row[0])

    def set(self, working: WorkingMemory, *, scope: Scope) -> None:
        """Replace the scope's working memory."""
        check_scope(scope, write=True)
        if not isinstance(working, WorkingMemory):
            raise InvalidTypeError(f"working: expected a WorkingMemory, got {type(working).__name__}")
        working = _check_working(working, "working")
        with self.backend.write() as cur:
            self._put_working(cur, scope, working)

    def _put_working(self, cur: Any, scope: Scope, working: WorkingMemory) -> WorkingMemory:
        working = msgspec.structs.replace(working, updated_at=time.time())
        sid = self.backend.scope_id(cur, scope, create=True)
        self.backend.execute(
            cur,
            "INSERT INTO working (scope_id, updated_at, record) VALUES (?, ?, ?) "
            "ON CONFLICT (scope_id) DO UPDATE SET updated_at = excluded.updated_at, record = excluded.record",
            (sid, working.updated_at, _encode(working)),
        )
        return working

    def update(
        self,
        *,
        scope: Scope,
        add_entities: list[str] = (),  # type: ignore[assignment]
        add_goals: list[str] = (),  # type: ignore[assignment]
        add_questions: list[str] = (),  # type: ignore[assignment]
        resolve_questions: list[str] = (),  # type: ignore[assignment]
        complete_goals: list[str] = (),  # type: ignore[assignment]
        state: dict[str, Any] | None = None,
    ) -> WorkingMemory:
        """Change the working memory in one transaction (read, change, write);
        the new value. Lists keep their order without duplicates."""
        check_scope(scope, write=True)
        add_entities = text_list(add_entities, "add_entities")
        add_goals = text_list(add_goals, "add_goals")
        add_questions = text_list(add_questions, "add_questions")
        resolve_questions = text_list(resolve_questions, "resolve_questions")
        complete_goals = text_list(complete_goals, "complete_goals")
        state = None if state is None else metadata(state, "state")
        with self.backend.write() as cur:
            wm = self._working(cur, scope)
            wm.entities = list(dict.fromkeys([*wm.entities, *add_entities]))
            wm.goals = [g for g in dict.fromkeys([*wm.goals, *add_goals]) if g not in set(complete_goals)]
            wm.pending_questions = [
                q for q in dict.fromkeys([*wm.pending_questions, *add_questions]) if q not in set(resolve_questions)
            ]
            if state:
                wm.state.update(state)
            return self._put_working(cur, scope, wm)

class Episodes(Part):
    """The episodic tier (``store.episodes``): significant events by scope."""

    idempotent = frozenset({"add"})

    def add(self, episode: Episode, *, scope: Scope) -> str:
        """Record a significant event; its id (the same episode twice is stored once)."""
        check_scope(scope, write=True)
        if not isinstance(episode, Episode):
            raise InvalidTypeError(f"episode: expected an Episode, got {type(episode).__name__}")
        s = unit_interval(episode.significance, "episode.significance")
        if not text(episode.content, "episode.content").strip():
            raise InvalidInputError("episode.content: must be a non-empty str")
        episode = msgspec.structs.replace(
            episode,
            id=text(episode.id, "episode.id", key=True),
            timestamp=number(episode.timestamp, "episode.timestamp", optional=True),
            tags=text_list(episode.tags, "episode.tags"),
            metadata=metadata(episode.metadata, "episode.metadata"),
        )
        now = time.time()
        episode = msgspec.structs.replace(
            episode,
            id=episode.id or uuid.uuid5(uuid.NAMESPACE_OID, f"{episode.content}\x00{episode.timestamp}").hex,
            timestamp=now if episode.timestamp is None else episode.timestamp,
            significance=float(s),
            score=0.0,
        )
        vector = embed_texts(self.backend.embedder, [episode.content])[0]
        with self.backend.write() as cur:
            self.backend.check_dim(cur, len(vector), "embedder")
            sid = self.backend.scope_id(cur, scope, create=True)
            self.backend.execute(
                cur,
                "INSERT INTO episodes (scope_id, id, significance, created_at, record, embedding) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (scope_id, id) DO NOTHING",
                (sid, episode.id, episode.significance, episode.timestamp, _encode(episode), to_blob(vector)),
            )
        return episode.id

    def all(self, *, scope: Scope, min_significance: float = 0.0, limit: int | None = None) -> list[Episode]:
        """Episodes of at least ``min_significance``, most significant first (then newest)."""
        check_scope(scope, write=False)
        min_significance = number(min_significance, "min_significance")
        limit = integer(limit, "limit", optional=True)
        with self.backend.read() as cur:
            where, params = self.backend.scope_filter(cur, scope)
            sql = f"SELECT record FROM episodes WHERE {where} AND significance >= ? ORDER BY significance DESC, created_at DESC, rid DESC"
            args: list[Any] = [*params, min_significance]
            if limit is not None:
                sql += " LIMIT ?"
                args.append(limit)
            rows = self.backend.execute(cur, sql, args).fetchall()
        return [_ep_decoder.decode(r[0]) for r in rows]

    def recall(
        self, query: str, *, scope: Scope, k: int = 5, min_significance: float = 0.0, threshold: float | None = None
    ) -> list[Episode]:
        """The ``k`` episodes most similar to ``query`` (with ``.score``)."""
        check_scope(scope, write=False)
        text(query, "query")
        k, threshold = integer(k, "k"), number(threshold, "threshold", optional=True)
        min_significance = number(min_significance, "min_significance")
        q = embed_texts(self.backend.embedder, [query])[0]
        with self.backend.read() as cur:
            where, params = self.backend.scope_filter(cur, scope)
            rows = self.backend.execute(
                cur, f"SELECT record, embedding FROM episodes WHERE {where} AND significance >= ? ORDER BY rid",
                (*params, min_significance),
            ).fetchall()
        if not rows:
            return []
        vectors = from_blobs([bytes(r[1]) for r in rows], len(q))
        idx, scores = select_top(vectors, q, k, None)
        out = []
        for i, s in zip(idx, scores):
            if threshold is None or s >= threshold:
                ep = _ep_decoder.decode(rows[int(i)][0])
                ep.score = float(s)
                out.append(ep)
        return out


class MemoryTiers:
    """The four tiers of one scope: ``short_term()``, ``working``,
    ``long_term(query)`` and ``episodic(...)``, over any `SqlStore`."""

    def __init__(self, store: SqlStore, scope: Scope, *, short_term_n: int = 20, threshold: float = 0.3) -> None:
        self.store = store
        self.scope = check_scope(scope, write=True)
        self.short_term_n = integer(short_term_n, "short_term_n")
        self.threshold = number(threshold, "threshold")

    def remember(self, role: str, content: str) -> None:
        self.store.chat.append(ChatMessage(role=role, content=content), scope=self.scope)

    def short_term(self, n: int | None = None) -> list[ChatMessage]:
        return self.store.chat.recent(scope=self.scope, n=self.short_term_n if n is None else n)

    @property
    def working(self) -> WorkingMemory:
        return self.store.working.get(scope=self.scope)

    def update_working(self, **changes: Any) -> WorkingMemory:
        return self.store.working.update(scope=self.scope, **changes)

    def long_term(self, query: str, k: int = 5, threshold: float | None = None) -> list[Memory]:
        return self.store.memories.search(query, scope=self.scope, k=k, threshold=self.threshold if threshold is None else threshold)

    def episodic(self, query: str | None = None, k: int = 5, min_significance: float = 0.0) -> list[Episode]:
        if query is None:
            return self.store.episodes.all(scope=self.scope, min_significance=min_significance, limit=k)
        return self.store.episodes.recall(query, scope=self.scope, k=k, min_significance=min_significance)

    def record_episode(self, content: str, significance: float, **fields: Any) -> str:
        return self.store.episodes.add(Episode(content=content, significance=significance, **fields), scope=self.scope)

