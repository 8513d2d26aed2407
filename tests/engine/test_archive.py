"""Omission notes a model can act on, the `recall` tool that answers them,
and the bound on the archive of originals (in memory up to `archive_bytes`,
in the store beyond it and across processes)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import pytest

import ctxfold
from ctxfold import ContextEngine, InvalidInputError, InvalidTypeError, get_tokenizer, recall_tool
from ctxfold.engine.archive import ARCHIVE_NAMESPACE, Archive, original_text, tool_call_names
from ctxfold.engine.compaction import placeholder
from ctxfold.engine.cache import ENTRY_OVERHEAD
from ctxfold.engine.results import Item

TOK = get_tokenizer(encoding="cl100k_base")
NOTE = re.compile(
    r"\[(?:output of `[^`]+`|[a-z ]+) omitted to save context: [\d,]+ tokens; recall id (\S+) with the recall tool\]"
)
FLIGHTS = "flight LH123 departs 09:40 from FRA gate B22, price 412 EUR; " * 300


def travel(prefix: str = "") -> list[dict]:
    """A conversation whose one large tool result is what must go."""
    return [
        {"role": "system", "content": "You are a travel agent."},
        {"role": "user", "content": f"{prefix}Find flights to Lisbon"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "search_flights", "arguments": '{"to": "LIS"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": prefix + FLIGHTS},
        {"role": "assistant", "content": "I found several flights: LH123 at 09:40 is the cheapest at 412 EUR."},
        {"role": "user", "content": "Book the cheapest hotel near the center too, please."},
        {"role": "assistant", "content": "Sure, looking at hotels now."},
        {"role": "user", "content": "Thanks."},
    ]


def engine(**kwargs) -> ContextEngine:
    return ContextEngine(encoding="cl100k_base", embedder=None, **kwargs)


def openai_call(item_id, call_id: str = "call_r1") -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "recall", "arguments": json.dumps({"id": item_id})}}


def anthropic_call(item_id, call_id: str = "toolu_r1") -> dict:
    return {"type": "tool_use", "id": call_id, "name": "recall", "input": {"id": item_id}}


def item(kind: str | None, role: str = "tool", tokens: int = 4213, item_id: str = "m-7f3a9c2e10", **message) -> Item:
    message = {"role": role, "content": "x", **message}
    return Item(id=item_id, index=0, role=role, message=message, text="x", tokens=tokens, kind=kind)


# -- placeholders ---------------------------------------------------------------------


@pytest.mark.parametrize(("it", "tool_name", "expected"), [
    (item("tool_result"), "search_flights",
     "[output of `search_flights` omitted to save context: 4,213 tokens; recall id m-7f3a9c2e10 with the recall tool]"),
    (item("tool_result"), None,
     "[tool output omitted to save context: 4,213 tokens; recall id m-7f3a9c2e10 with the recall tool]"),
    (item(None, name="get_weather"), None,
     "[output of `get_weather` omitted to save context: 4,213 tokens; recall id m-7f3a9c2e10 with the recall tool]"),
    (item("file_read", role="user", tokens=812, item_id="r-7f3a"), None,
     "[file read omitted to save context: 812 tokens; recall id r-7f3a with the recall tool]"),
    (item("debug_log", role="assistant", tokens=90), None,
     "[debug log omitted to save context: 90 tokens; recall id m-7f3a9c2e10 with the recall tool]"),
    (item("intermediate", role="assistant", tokens=1_000_000), None,
     "[intermediate output omitted to save context: 1,000,000 tokens; recall id m-7f3a9c2e10 with the recall tool]"),
    (item("code_review", role="assistant"), None,
     "[code review omitted to save context: 4,213 tokens; recall id m-7f3a9c2e10 with the recall tool]"),
    (item(None, role="user", item_id="q1"), None,
     "[user message omitted to save context: 4,213 tokens; recall id q1 with the recall tool]"),
    (item("tool_result"), "a`b``", "[output of `ab` omitted to save context: 4,213 tokens; recall id m-7f3a9c2e10 with the recall tool]"),
])
def test_placeholder_wording(it, tool_name, expected) -> None:
    text = placeholder(it, tool_name=tool_name)
    assert text == expected
    assert "restore" not in text and "engine" not in text
    assert NOTE.fullmatch(text) and NOTE.fullmatch(text).group(1) == it.id


def test_tool_call_names_map_results_to_their_tool() -> None:
    from ctxfold.engine.messages import parse_messages

    items = parse_messages(travel(), TOK)
    names = tool_call_names(items)
    assert names == {"call_1": "search_flights"}
    tool = next(it for it in items if it.role == "tool")
    assert placeholder(tool, tool_name=names[tool.message["tool_call_id"]]).startswith("[output of `search_flights` omitted")


def test_a_cleared_tool_result_leaves_a_note_the_model_can_recall() -> None:
    eng = engine()
    res = eng.optimize(travel(), budget=300)
    notes = [NOTE.fullmatch(m["content"]) for m in res.messages if isinstance(m.get("content"), str) and "omitted" in m["content"]]
    assert notes and all(notes), [m["content"] for m in res.messages]
    answer = eng.recall(openai_call(notes[0].group(1)))
    assert answer == {"role": "tool", "tool_call_id": "call_r1", "content": FLIGHTS}


# -- the tool schemas -------------------------------------------------------------------


def test_recall_tool_schemas() -> None:
    tool = recall_tool()
    assert tool is recall_tool() and isinstance(tool, ctxfold.RecallTool) and "recall_tool" in ctxfold.__all__
    schema = {"type": "object", "properties": {"id": {"type": "string", "description": "The id given in the omission note."}},
              "required": ["id"], "additionalProperties": False}
    assert tool.openai == {"type": "function", "function": {"name": "recall", "description": tool.description,
                                                             "parameters": schema, "strict": True}}
    assert tool.anthropic == {"name": "recall", "description": tool.description, "input_schema": schema}
    assert "omitted to save context" in tool.description and len(tool.description) < 400
    # Each property is a new dict: a caller adding keys changes nothing else.
    tool.anthropic["cache_control"] = {"type": "ephemeral"}
    tool.openai["function"]["parameters"]["properties"].clear()
    assert "cache_control" not in tool.anthropic and tool.openai["function"]["parameters"] == schema
    with pytest.raises(AttributeError):
        tool.name = "other"  # type: ignore[misc]
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate({"id": "m-7f3a"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"id": "m-7f3a", "extra": 1}, schema)


def test_the_schemas_are_valid_sdk_tool_params() -> None:
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    import anthropic.types
    import openai.types.chat
    from sdk_checks import type_problems, unknown_keys

    openai_tool = openai.types.chat.ChatCompletionFunctionToolParam
    anthropic_tool = anthropic.types.ToolParam
    tool = recall_tool()
    assert not type_problems(openai_tool, tool.openai, "tool", "ChatCompletionFunctionToolParam")
    assert not unknown_keys(openai_tool, tool.openai, "tool")
    assert not type_problems(anthropic_tool, tool.anthropic, "tool", "ToolParam")
    assert not unknown_keys(anthropic_tool, tool.anthropic, "tool")
    # the checks can fail: a misspelt key is caught
    assert unknown_keys(anthropic_tool, {**tool.anthropic, "input_shema": {}}, "tool")


# -- engine.recall ------------------------------------------------------------------------


def _removed(eng: ContextEngine, messages: list[dict], budget: int = 300) -> list[str]:
    res = eng.optimize(messages, budget=budget)
    return [r.id for r in res.items if r.status != "kept"]


def test_recall_round_trip_openai_and_anthropic() -> None:
    pytest.importorskip("openai")
    pytest.importorskip("anthropic")
    from sdk_checks import assert_anthropic, assert_openai

    eng = engine()
    msgs = travel()
    tool_id = next(r.id for r in eng.optimize(msgs, budget=300).items if r.role == "tool" and r.status != "kept")
    call = openai_call(tool_id)
    answer = eng.recall(call)
    assert answer == {"role": "tool", "tool_call_id": "call_r1", "content": FLIGHTS}
    assert_openai([{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [call]}, answer])

    block = anthropic_call(tool_id)
    answer = eng.recall(block)
    assert answer == {"type": "tool_result", "tool_use_id": "toolu_r1", "content": FLIGHTS}
    assert_anthropic(None, [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [block]},
                            {"role": "user", "content": [answer]}])


def test_recall_takes_the_sdk_objects_as_returned() -> None:
    openai = pytest.importorskip("openai")
    anthropic = pytest.importorskip("anthropic")
    eng = engine()
    tool_id = next(r.id for r in eng.optimize(travel(), budget=300).items if r.role == "tool" and r.status != "kept")
    call = openai.types.chat.ChatCompletionMessageFunctionToolCall.model_validate(openai_call(tool_id, "call_x"))
    assert eng.recall(call) == {"role": "tool", "tool_call_id": "call_x", "content": FLIGHTS}
    block = anthropic.types.ToolUseBlock.model_validate(anthropic_call(tool_id, "toolu_x"))
    assert eng.recall(block) == {"type": "tool_result", "tool_use_id": "toolu_x", "content": FLIGHTS}


def test_recall_of_anthropic_conversations_and_structured_content() -> None:
    eng = engine()
    result_message = {"role": "user", "id": "u2", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": FLIGHTS}]}]}
    msgs = [
        {"role": "user", "content": "Find flights to Lisbon"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "search_flights", "input": {"to": "LIS"}}]},
        result_message,
        {"role": "assistant", "content": "LH123 at 09:40 is the cheapest at 412 EUR."},
        {"role": "user", "content": "Book a hotel near the center too."},
        {"role": "assistant", "content": "Looking at hotels now."},
        {"role": "user", "content": "Thanks."},
    ]
    assert "u2" in _removed(eng, msgs)
    answer = eng.recall(anthropic_call("u2"))
    assert answer == {"type": "tool_result", "tool_use_id": "toolu_r1", "content": FLIGHTS}
    assert eng.restore("u2") == result_message


def test_original_text() -> None:
    assert original_text({"role": "user", "content": "plain"}) == "plain"
    assert original_text({"role": "user", "content": [{"type": "text", "text": "a"}, "b",
                                                      {"type": "image_url", "image_url": {"url": "u"}}]}) == (
        'a\nb\n{"type": "image_url", "image_url": {"url": "u"}}')
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    assert original_text({"role": "assistant", "content": "Let me look.", "tool_calls": [call]}) == (
        'Let me look.\n{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}')
    assert original_text({"role": "assistant", "content": None}) == ""
    assert original_text({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "out"},
                                                      {"type": "text", "text": "and this"}]}) == "out\nand this"


@pytest.mark.parametrize("make", [openai_call, anthropic_call])
def test_unknown_id_is_an_answer_not_an_exception(make) -> None:
    eng = engine()
    for missing in ("m-0000000000", ""):
        answer = eng.recall(make(missing))
        text = answer["content"]
        assert "Nothing is stored under id" in text and repr(missing) in text
        assert answer.get("is_error") is (True if make is anthropic_call else None)


def test_numeric_ids_given_by_the_caller_can_be_recalled() -> None:
    eng = engine()
    msgs = [{**m, "id": i} for i, m in enumerate(travel())]
    assert "3" in _removed(eng, msgs)
    assert eng.recall({"type": "tool_use", "id": "toolu_1", "name": "recall", "input": {"id": 3}})["content"] == FLIGHTS


@pytest.mark.parametrize(("call", "error", "words"), [
    ({"id": "c", "type": "function", "function": {"name": "search", "arguments": '{"id": "m"}'}}, InvalidInputError, "call: calls the tool 'search'"),
    ({"type": "tool_use", "id": "t", "name": "lookup", "input": {"id": "m"}}, InvalidInputError, "call: calls the tool 'lookup'"),
    ({"id": "c", "type": "function", "function": {"name": "recall", "arguments": "{id: m}"}}, InvalidInputError, "call['function']['arguments']: not valid JSON"),
    ({"id": "c", "type": "function", "function": {"name": "recall", "arguments": '["m"]'}}, InvalidInputError, "call['function']['arguments']: expected an object"),
    ({"id": "c", "type": "function", "function": {"name": "recall", "arguments": "{}"}}, InvalidInputError, "'id'"),
    ({"type": "tool_use", "id": "t", "name": "recall", "input": {"id": ["m"]}}, InvalidInputError, "call['input']['id']: expected a str"),
    ({"type": "tool_use", "id": "t", "name": "recall", "input": {"id": True}}, InvalidInputError, "call['input']['id']"),
    ({"type": "tool_use", "name": "recall", "input": {"id": "m"}}, InvalidInputError, "call['id']"),
    ({"role": "assistant", "content": "recall m"}, InvalidInputError, "neither an OpenAI tool call"),
    ('{"id": "m"}', InvalidTypeError, "call: expected an OpenAI tool call"),
    (None, InvalidTypeError, "call: expected"),
])
def test_malformed_calls_name_the_argument(call, error, words) -> None:
    with pytest.raises(error) as info:
        engine().recall(call)
    assert words in str(info.value)


# -- the archive: bounded in memory, persisted in the store --------------------------------


def _size(item_id: str, message) -> int:
    from ctxfold.engine.cache import approx_bytes

    return approx_bytes(message) + approx_bytes(item_id) + ENTRY_OVERHEAD


def test_archive_evicts_least_recent_by_bytes() -> None:
    messages = {f"m{i}": {"role": "user", "content": f"{i} " + "x" * 1000} for i in range(10)}
    one = _size("m0", messages["m0"])
    archive = Archive(max_bytes=3 * one + 10)
    for i in range(3):
        archive.put(f"m{i}", messages[f"m{i}"])
    assert archive.get("m0") == messages["m0"]  # m0 is now the most recent
    archive.put("m3", messages["m3"])
    assert len(archive) == 3 and archive.nbytes <= archive.max_bytes
    assert archive.get("m1") is None and "m1" not in archive
    assert [archive.get(k) for k in ("m0", "m2", "m3")] == [messages[k] for k in ("m0", "m2", "m3")]
    # copies both ways: neither the caller's later edits nor the returned dict's change the original
    messages["m3"]["content"] = "edited"
    archive.get("m2")["content"] = "edited too"
    assert archive.get("m3")["content"].startswith("3 ") and archive.get("m2")["content"].startswith("2 ")
    # larger than the whole bound: not kept in memory (nothing else is evicted for it)
    archive.put("huge", {"role": "tool", "content": "y" * 10_000})
    assert archive.get("huge") is None and len(archive) == 3


def test_engine_archive_and_caches_stay_within_their_bounds() -> None:
    eng = engine(archive_bytes=60_000, cache_bytes=300_000)
    removed = [_removed(eng, travel(f"trip {n}: ")) for n in range(25)]
    assert all(removed)
    assert 0 < eng.archive.nbytes <= 60_000 and 0 < eng.cache.nbytes <= 300_000
    assert eng.restore(removed[-1][0])["content"].startswith("trip 24: ")
    with pytest.raises(InvalidInputError) as info:
        eng.restore(removed[0][0])
    assert "item_id" in str(info.value) and "store=" in str(info.value)
    assert "Nothing is stored" in eng.recall(openai_call(removed[0][0]))["content"]


def test_restore_checks_its_argument_and_byte_bounds_are_validated() -> None:
    with pytest.raises(InvalidTypeError, match="item_id"):
        engine().restore(3)  # type: ignore[arg-type]
    for name, bad, error in (("archive_bytes", -1, InvalidInputError), ("cache_bytes", 1.5, InvalidTypeError),
                             ("archive_bytes", True, InvalidTypeError), ("cache_bytes", -5, InvalidInputError)):
        with pytest.raises(error, match=name):
            engine(**{name: bad})


def test_evicted_originals_come_back_from_the_store(tmp_path) -> None:
    from ctxfold.memory import SqliteStore

    with SqliteStore(tmp_path / "agent.db") as store:
        eng = engine(store=store, archive_bytes=0)  # nothing in memory: every restore reads the store
        msgs = travel()
        removed = _removed(eng, msgs)
        assert removed and len(eng.archive) == 0
        by_id = {r.id: m for r, m in zip(eng.optimize(msgs, budget=300).items, msgs)}
        for item_id in removed:
            assert eng.restore(item_id) == by_id[item_id]
        assert store.caches.memo_get(ARCHIVE_NAMESPACE, removed[0]) == by_id[removed[0]]
        with pytest.raises(InvalidInputError, match="not in the store either"):
            eng.restore("m-unknown")


def test_engines_of_two_users_sharing_a_store_keep_apart(tmp_path) -> None:
    from ctxfold.memory import Scope, SqliteStore

    alice, bob = Scope(user_id="alice"), Scope(user_id="bob")
    with SqliteStore(tmp_path / "agent.db") as store:
        msgs = travel()
        removed = _removed(engine(store=store, scope=alice, archive_bytes=0), msgs)
        assert removed
        later_alice = engine(store=store, scope=alice, archive_bytes=0)  # a new process of the same user
        assert later_alice.restore(removed[0]) == next(m for r, m in zip(engine().optimize(msgs, budget=300).items, msgs)
                                                      if r.id == removed[0])
        for other in (engine(store=store, scope=bob, archive_bytes=0), engine(store=store, archive_bytes=0)):
            with pytest.raises(InvalidInputError, match="not in the store either"):
                other.restore(removed[0])
            assert "Nothing is stored" in other.recall(openai_call(removed[0]))["content"]
        assert store.caches.memo_get(ARCHIVE_NAMESPACE, removed[0], scope=alice) is not None
        assert store.caches.memo_get(ARCHIVE_NAMESPACE, removed[0], scope=bob) is None
        store.clear(alice)  # a user's data goes with their scope
        assert store.caches.memo_get(ARCHIVE_NAMESPACE, removed[0], scope=alice) is None


def test_the_engine_scope_is_checked() -> None:
    from ctxfold.memory import Scope, SqliteStore

    with SqliteStore(":memory:") as store:
        with pytest.raises(InvalidTypeError, match="scope"):
            engine(store=store, scope="alice")
        with pytest.raises(InvalidInputError, match="wide scope|exact"):
            engine(store=store, scope=Scope.any(user_id="alice"))
    with pytest.raises(InvalidInputError, match="scope: given without store="):
        engine(scope=Scope(user_id="alice"))


def test_an_original_the_store_cannot_encode_stays_in_memory(tmp_path) -> None:
    from ctxfold.memory import SqliteStore

    class Opaque:
        pass

    with SqliteStore(tmp_path / "agent.db") as store:
        archive = Archive(caches=store.caches)
        message = {"role": "user", "content": "x", "meta": Opaque()}
        with pytest.warns(UserWarning, match="'odd'.*archived in memory only"):
            archive.put_many([("odd", message), ("fine", {"role": "user", "content": "y"})])
        assert archive.get("odd")["content"] == "x" and store.caches.memo_get(ARCHIVE_NAMESPACE, "odd") is None
        assert store.caches.memo_get(ARCHIVE_NAMESPACE, "fine") == {"role": "user", "content": "y"}


def test_a_store_without_the_memo_api_keeps_the_archive_in_memory() -> None:
    class MinimalCaches:
        def get_summary(self, content_hash, level):
            return None

        def put_summary(self, content_hash, level, summary, tokens=0):
            pass

    class Minimal:
        caches = MinimalCaches()

    with pytest.warns(UserWarning, match="no memo_get/memo_set"):
        eng = engine(store=Minimal())
    assert eng.archive.caches is None
    removed = _removed(eng, travel())
    assert eng.restore(removed[0])


def test_a_store_without_caches_is_refused() -> None:
    class NoCaches:
        def memo_get(self, namespace, key, default=None):
            return default

    with pytest.raises(InvalidTypeError, match=r"store: NoCaches has no caches\. Fix: pass a ctxfold\.memory store"):
        engine(store=NoCaches())


def test_memo_set_many_writes_all_in_one_call(tmp_path) -> None:
    from ctxfold.memory import SqliteStore

    with SqliteStore(tmp_path / "agent.db") as store:
        store.caches.memo_set_many("ns", {"a": {"x": [1, 2]}, "b": "text", ("k", 1): 3})
        assert [store.caches.memo_get("ns", k) for k in ("a", "b", ("k", 1))] == [{"x": [1, 2]}, "text", 3]
        store.caches.memo_set_many("ns", {"a": 1})
        assert store.caches.memo_get("ns", "a") == 1
        with pytest.raises(InvalidTypeError, match="values"):
            store.caches.memo_set_many("ns", {"c": object()})
        assert store.caches.memo_get("ns", "c") is None


PROCESS_1 = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from ctxfold import ContextEngine
    from ctxfold.memory import SqliteStore

    db, conversation, out = sys.argv[1:4]
    messages = json.loads(Path(conversation).read_text(encoding="utf-8"))
    with SqliteStore(db) as store:
        engine = ContextEngine(encoding="cl100k_base", embedder=None, store=store)
        result = engine.optimize(messages, budget=300)
    removed = [r.id for r in result.items if r.status != "kept"]
    notes = [m["content"] for m in result.messages if "recall id" in str(m.get("content"))]
    Path(out).write_text(json.dumps({"removed": removed, "notes": notes}), encoding="utf-8")
""")


