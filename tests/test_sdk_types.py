"""Messages in and out are valid requests for the real OpenAI and Anthropic
SDK types (tests/sdk_checks.py): `to_anthropic` edge cases, the checkers
themselves catching each broken rule, and hypothesis-generated agent
conversations through `to_anthropic` and through `ContextEngine.optimize`."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ctxfold
from ctxfold import BudgetError, ContextEngine, EngineConfig, InvalidInputError, InvalidTypeError, to_anthropic
from ctxfold.adapters import CONTINUATION

pytest.importorskip("openai", reason="needs the openai SDK (dev extras)")
pytest.importorskip("anthropic", reason="needs the anthropic SDK (dev extras)")

# after the skips: sdk_checks imports both SDKs
from sdk_checks import (  # noqa: E402
    CTXFOLD_METADATA_KEYS,
    anthropic_problems,
    assert_anthropic,
    assert_openai,
    openai_problems,
)


def call(cid: str, name: str = "search", arguments: str = '{"q": "x"}') -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}


def text(t: str) -> dict:
    return {"type": "text", "text": t}


def use(tid: str, name: str = "search", input: dict | None = None) -> dict:
    return {"type": "tool_use", "id": tid, "name": name, "input": {"q": "x"} if input is None else input}


def result(tid: str, content: str | None = "ok") -> dict:
    block = {"type": "tool_result", "tool_use_id": tid}
    if content is not None:
        block["content"] = content
    return block


# --- to_anthropic: table of edge cases --------------------------------------------

CASES = {
    "leading system and developer messages become the system prompt": (
        [{"role": "system", "content": "Be brief."}, {"role": "developer", "content": "Use metric units."},
         {"role": "user", "content": "hi"}],
        "Be brief.\n\nUse metric units.",
        [{"role": "user", "content": [text("hi")]}],
    ),
    "no system message gives None; a blank one too": (
        [{"role": "system", "content": "  "}, {"role": "user", "content": "hi"}],
        None,
        [{"role": "user", "content": [text("hi")]}],
    ),
    "a mid-conversation summary stays in place as user text": (
        [{"role": "system", "content": "S"}, {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
         {"role": "system", "content": "[level-1 summary of 20 messages, m0..m19] they talked"},
         {"role": "user", "content": "c"}],
        "S",
        [{"role": "user", "content": [text("a")]}, {"role": "assistant", "content": [text("b")]},
         {"role": "user", "content": [text("[level-1 summary of 20 messages, m0..m19] they talked"), text("c")]}],
    ),
    "a gap marker after the system prompt opens the conversation": (
        [{"role": "system", "content": "S"}, {"role": "user", "content": "q"},
         {"role": "system", "content": "[... 3 messages omitted ...]"}, {"role": "assistant", "content": "a"}],
        "S",
        [{"role": "user", "content": [text("q"), text("[... 3 messages omitted ...]")]},
         {"role": "assistant", "content": [text("a")]}],
    ),
    "the engine's markers right after the system prompt stay in the conversation": (
        [{"role": "system", "content": "S"}, {"role": "system", "content": "[... 12 messages omitted ...]"},
         {"role": "system", "content": "[level-2 summary of 20 messages, m12..m31] they fixed the build"},
         {"role": "assistant", "content": "a"}, {"role": "user", "content": "q"}],
        "S",
        [{"role": "user", "content": [text("[... 12 messages omitted ...]"),
                                      text("[level-2 summary of 20 messages, m12..m31] they fixed the build")]},
         {"role": "assistant", "content": [text("a")]}, {"role": "user", "content": [text("q")]}],
    ),
    "consecutive same-side messages merge": (
        [{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
         {"role": "assistant", "content": "c"}, {"role": "assistant", "content": "d"}],
        None,
        [{"role": "user", "content": [text("a"), text("b")]}, {"role": "assistant", "content": [text("c"), text("d")]}],
    ),
    "starting with the assistant: a neutral user turn opens": (
        [{"role": "system", "content": "S"}, {"role": "assistant", "content": "earlier answer"},
         {"role": "user", "content": "next"}],
        "S",
        [{"role": "user", "content": [text(CONTINUATION)]}, {"role": "assistant", "content": [text("earlier answer")]},
         {"role": "user", "content": [text("next")]}],
    ),
    "None content with tool calls gives tool_use blocks only; results follow in a user turn": (
        [{"role": "user", "content": "go"},
         {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2", "fetch", '{"url": "u"}')]},
         {"role": "tool", "tool_call_id": "c1", "content": "r1"}, {"role": "tool", "tool_call_id": "c2", "content": "r2"}],
        None,
        [{"role": "user", "content": [text("go")]},
         {"role": "assistant", "content": [use("c1"), use("c2", "fetch", {"url": "u"})]},
         {"role": "user", "content": [result("c1", "r1"), result("c2", "r2")]}],
    ),
    "assistant text comes before its tool_use blocks": (
        [{"role": "user", "content": "go"},
         {"role": "assistant", "content": "Looking.", "tool_calls": [call("c1")]},
         {"role": "tool", "tool_call_id": "c1", "content": "r"}, {"role": "user", "content": "thanks"}],
        None,
        [{"role": "user", "content": [text("go")]}, {"role": "assistant", "content": [text("Looking."), use("c1")]},
         {"role": "user", "content": [result("c1", "r"), text("thanks")]}],
    ),
    "tool results go before text, even a marker between call and result": (
        [{"role": "user", "content": "go"}, {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]},
         {"role": "tool", "tool_call_id": "c1", "content": "r1"},
         {"role": "system", "content": "[... 2 messages omitted ...]"},
         {"role": "tool", "tool_call_id": "c2", "content": "r2"}],
        None,
        [{"role": "user", "content": [text("go")]}, {"role": "assistant", "content": [use("c1"), use("c2")]},
         {"role": "user", "content": [result("c1", "r1"), result("c2", "r2"), text("[... 2 messages omitted ...]")]}],
    ),
    "empty and blank texts make no block; an empty tool result leaves content out": (
        [{"role": "user", "content": "go"}, {"role": "assistant", "content": "", "tool_calls": [call("c1")]},
         {"role": "tool", "tool_call_id": "c1", "content": ""}, {"role": "user", "content": " \n"},
         {"role": "assistant", "content": [text("fine"), text("")]}],
        None,
        [{"role": "user", "content": [text("go")]}, {"role": "assistant", "content": [use("c1")]},
         {"role": "user", "content": [result("c1", None)]}, {"role": "assistant", "content": [text("fine")]}],
    ),
    "an assistant message with nothing in it adds nothing; the user turns around it merge": (
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": None},
         {"role": "assistant", "content": "   "}, {"role": "user", "content": "b"}],
        None,
        [{"role": "user", "content": [text("a"), text("b")]}],
    ),
    "arguments that are not a JSON object are wrapped; none give {}": (
        [{"role": "user", "content": "go"},
         {"role": "assistant", "content": None, "tool_calls": [
             call("c1", arguments="[1, 2]"), call("c2", arguments="{oops"), call("c3", arguments="7"),
             call("c4", arguments=""), {"id": "c5", "type": "function", "function": {"name": "search"}}]},
         *({"role": "tool", "tool_call_id": f"c{k}", "content": "r"} for k in range(1, 6))],
        None,
        [{"role": "user", "content": [text("go")]},
         {"role": "assistant", "content": [use("c1", input={"arguments": "[1, 2]"}), use("c2", input={"arguments": "{oops"}),
                                          use("c3", input={"arguments": "7"}), use("c4", input={}), use("c5", input={})]},
         {"role": "user", "content": [result(f"c{k}", "r") for k in range(1, 6)]}],
    ),
    "metadata and OpenAI-only keys never come out": (
        [{"role": "system", "content": "S", "id": "sys", "pinned": True},
         {"role": "user", "content": "q", "name": "ann", "id": "u1", "timestamp": "2024-05-01T12:00:00Z",
          "importance": 0.9, "kind": "question", "_source": {"x": 1}},
         {"role": "assistant", "content": None, "tool_calls": [call("c1")], "id": "a1", "pinned": False},
         {"role": "tool", "tool_call_id": "c1", "content": "r", "name": "search", "id": "t1"}],
        "S",
        [{"role": "user", "content": [text("q")]}, {"role": "assistant", "content": [use("c1")]},
         {"role": "user", "content": [result("c1", "r")]}],
    ),
    "call ids outside Anthropic's alphabet are rewritten, results follow; a reused id gets a suffix": (
        [{"role": "user", "content": "go"}, {"role": "assistant", "content": None, "tool_calls": [call("fn:1.a")]},
         {"role": "tool", "tool_call_id": "fn:1.a", "content": "r1"},
         {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
         {"role": "tool", "tool_call_id": "c1", "content": "r2"},
         {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
         {"role": "tool", "tool_call_id": "c1", "content": "r3"}],
        None,
        [{"role": "user", "content": [text("go")]}, {"role": "assistant", "content": [use("fn_1_a")]},
         {"role": "user", "content": [result("fn_1_a", "r1")]}, {"role": "assistant", "content": [use("c1")]},
         {"role": "user", "content": [result("c1", "r2")]}, {"role": "assistant", "content": [use("c1_2")]},
         {"role": "user", "content": [result("c1_2", "r3")]}],
    ),
    "a final assistant turn loses trailing whitespace only": (
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "  The answer.\n\n"}],
        None,
        [{"role": "user", "content": [text("q")]}, {"role": "assistant", "content": [text("  The answer.")]}],
    ),
    "content parts: text and refusal become text, user images become image blocks": (
        [{"role": "user", "content": [{"type": "text", "text": "look"},
                                      {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                                      {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]},
         {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}]}],
        None,
        [{"role": "user", "content": [text("look"), {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}},
                                      {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]},
         {"role": "assistant", "content": [text("I can't.")]}],
    ),
    "tool content as text parts is joined": (
        [{"role": "user", "content": "go"}, {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
         {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "line 1"}, {"type": "text", "text": "line 2"}]}],
        None,
        [{"role": "user", "content": [text("go")]}, {"role": "assistant", "content": [use("c1")]},
         {"role": "user", "content": [result("c1", "line 1\nline 2")]}],
    ),
    "only system messages: no conversation": (
        [{"role": "system", "content": "S"}],
        "S",
        [],
    ),
}


@pytest.mark.parametrize(("messages", "system", "expected"), list(CASES.values()), ids=list(CASES))
def test_to_anthropic_cases(messages, system, expected) -> None:
    before = json.dumps(messages, sort_keys=True)
    got_system, got = to_anthropic(messages)
    assert (got_system, got) == (system, expected)
    assert_anthropic(got_system, got, allow_empty=not expected)
    assert json.dumps(messages, sort_keys=True) == before, "to_anthropic must not change its input"


ERRORS = {
    "orphan tool result": (
        [{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "c9", "content": "r"}],
        InvalidInputError, ["messages[1]", "'c9'"],
    ),
    "a result answering a call twice": (
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
         {"role": "tool", "tool_call_id": "c1", "content": "r"}, {"role": "tool", "tool_call_id": "c1", "content": "r"}],
        InvalidInputError, ["messages[3]", "'c1'"],
    ),
    "a result after the next assistant message": (
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
         {"role": "user", "content": "?"}, {"role": "assistant", "content": "hm"},
         {"role": "tool", "tool_call_id": "c1", "content": "r"}],
        InvalidInputError, ["messages[1]", "'c1'", "tool_call_id"],
    ),
    "an unanswered call at the end": (
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]},
         {"role": "tool", "tool_call_id": "c1", "content": "r"}],
        InvalidInputError, ["messages[1]", "'c2'"],
    ),
    "one id twice in one message": (
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c1")]}],
        InvalidInputError, ["messages[1]['tool_calls'][1]", "'c1'"],
    ),
    "unknown role": ([{"role": "function", "name": "f", "content": "x"}], InvalidInputError, ["messages[0]", "'function'"]),
    "audio part": (
        [{"role": "user", "content": [{"type": "input_audio", "input_audio": {"data": "AA==", "format": "wav"}}]}],
        InvalidInputError, ["messages[0]['content'][0]", "input_audio"],
    ),
    "unsupported image type": (
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/bmp;base64,AA=="}}]}],
        InvalidInputError, ["messages[0]['content'][0]", "image/bmp"],
    ),
    "a call without an id": (
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": None,
                                            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]}],
        InvalidInputError, ["messages[1]['tool_calls'][0]", "'id'"],
    ),
    "not a list": ("hello", InvalidTypeError, ["messages"]),
    "not a dict": (["hello"], InvalidTypeError, ["messages[0]"]),
    "content of the wrong type": ([{"role": "user", "content": 5}], InvalidTypeError, ["messages[0]['content']"]),
}


@pytest.mark.parametrize(("messages", "error", "words"), list(ERRORS.values()), ids=list(ERRORS))
def test_to_anthropic_errors_name_the_message(messages, error, words) -> None:
    with pytest.raises(error) as info:
        to_anthropic(messages)
    for word in words:
        assert word in str(info.value)


def test_round_trip_through_from_anthropic() -> None:
    native = [
        {"role": "user", "content": [text("weather?")]},
        {"role": "assistant", "content": [text("Checking."), use("toolu_1", "weather", {"city": "Oslo"})]},
        {"role": "user", "content": [result("toolu_1", "5 C"), text("and tomorrow?")]},
    ]
    assert to_anthropic(ctxfold.from_anthropic(native)) == (None, native)


# --- the checkers catch what they are for ------------------------------------------

GOOD = [{"role": "user", "content": [text("go")]}, {"role": "assistant", "content": [use("c1")]},
        {"role": "user", "content": [result("c1"), text("and?")]}]

BROKEN_ANTHROPIC = {
    "system not a str": (["S"], GOOD, "system: expected str"),
    "blank system": ("  ", GOOD, "blank system"),
    "starts with assistant": (None, GOOD[1:], "first message must be the user's"),
    "no alternation": (None, [GOOD[0], GOOD[0]], "two user messages in a row"),
    "system role in the conversation": (None, [{"role": "system", "content": "x"}], "user and assistant turns only"),
    "result not after its call": (None, [GOOD[0], GOOD[1], {"role": "user", "content": [text("x")]},
                                         {"role": "assistant", "content": [text("y")]}, GOOD[2]],
                                  "have no tool_result here"),
    "result answering nothing": (None, [GOOD[0], {"role": "assistant", "content": [text("y")]}, GOOD[2]],
                                 "answers no tool_use"),
    "result answering twice": (None, [GOOD[0], GOOD[1], {"role": "user", "content": [result("c1"), result("c1")]}],
                               "answers no tool_use"),
    "unanswered at the end": (None, GOOD[:2], "never answered"),
    "result after text": (None, [GOOD[0], GOOD[1], {"role": "user", "content": [text("and?"), result("c1")]}],
                          "tool results go first"),
    "empty text block": (None, [{"role": "user", "content": [text("")]}], "empty or whitespace-only text block"),
    "blank text block": (None, [{"role": "user", "content": [text("go"), text(" \n")]}], "whitespace-only text block"),
    "empty content list": (None, [{"role": "user", "content": []}], "empty content list"),
    "empty content string": (None, [{"role": "user", "content": ""}], "empty or whitespace-only content"),
    "empty tool result content": (None, [GOOD[0], GOOD[1], {"role": "user", "content": [result("c1", "")]}],
                                  "empty tool_result content"),
    "metadata key on a message": (None, [{"role": "user", "content": "q", "pinned": True}], "unknown key 'pinned'"),
    "private key on a block": (None, [{"role": "user", "content": [{**text("q"), "_source": 1}]}], "unknown key '_source'"),
    "input not a dict": (None, [GOOD[0], {"role": "assistant", "content": [use("c1", input=[1])]}, GOOD[2]],
                         "input must be a dict"),
    "bad tool_use id": (None, [GOOD[0], {"role": "assistant", "content": [use("c.1")]},
                               {"role": "user", "content": [result("c.1")]}], "does not match"),
    "duplicate tool_use id": (None, [*GOOD, {"role": "assistant", "content": [use("c1")]},
                                     {"role": "user", "content": [result("c1")]}], "used twice"),
    "tool_use from the user": (None, [{"role": "user", "content": [use("c1")]}], "tool_use in a user message"),
    "not a MessageParam": (None, [{"role": "user"}], "not a valid MessageParam"),
    "block of an unknown type": (None, [{"role": "user", "content": [{"type": "bogus"}]}], "not a valid MessageParam"),
    "trailing whitespace at the end": (None, [GOOD[0], {"role": "assistant", "content": [text("hi ")]}],
                                       "cannot end in whitespace"),
    "no messages": (None, [], "at least one message"),
}


@pytest.mark.parametrize(("system", "messages", "words"), list(BROKEN_ANTHROPIC.values()), ids=list(BROKEN_ANTHROPIC))
def test_anthropic_checker_catches(system, messages, words) -> None:
    problems = anthropic_problems(system, messages)
    assert any(words in p for p in problems), problems


def test_anthropic_checker_passes_a_valid_request() -> None:
    assert anthropic_problems("S", GOOD) == []
    assert anthropic_problems(None, [{"role": "user", "content": "plain string content"}]) == []


OPENAI_GOOD = [{"role": "system", "content": "S"}, {"role": "user", "content": "go"},
               {"role": "assistant", "content": None, "tool_calls": [call("c1"), call("c2")]},
               {"role": "tool", "tool_call_id": "c2", "content": "r"}, {"role": "tool", "tool_call_id": "c1", "content": "r"},
               {"role": "assistant", "content": "done"}]

BROKEN_OPENAI = {
    "metadata key": ([{"role": "user", "content": "q", "importance": 0.5}], "unknown key 'importance'"),
    "name on a tool message": ([*OPENAI_GOOD[1:3], {**OPENAI_GOOD[3], "name": "s"}, OPENAI_GOOD[4]], "unknown key 'name'"),
    "extra key in a call": ([OPENAI_GOOD[1], {"role": "assistant", "content": None, "tool_calls": [{**call("c1"), "x": 1}]},
                             OPENAI_GOOD[4]], "unknown key 'x'"),
    "unknown role": ([{"role": "robot", "content": "x"}], "matches no request type"),
    "content not str": ([{"role": "user", "content": 5}], "not a valid ChatCompletionMessageParam"),
    "bad part in a list": ([{"role": "user", "content": [{"type": "text"}]}], "not a valid ChatCompletionMessageParam"),
    "assistant with nothing": ([{"role": "assistant", "content": None}], "needs content or tool_calls"),
    "empty tool_calls": ([{"role": "assistant", "content": "x", "tool_calls": []}], "non-empty list"),
    "orphan tool message": ([OPENAI_GOOD[1], OPENAI_GOOD[3]], "answers no open call"),
    "message between call and result": ([*OPENAI_GOOD[1:3], OPENAI_GOOD[0], *OPENAI_GOOD[3:5]], "not answered"),
    "never answered": (OPENAI_GOOD[1:4], "never answered"),
    "id used twice": ([*OPENAI_GOOD[1:5], {"role": "assistant", "content": None, "tool_calls": [call("c1")]},
                       OPENAI_GOOD[4]], "used twice"),
}


@pytest.mark.parametrize(("messages", "words"), list(BROKEN_OPENAI.values()), ids=list(BROKEN_OPENAI))
def test_openai_checker_catches(messages, words) -> None:
    problems = openai_problems(messages)
    assert any(words in p for p in problems), problems


def test_openai_checker_passes_a_valid_request_and_allowed_metadata() -> None:
    assert openai_problems(OPENAI_GOOD) == []
    tagged = [{**m, "id": f"m{i}", "pinned": False} for i, m in enumerate(OPENAI_GOOD)]
    assert openai_problems(tagged, allow_keys=CTXFOLD_METADATA_KEYS) == []
    assert openai_problems(tagged) != []


# --- generated agent conversations ------------------------------------------------

WORDS = ("alpha beta gamma delta oslo berlin invoice deploy friday error python rex laptop 42 2023 "
         "the a of and to meeting budget report").split()
SUMMARY_TEXTS = ("[level-1 summary of 20 messages, m0..m19] the user asked about invoices",
                 "[level-2 summary of 40 messages, m0..m39] deploys and errors",
                 "[... 3 messages omitted ...]", "[summary] earlier the build failed")
CALL_IDS = ("call_{}", "toolu_{}", "fn:{}.x", "c{}")
ARGUMENTS = ('{"q": "oslo"}', '{"path": "/tmp/x", "n": 3}', "{}", "", "[1, 2]", "not json", '"s"')


@st.composite
def texts(draw, allow_blank: bool = True) -> str:
    kind = draw(st.sampled_from(["short", "short", "long", "blank"] if allow_blank else ["short", "short", "long"]))
    if kind == "blank":
        return draw(st.sampled_from(["", " ", "\n"]))
    # sentences, so the extractive summarizer has something to pick from
    sentence = st.lists(st.sampled_from(WORDS), min_size=3, max_size=14).map(lambda w: " ".join(w).capitalize() + ".")
    return " ".join(draw(st.lists(sentence, min_size=1, max_size=3 if kind == "short" else 40)))


@st.composite
def contents(draw, allow_blank: bool = True):
    t = draw(texts(allow_blank))
    if draw(st.integers(0, 4)) == 0:
        return [{"type": "text", "text": t}, {"type": "text", "text": draw(texts(allow_blank))}]
    return t


@st.composite
def conversations(draw) -> list[dict]:
    """OpenAI-style agent conversations: an optional system prompt, then
    user/assistant turns, tool rounds (1-3 parallel calls, then their
    results in any order), mid-conversation summaries and gap markers;
    some messages carry ctxfold metadata."""
    msgs: list[dict] = []
    if draw(st.booleans()):
        msgs.append({"role": draw(st.sampled_from(["system", "developer"])), "content": draw(contents(allow_blank=False))})
    calls = 0
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(st.sampled_from(["user", "user", "assistant", "assistant", "tools", "tools", "marker"]))
        if kind == "user":
            msgs.append({"role": "user", "content": draw(contents())})
        elif kind == "assistant":
            msgs.append({"role": "assistant", "content": draw(contents())})
        elif kind == "marker":
            msgs.append({"role": "system", "content": draw(st.sampled_from(SUMMARY_TEXTS))})
        else:
            ids = []
            for _ in range(draw(st.integers(1, 3))):
                calls += 1
                ids.append(draw(st.sampled_from(CALL_IDS)).format(calls))
            content = draw(st.one_of(st.none(), st.none(), texts()))
            msgs.append({"role": "assistant", "content": content, "tool_calls": [
                call(cid, draw(st.sampled_from(["search", "read_file", "run"])), draw(st.sampled_from(ARGUMENTS)))
                for cid in ids]})
            for cid in draw(st.permutations(ids)):
                msgs.append({"role": "tool", "tool_call_id": cid, "content": draw(contents())})
    for i, m in enumerate(msgs):
        if draw(st.integers(0, 3)) == 0:
            m["id"] = f"msg{i}"
            m["importance"] = draw(st.floats(0, 1))
            m["timestamp"] = f"2024-05-{1 + i % 28:02d}T12:00:00Z"
            m["pinned"] = draw(st.integers(0, 3)) == 0
    return msgs


def says_something(messages) -> bool:
    """Whether `messages` hold anything for the conversation (not the system
    prompt): a tool call, or a non-blank text outside the leading system
    messages (the engine's markers count as conversation wherever they are)."""
    head = next((i for i, m in enumerate(messages) if m["role"] not in ("system", "developer")), len(messages))
    for i, m in enumerate(messages):
        content = m.get("content")
        parts = [content] if isinstance(content, str) else [p["text"] for p in content or ()]
        text = "".join(parts).strip()
        if m.get("tool_calls") or (text and (i >= head or text.startswith(("[level-", "[... ")))):
            return True
    return False


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations())
def test_generated_conversations_are_valid_both_ways(msgs) -> None:
    assert_openai(msgs, allow_keys=CTXFOLD_METADATA_KEYS)
    system, converted = to_anthropic(msgs)
    assert_anthropic(system, converted, allow_empty=not says_something(msgs))
    # The system prompt is the leading system messages up to the first engine marker, nothing later.
    prompt = []
    for m in msgs:
        if m["role"] not in ("system", "developer") or m["content"] in SUMMARY_TEXTS[:3]:
            break
        parts = [m["content"]] if isinstance(m["content"], str) else [p["text"] for p in m["content"]]
        prompt.append("\n".join(p for p in parts if p.strip()))
    assert system == ("\n\n".join(p for p in prompt if p.strip()) or None)
    # Every call and every non-blank text survives the conversion.
    uses = [b for m in converted for b in m["content"] if b["type"] == "tool_use"]
    assert len(uses) == sum(len(m.get("tool_calls") or ()) for m in msgs)
    joined = json.dumps([system, converted])
    for m in msgs:
        if isinstance(m["content"], str) and m["content"].strip():
            assert json.dumps(m["content"].rstrip())[1:-1] in joined


