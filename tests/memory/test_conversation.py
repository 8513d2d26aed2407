"""`ConversationStore`: a user's conversations over a store, and it never
leaves its user's scope."""

from __future__ import annotations

import subprocess

import pytest
from ctxfold.errors import InvalidInputError
from ctxfold.memory import ConversationStore, Memory, Scope, SqliteStore


BACKENDS = ["sqlite", "postgres"]


class Backend:
    """Where one test's store lives: a SQLite file or a fresh PostgreSQL database."""

    def __init__(self, name: str, location: str) -> None:
        self.name = name
        self.location = location

    def open(self, **kwargs):
        if self.name == "sqlite":
            return SqliteStore(self.location, **kwargs)
        from ctxfold.memory import PostgresStore

        return PostgresStore(self.location, **kwargs)

    def __repr__(self) -> str:
        return f"Backend({self.name}, {self.location})"


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", str(tmp_path / "agent.db"))
    return Backend("postgres", request.getfixturevalue("pg_fresh_dsn"))


CONTENTS = [
    "The Berlin office opens at 9 on weekdays",
    "Alice prefers tea over coffee in the morning",
    "The deploy failed because the disk was full",
    "We decided to use PostgreSQL for the shared fleet memory",
    "Invoices are due thirty days after delivery",
    "The staging cluster runs three replicas of the API",
    "Bob is allergic to peanuts",
    "Quarterly planning happens in the first week of January",
]


def covers(reader: Scope, owner: tuple) -> bool:
    """Whether a read in ``reader`` may see a record written in the exact scope ``owner``."""
    return all(r is None or r == o for r, o in zip(reader.values(), owner))


class Model:
    """What the store must hold: (kind, owner scope values, key) rows."""

    def __init__(self) -> None:
        self.rows: set[tuple[str, tuple, str]] = set()
        self.entities: dict[tuple, set[str]] = {}

    def seen_by(self, reader: Scope, kind: str | None = None) -> set[tuple[str, tuple, str]]:
        return {r for r in self.rows if covers(reader, r[1]) and (kind is None or r[0] == kind)}

    def keyed(self, reader: Scope, kind: str) -> set[tuple[tuple, str]]:
        return {(owner, key) for _, owner, key in self.seen_by(reader, kind)}

    def ids(self) -> set[str]:
        return {key for kind, _, key in self.rows if kind == "memory"}

    def remove(self, rows: set) -> None:
        self.rows -= rows
        for _, owner, _ in rows:
            self.entities.pop(owner, None)


def write(store, model: Model, scope: Scope, kind: str, c: int, n: int) -> None:
    from ctxfold.memory import AgentMessage, ChatMessage, Episode

    owner = scope.values()
    meta = {"scope": list(owner), "n": n}
    if kind == "memory":
        mid = store.add(Memory(category="fact", content=CONTENTS[c], metadata=meta), scope=scope)
        model.rows.add(("memory", owner, mid))
    elif kind == "chat":
        store.chat.append(ChatMessage(role="user", content=CONTENTS[c], metadata=meta), scope=scope)
        model.rows.add(("chat", owner, str(n)))
    elif kind == "working":
        entity = f"{owner}#{n}"
        store.working.update(scope=scope, add_entities=[entity])
        model.rows.add(("working", owner, "working"))  # one row per scope
        model.entities.setdefault(owner, set()).add(entity)
    elif kind == "episode":
        eid = store.episodes.add(Episode(content=f"{CONTENTS[c]} (event {n})", significance=0.7, metadata=meta), scope=scope)
        model.rows.add(("episode", owner, eid))
    elif kind == "message":
        mid = store.agent_messages.send(
            AgentMessage(source="planner", target="worker", content=CONTENTS[c], session_id="s1", metadata=meta),
            scope=scope,
        )
        model.rows.add(("message", owner, mid))
    else:
        store.iterations.log(scope=scope).record_call(tool="search", params=meta, raw_output=CONTENTS[c])
        model.rows.add(("call", owner, str(n)))


def send(proc: subprocess.Popen, line: str) -> None:
    proc.stdin.write(line.encode() + b"\n")
    proc.stdin.flush()


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