def test_recall_across_processes_through_a_sqlite_store(tmp_path) -> None:
    from ctxfold.memory import SqliteStore

    messages = travel()
    messages[1]["content"] = [{"type": "text", "text": "Find flights to Lisbon"}, {"type": "text", "text": "in May"}]
    messages[1]["timestamp"] = "2024-05-01T12:00:00Z"
    messages.insert(2, {"role": "user", "content": "Also: the budget is 500 EUR. " * 200, "id": "budget-note"})
    (tmp_path / "conversation.json").write_text(json.dumps(messages), encoding="utf-8")
    script = tmp_path / "process_1.py"
    script.write_text(PROCESS_1, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "agent.db"), str(tmp_path / "conversation.json"), str(tmp_path / "out.json")],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    assert out["removed"] and out["notes"]

    # process 2: a new engine, nothing in memory, the same database
    with SqliteStore(tmp_path / "agent.db") as store:
        eng = engine(store=store)
        assert len(eng.archive) == 0
        originals = dict(zip([r.id for r in engine().optimize(messages, budget=300).items], messages))
        for item_id in out["removed"]:
            assert eng.restore(item_id) == originals[item_id]
            assert eng.recall(openai_call(item_id))["content"] == original_text(originals[item_id])
        for note in out["notes"]:
            item_id = NOTE.search(note).group(1)
            assert eng.recall(anthropic_call(item_id))["content"] == original_text(originals[item_id])
        assert any(originals[i]["role"] == "tool" for i in out["removed"])