def floor_budget(engine: ContextEngine, msgs: list[dict]) -> int:
    """A budget the messages the engine never cuts fit in (the leading
    system prompt, pinned messages, the last message), with room to spare."""
    head = next((i for i, m in enumerate(msgs) if m["role"] not in ("system", "developer")), len(msgs))
    kept = [m for i, m in enumerate(msgs) if i < head or m.get("pinned") or i == len(msgs) - 1]
    # count_messages, not engine.count: a lone tool result is no valid conversation
    return ctxfold.count_messages(kept, tokenizer=engine.tokenizer) + 60


ENGINES = {s: ContextEngine(config=EngineConfig(strategy=s)) for s in ("optimal", "windowed", "compacted", "multi_level", "auto")}


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), st.sampled_from(sorted(ENGINES)), st.floats(0.05, 1.2))
def test_engine_output_is_valid_for_both_sdks(msgs, strategy, share) -> None:
    engine = ENGINES[strategy]
    budget = max(floor_budget(engine, msgs), int(ctxfold.count_messages(msgs, tokenizer=engine.tokenizer) * share))
    try:
        res = engine.optimize(msgs, budget=budget)
    except BudgetError:
        return
    assert_openai(res.messages)
    system, converted = to_anthropic(res.messages)
    assert_anthropic(system, converted, allow_empty=not says_something(res.messages))


