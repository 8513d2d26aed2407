"""Argument checks shared by both backends: bad input is refused with the same
typed error on SQLite and PostgreSQL, and accepted input (numpy values
included) works alike."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.memory import AgentMessage, ChatMessage, Episode, Memory, Scope, SqliteStore

psycopg = pytest.importorskip("psycopg")

from ctxfold.memory import PostgresStore  # noqa: E402
from psycopg import sql  # noqa: E402


# --------------------------------------------------------------------------------------
# One validation layer
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def both(tmp_path_factory, pg_dsn):
    """A SQLite store and a PostgreSQL store (a schema of its own), both with the
    default embedder, for the table tests."""
    schema = "ops_" + uuid.uuid4().hex[:12]
    sqlite = SqliteStore(tmp_path_factory.mktemp("ops") / "ops.db")
    postgres = PostgresStore(pg_dsn, schema=schema)
    try:
        yield {"sqlite": sqlite, "postgres": postgres}
    finally:
        sqlite.close()
        postgres.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def outcome(store: Any, call: Callable[[Any, Scope], Any], scope: Scope) -> tuple[str, Any]:
    try:
        return "ok", call(store, scope)
    except Exception as e:  # the outcome is compared across backends
        return type(e).__name__, str(e)


def memory(**fields: Any) -> Memory:
    return Memory(**{"content": "a memory to store", **fields})


EMOJI = "\U0001f600"  # four bytes of UTF-8


BAD: list[tuple[str, type, str, Callable[[Any, Scope], Any]]] = [
    # metadata and the other fields of a memory
    ("metadata-object", InvalidTypeError, "memories[0].metadata['when']",
     lambda s, sc: s.add(memory(metadata={"when": object()}), scope=sc)),
    ("metadata-int-key", InvalidTypeError, "memories[0].metadata", lambda s, sc: s.add(memory(metadata={1: "x"}), scope=sc)),
    ("metadata-huge-int", InvalidInputError, "memories[0].metadata['n']",
     lambda s, sc: s.add(memory(metadata={"n": 2**64}), scope=sc)),
    ("metadata-surrogate", InvalidInputError, "memories[0].metadata['s'][0]",
     lambda s, sc: s.add(memory(metadata={"s": ["\udc80"]}), scope=sc)),
    ("metadata-object-in-set", InvalidTypeError, "memories[0].metadata['x']",
     lambda s, sc: s.add(memory(metadata={"x": {object()}}), scope=sc)),
    ("content-surrogate", InvalidInputError, "memories[0].content", lambda s, sc: s.add(memory(content="a \ud800"), scope=sc)),
    ("content-int", InvalidTypeError, "memories[0].content", lambda s, sc: s.add(memory(content=42), scope=sc)),
    ("id-nul", InvalidInputError, "memories[0].id", lambda s, sc: s.add(memory(id="a\x00b"), scope=sc)),
    ("id-too-long", InvalidInputError, "memories[0].id", lambda s, sc: s.add(memory(id="i" * 513), scope=sc)),
    ("tags-str", InvalidTypeError, "memories[0].tags", lambda s, sc: s.add(memory(tags="urgent"), scope=sc)),
    ("created-nan", InvalidInputError, "memories[0].created_at",
     lambda s, sc: s.add(memory(created_at=float("nan")), scope=sc)),
    ("add-many-str", InvalidTypeError, "memories", lambda s, sc: s.memories.add_many("a memory", scope=sc)),
    # scopes: valid text, no NUL, at most 512 bytes per field when written
    ("scope-surrogate", InvalidInputError, "Scope.user_id", lambda s, sc: s.add(memory(), scope=Scope(user_id="\ud800"))),
    ("scope-nul", InvalidInputError, "Scope.conversation_id",
     lambda s, sc: s.memories.count(scope=Scope(user_id="u", conversation_id="c\x00"))),
    ("scope-too-long", InvalidInputError, "scope.user_id", lambda s, sc: s.add(memory(), scope=Scope(user_id="u" * 513))),
    ("scope-wide-characters", InvalidInputError, "scope.session_id",
     lambda s, sc: s.chat.extend([{"role": "user", "content": "hi"}], scope=Scope(session_id=EMOJI * 129))),
    ("scope-over-the-index-row", InvalidInputError, "scope.user_id",
     lambda s, sc: s.add(memory(), scope=Scope(user_id="a" * 700, agent_id="b" * 700, session_id="c" * 700))),
    # limits and counts: ints in [0, 2**63 - 1]
    ("recent-n-2**63", InvalidInputError, "n", lambda s, sc: s.chat.recent(scope=sc, n=2**63)),
    ("recent-n-negative", InvalidInputError, "n", lambda s, sc: s.chat.recent(scope=sc, n=-1)),
    ("recent-n-str", InvalidTypeError, "n", lambda s, sc: s.chat.recent(scope=sc, n="5")),
    ("recent-n-float", InvalidTypeError, "n", lambda s, sc: s.chat.recent(scope=sc, n=5.0)),
    ("recent-n-bool", InvalidTypeError, "n", lambda s, sc: s.chat.recent(scope=sc, n=True)),
    ("episodes-limit-negative", InvalidInputError, "limit", lambda s, sc: s.episodes.all(scope=sc, limit=-1)),
    ("episodes-limit-2**63", InvalidInputError, "limit", lambda s, sc: s.episodes.all(scope=sc, limit=2**63)),
    ("messages-limit-negative", InvalidInputError, "limit", lambda s, sc: s.agent_messages.query_by_target("b", scope=sc, limit=-1)),
    ("search-k-negative", InvalidInputError, "k", lambda s, sc: s.search("x", scope=sc, k=-1)),
    ("search-k-2**63", InvalidInputError, "k", lambda s, sc: s.search("x", scope=sc, k=2**63)),
    ("search-threshold-nan", InvalidInputError, "threshold", lambda s, sc: s.search("x", scope=sc, threshold=float("nan"))),
    ("recall-k-negative", InvalidInputError, "k", lambda s, sc: s.episodes.recall("x", scope=sc, k=-1)),
    ("budget-2**63", InvalidInputError, "budget", lambda s, sc: s.iterations.log(scope=sc).reasoning_context("goal", 2**63)),
    # text that reaches a column: no NUL, valid Unicode
    ("get-id-nul", InvalidInputError, "memory_id", lambda s, sc: s.get("a\x00", scope=sc)),
    ("get-id-int", InvalidTypeError, "memory_id", lambda s, sc: s.get(7, scope=sc)),
    ("delete-id-surrogate", InvalidInputError, "memory_id", lambda s, sc: s.memories.delete("\ud800", scope=sc)),
    ("archive-reason-nul", InvalidInputError, "reason", lambda s, sc: s.archive.move("x", scope=sc, reason="r\x00")),
    ("category-nul", InvalidInputError, "category", lambda s, sc: s.memories.all(scope=sc, category="fa\x00ct")),
    ("search-query-surrogate", InvalidInputError, "query", lambda s, sc: s.search("\ud800", scope=sc)),
    ("target-nul", InvalidInputError, "target", lambda s, sc: s.agent_messages.query_by_target("b\x00", scope=sc)),
    ("session-nul", InvalidInputError, "session_id", lambda s, sc: s.agent_messages.in_session("s\x00", scope=sc)),
    # the other records
    ("chat-role-nul", InvalidInputError, "messages[0].role",
     lambda s, sc: s.chat.extend([{"role": "us\x00er", "content": "hi"}], scope=sc)),
    ("chat-tokens-negative", InvalidInputError, "messages[0].tokens",
     lambda s, sc: s.chat.extend([ChatMessage(role="user", content="hi", tokens=-1)], scope=sc)),
    ("chat-metadata-object", InvalidTypeError, "messages[0].metadata['x']",
     lambda s, sc: s.chat.extend([ChatMessage(role="user", content="hi", metadata={"x": object()})], scope=sc)),
    ("chat-one-message", InvalidTypeError, "messages",
     lambda s, sc: s.chat.extend({"role": "user", "content": "hi"}, scope=sc)),
    ("agent-target-too-long", InvalidInputError, "message.target",
     lambda s, sc: s.agent_messages.send(AgentMessage(source="a", target="t" * 600, content="x"), scope=sc)),
    ("agent-metadata-object", InvalidTypeError, "message.metadata['x']",
     lambda s, sc: s.agent_messages.send(AgentMessage(source="a", target="b", content="x", metadata={"x": object()}), scope=sc)),
    ("episode-id-nul", InvalidInputError, "episode.id",
     lambda s, sc: s.episodes.add(Episode(content="an event", id="e\x00"), scope=sc)),
    ("episode-content-int", InvalidTypeError, "episode.content", lambda s, sc: s.episodes.add(Episode(content=5), scope=sc)),
    ("working-entities-str", InvalidTypeError, "add_entities",
     lambda s, sc: s.working.update(scope=sc, add_entities="Berlin")),
    ("working-state-object", InvalidTypeError, "state['k']", lambda s, sc: s.working.update(scope=sc, state={"k": object()})),
    ("iteration-log-nul", InvalidInputError, "log", lambda s, sc: s.iterations.log(scope=sc, log="l\x00g")),
    ("tool-call-params-object", InvalidTypeError, "call.params['p']",
     lambda s, sc: s.iterations.log(scope=sc).record_call(tool="t", params={"p": object()})),
    # the engine's caches: keys as every other key, values as metadata
    ("memo-namespace-nul", InvalidInputError, "namespace", lambda s, sc: s.caches.memo_set("n\x00", "k", 1, scope=sc)),
    ("memo-key-nul", InvalidInputError, "key", lambda s, sc: s.caches.memo_set("n", "k\x00", 1, scope=sc)),
    ("memo-key-too-long", InvalidInputError, "key", lambda s, sc: s.caches.memo_set("n", "k" * 513, 1, scope=sc)),
    ("memo-read-key-nul", InvalidInputError, "key", lambda s, sc: s.caches.memo_get("n", "k\x00", scope=sc)),
    ("memo-namespace-int", InvalidTypeError, "namespace", lambda s, sc: s.caches.memo_set(3, "k", 1, scope=sc)),
    ("memo-value-object", InvalidTypeError, "value", lambda s, sc: s.caches.memo_set("n", "k", object(), scope=sc)),
    ("memo-values-object", InvalidTypeError, "values['k']",
     lambda s, sc: s.caches.memo_set_many("n", {"k": object()}, scope=sc)),
    ("memo-values-list", InvalidTypeError, "values", lambda s, sc: s.caches.memo_set_many("n", [("k", 1)], scope=sc)),
    ("memo-key-object", InvalidTypeError, "key", lambda s, sc: s.caches.memo_set("n", object(), 1, scope=sc)),
    ("memo-ttl-nan", InvalidInputError, "ttl", lambda s, sc: s.caches.memo_set("n", "k", 1, ttl=float("nan"), scope=sc)),
    ("memo-purge-namespace-nul", InvalidInputError, "namespace", lambda s, sc: s.caches.memo_purge("n\x00", scope=sc)),
    ("summary-nul", InvalidInputError, "summary", lambda s, sc: s.caches.put_summary("h", 1, "a\x00b", scope=sc)),
    ("summary-hash-too-long", InvalidInputError, "content_hash", lambda s, sc: s.caches.put_summary("h" * 513, 1, "x", scope=sc)),
    ("summary-level-negative", InvalidInputError, "level", lambda s, sc: s.caches.put_summary("h", -1, "x", scope=sc)),
    ("summary-level-2**63", InvalidInputError, "level", lambda s, sc: s.caches.get_summary("h", 2**63, scope=sc)),
    ("compaction-conversation-nul", InvalidInputError, "conversation_id",
     lambda s, sc: s.caches.put_compaction("c\x00", 0, 1, 1, "h", "x", 1)),
    ("compaction-conversation-too-long", InvalidInputError, "conversation_id",
     lambda s, sc: s.caches.put_compaction("c" * 513, 0, 1, 1, "h", "x", 1)),
    ("compaction-tokens-float", InvalidTypeError, "tokens", lambda s, sc: s.caches.put_compaction("c", 0, 1, 1, "h", "x", 1.5)),
    ("embedding-hash-nul", InvalidInputError, "hashes[0]", lambda s, sc: s.caches.put_embeddings(["h\x00"], "m", np.ones((1, 4)))),
    ("embedding-model-too-long", InvalidInputError, "model",
     lambda s, sc: s.caches.put_embeddings(["h"], "m" * 513, np.ones((1, 4)))),
    ("embedding-hashes-str", InvalidTypeError, "hashes", lambda s, sc: s.caches.get_embeddings("h", "m")),
    ("embedding-nan", InvalidInputError, "vectors", lambda s, sc: s.caches.put_embeddings(["h"], "m", np.full((1, 4), np.nan))),
]


NUMPY_METADATA = {
    "f32": np.float32(0.5), "f64": np.float64(1.25), "i64": np.int64(-3), "u8": np.uint8(200), "b": np.bool_(True),
    "s": np.str_("text"), "array": np.arange(3), "matrix": np.eye(2, dtype=np.float32), "nested": {"x": [np.int16(7)]},
    "tuple": (1, np.float64(2.5)),
}


NUMPY_METADATA_STORED = {
    "f32": 0.5, "f64": 1.25, "i64": -3, "u8": 200, "b": True, "s": "text", "array": [0, 1, 2],
    "matrix": [[1.0, 0.0], [0.0, 1.0]], "nested": {"x": [7]}, "tuple": [1, 2.5],
}


KEY_LIMIT_SCOPE = Scope(user_id=EMOJI * 128, agent_id="a" * 512, session_id="é" * 256, conversation_id="c" * 512)


def _chat(s: Any, sc: Scope) -> Any:
    s.chat.extend([ChatMessage(role="user", content="hi", tokens=np.int64(3), metadata={"p": np.float64(0.5)})],
                      scope=sc)
    m = s.chat.recent(scope=sc, n=np.int64(1))[0]
    return m.tokens, m.metadata


ACCEPTED: list[tuple[str, Callable[[Any, Scope], Any], Any]] = [
    ("numpy-metadata", lambda s, sc: s.get(s.add(memory(metadata=NUMPY_METADATA), scope=sc), scope=sc).metadata,
     NUMPY_METADATA_STORED),
    ("numpy-confidence-ttl",
     lambda s, sc: (lambda m: (m.confidence, m.ttl))(
         s.get(s.add(memory(confidence=np.float32(0.875), ttl=np.int64(3600)), scope=sc), scope=sc)),
     (0.875, 3600.0)),
    ("content-with-nul", lambda s, sc: s.get(s.add(memory(content="a\x00b"), scope=sc), scope=sc).content, "a\x00b"),
    ("recent-n-largest", lambda s, sc: (s.chat.append({"role": "user", "content": "hi"}, scope=sc),
                                        [m.content for m in s.chat.recent(scope=sc, n=2**63 - 1)])[1], ["hi"]),
    ("episodes-limit-largest", lambda s, sc: s.episodes.all(scope=sc, limit=2**63 - 1), []),
    ("messages-limit-largest", lambda s, sc: s.agent_messages.query_by_target("b", scope=sc, limit=2**63 - 1), []),
    ("search-k-largest", lambda s, sc: (s.add(memory(), scope=sc),
                                        [m.content for m in s.search("memory", scope=sc, k=2**63 - 1)])[1],
     ["a memory to store"]),
    ("chat-numpy", _chat, (3, {"p": 0.5})),
    ("tool-call-numpy", lambda s, sc: (s.iterations.log(scope=sc).record_call(tool="t", params={"x": np.arange(2)}),
                                       s.iterations.log(scope=sc).calls()[0].params)[1], {"x": [0, 1]}),
    ("working-numpy", lambda s, sc: s.working.update(scope=sc, state={"n": np.int32(7)}).state, {"n": 7}),
    ("agent-message-numpy", lambda s, sc: (
        s.agent_messages.send(AgentMessage(source="a", target="b", content="x", priority=np.float32(0.25),
                                    metadata={"k": np.int8(1)}), scope=sc),
        [(m.priority, m.metadata) for m in s.agent_messages.query_by_target("b", scope=sc)])[1], [(0.25, {"k": 1})]),
    ("scope-at-the-key-limit", lambda s, sc: (s.add(memory(), scope=KEY_LIMIT_SCOPE), s.memories.count(scope=KEY_LIMIT_SCOPE))[1], 1),
    ("long-scope-reads", lambda s, sc: s.memories.count(scope=Scope(user_id="u" * 5000)), 0),
    ("memo-numpy", lambda s, sc: (s.caches.memo_set("n", np.str_("k"), {"v": np.float32(0.5), "a": np.arange(2)}, scope=sc),
                                  s.caches.memo_get("n", "k", scope=sc))[1], {"v": 0.5, "a": [0, 1]}),
    ("memo-numpy-key", lambda s, sc: (s.caches.memo_set("n", [np.int64(1), "x"], "v", scope=sc),
                                      s.caches.memo_get("n", [1, "x"], scope=sc))[1], "v"),
    ("memo-long-key-reads", lambda s, sc: s.caches.memo_get("n", "k" * 5000, "absent", scope=sc), "absent"),
    ("summary-numpy-level", lambda s, sc: (s.caches.put_summary("h", np.int64(2), "short", np.int32(3), scope=sc),
                                           s.caches.get_summary("h", 2, scope=sc))[1], "short"),
    ("embedding-numpy-hash", lambda s, sc: (s.caches.put_embeddings([np.str_("h1")], "m", np.ones((1, 4))),
                                            sorted(s.caches.get_embeddings(["h1"], "m")))[1], ["h1"]),
]


@pytest.mark.parametrize(("name", "error", "argument", "call"), BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_refused_alike(both, name: str, error: type, argument: str, call) -> None:
    scope = Scope(user_id=f"bad-{name}")
    results = {backend: outcome(store, call, scope) for backend, store in both.items()}
    assert results["sqlite"] == results["postgres"], f"the backends differ: {results}"
    kind, message = results["sqlite"]
    assert kind == error.__name__, message
    assert message.startswith(argument) or f"{argument}:" in message, message
    for backend, store in both.items():
        assert store.memories.count(scope=scope) == 0, f"{backend}: a refused call wrote"
        assert store.chat.recent(scope=scope) == []


@pytest.mark.parametrize(("name", "call", "expected"), ACCEPTED, ids=[a[0] for a in ACCEPTED])
def test_accepted_input_works_alike(both, name: str, call, expected: Any) -> None:
    scope = Scope(user_id=f"ok-{name}")
    results = {backend: outcome(store, call, scope) for backend, store in both.items()}
    assert results["sqlite"] == results["postgres"] == ("ok", expected), results