def agent_history() -> list[dict]:
    msgs = [{"role": "system", "content": "You are a careful assistant."}]
    for i in range(30):
        msgs.append({"role": "user", "content": f"Question {i} about the invoice for Oslo. " * 6, "id": f"u{i}"})
        if i % 3 == 0:
            msgs.append({"role": "assistant", "content": None, "id": f"a{i}", "tool_calls": [
                call(f"call_{i}_a", arguments=json.dumps({"q": f"invoice {i}"})), call(f"call_{i}_b", "read_file")]})
            msgs.append({"role": "tool", "tool_call_id": f"call_{i}_b", "content": f"File {i}: total {i * 7} EUR. " * 10})
            msgs.append({"role": "tool", "tool_call_id": f"call_{i}_a", "content": f"Found invoice {i}. " * 10})
        msgs.append({"role": "assistant", "content": f"Answer {i}: the invoice totals {i * 7} EUR. " * 6, "id": f"r{i}"})
    msgs.append({"role": "user", "content": "What was the total of invoice 9?", "id": "q"})
    return msgs


@pytest.mark.parametrize(("strategy", "budget"), [("compacted", 900), ("multi_level", 2500), ("windowed", 1200)])
def test_engine_markers_stay_in_the_conversation(strategy, budget) -> None:
    res = ContextEngine(config=EngineConfig(strategy=strategy)).optimize(agent_history(), budget=budget)
    assert_openai(res.messages)
    system, converted = to_anthropic(res.messages)
    assert_anthropic(system, converted)
    assert system == "You are a careful assistant."
    # one system prompt, so every later system message is the engine's
    markers = [m["content"] for m in res.messages[1:] if m["role"] == "system"]
    user_texts = [b["text"] for m in converted if m["role"] == "user" for b in m["content"] if b["type"] == "text"]
    assert all(marker in user_texts for marker in markers)
    assert all(marker not in system for marker in markers)


def test_engine_emits_mid_conversation_markers() -> None:
    """The case above is not vacuous: the engine does put summaries and gap
    markers in the middle of the conversation for this history."""
    found = []
    for strategy, budget in (("compacted", 900), ("multi_level", 2500)):
        res = ContextEngine(config=EngineConfig(strategy=strategy)).optimize(agent_history(), budget=budget)
        found += [m["content"] for m in res.messages[1:] if m["role"] == "system"]
    assert any(t.startswith("[... ") for t in found) and any(t.startswith("[level-") for t in found), found
