"""ctxfold.integrations.anthropic: Anthropic messages with content blocks,
tool_use/tool_result pairs, thinking, images and `cache_control` markers,
fitted and validated by the `anthropic` package's own request types
(tests/sdk_checks.py); the example run as a script."""

from __future__ import annotations

import copy
import runpy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("anthropic", reason="needs the anthropic SDK (dev extras)")
pytest.importorskip("openai", reason="needs the openai SDK (dev extras)")

from anthropic.types import MessageParam, TextBlock, TextBlockParam, ToolUseBlock  # noqa: E402
from pydantic import TypeAdapter  # noqa: E402
from sdk_checks import assert_anthropic, type_problems  # noqa: E402

from ctxfold import ContextEngine, EngineConfig, InvalidInputError, InvalidTypeError  # noqa: E402
from ctxfold.adapters import CONTINUATION  # noqa: E402
from ctxfold.integrations.anthropic import _units, fit_messages  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EPHEMERAL = {"type": "ephemeral"}
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def conversation(turns: int = 50, sdk_objects: bool = False) -> list[dict[str, Any]]:
    """`4 * turns + 1` messages: a question (an image every ninth), the
    assistant's text + tool_use (thinking first every fifth), the tool_result,
    the answer; then the current question."""
    messages: list[dict[str, Any]] = []
    for i in range(turns):
        question: Any = f"Look up record {i}: who owns it and since when? It is for audit {i % 6}."
        if i % 9 == 4:
            question = [{"type": "text", "text": question},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}]
        messages.append({"role": "user", "content": question})
        call: list[Any] = [{"type": "text", "text": f"Looking up record {i}."},
                           {"type": "tool_use", "id": f"toolu_{i:03d}", "name": "records", "input": {"id": i}}]
        if sdk_objects and i % 4 == 1:
            # What client.messages.create returns, appended as the assistant turn.
            call = [TextBlock(type="text", text=f"Looking up record {i}."),
                    ToolUseBlock(type="tool_use", id=f"toolu_{i:03d}", name="records", input={"id": i})]
        if i % 5 == 2:
            call.insert(0, {"type": "thinking", "thinking": f"Record {i} is in the archive.", "signature": "c2ln"})
        messages.append({"role": "assistant", "content": call})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"toolu_{i:03d}",
             "content": [{"type": "text", "text": f"record {i}: owner Ann Lee since 20{10 + i % 14}. " + "audit field; " * 70}]},
        ]})
        messages.append({"role": "assistant", "content": f"Record {i} has belonged to Ann Lee since 20{10 + i % 14}."})
    messages.append({"role": "user", "content": "Who owned record 7, and since when?"})
    return messages


def as_dicts(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages with the SDK's block objects as the dicts they stand for
    (sdk_checks reads dicts)."""
    def block(b: Any) -> Any:
        return b if isinstance(b, dict) else b.model_dump(exclude_none=True)

    return [m if isinstance(m["content"], str) else {**m, "content": [block(b) for b in m["content"]]} for m in messages]


def last_text(messages: list[dict[str, Any]]) -> str:
    """The text that ends the request (the current question, which may share
    its user turn with a summary before it)."""
    content = messages[-1]["content"]
    return content if isinstance(content, str) else content[-1]["text"]


def blocks_of(messages: list[dict[str, Any]]) -> list[Any]:
    return [b for m in messages if not isinstance(m["content"], str) for b in m["content"]]


def tokens(system: Any, messages: list[dict[str, Any]], engine: ContextEngine) -> int:
    """The engine's count of a request, as the adapter converts it."""
    text = system if system is None or isinstance(system, str) else "\n\n".join(b["text"] for b in system)
    head = [] if text is None else [{"role": "system", "content": text}]
    return engine.count(head + [u.message for u in _units(messages)])


def test_long_conversation_fits_and_is_a_valid_request() -> None:
    engine = ContextEngine()
    messages = conversation(50, sdk_objects=True)
    original = copy.deepcopy(messages)
    budget = 2000
    system, fitted = fit_messages(messages, system="You audit records.", budget=budget, engine=engine)

    # The SDK takes its own block objects in a request; the structural checks read them as dicts.
    assert not [p for k, m in enumerate(fitted) for p in type_problems(MessageParam, m, f"messages[{k}]", "MessageParam")]
    assert_anthropic(system, as_dicts(fitted))
    assert system == "You audit records."
    assert tokens(None, messages, engine) > 5 * budget
    assert tokens(system, fitted, engine) <= budget
    assert last_text(fitted) == "Who owned record 7, and since when?"
    # The caller's messages are untouched; kept blocks are the caller's own objects.
    assert messages == original
    inputs = blocks_of(messages)
    whole = {m["content"] for m in messages if isinstance(m["content"], str)}
    new = [b for b in blocks_of(fitted) if not any(b is x for x in inputs)]
    for b in new:
        # A string message merged into a turn with others, or the engine's shortened forms and markers.
        assert isinstance(b, dict) and b["type"] in ("text", "tool_result")
        text = b["text"] if b["type"] == "text" else b.get("content", "")
        assert text in whole or text.startswith(("[summary] ", "[... ", "[level-", "[output of")), b
    assert any(isinstance(b, (TextBlock, ToolUseBlock)) for b in blocks_of(fitted)), "SDK blocks are kept as they are"
    # Thinking stays with its tool_use.
    for m in fitted:
        kinds = [b["type"] if isinstance(b, dict) else b.type for b in m["content"]] if isinstance(m["content"], list) else []
        if "thinking" in kinds:
            assert m["role"] == "assistant" and "tool_use" in kinds


@pytest.mark.parametrize("strategy", ["windowed", "compacted", "multi_level"])
def test_every_strategy_gives_a_valid_request(strategy: str) -> None:
    engine = ContextEngine(config=EngineConfig(strategy=strategy))
    system, fitted = fit_messages(conversation(40), system="You audit records.", budget=1500, engine=engine)
    assert_anthropic(system, fitted)
    assert tokens(system, fitted, engine) <= 1500


def marked(messages: list[dict[str, Any]]) -> list[Any]:
    return [b for b in blocks_of(messages) if isinstance(b, dict) and "cache_control" in b]


def test_cache_control_on_a_kept_block_stays() -> None:
    messages = conversation(12)
    last = {"type": "text", "text": "Who owned record 7?", "cache_control": EPHEMERAL}
    messages[-1] = {"role": "user", "content": [last]}
    messages[-2]["content"] = [{"type": "text", "text": messages[-2]["content"], "cache_control": EPHEMERAL}]
    _, fitted = fit_messages(messages, budget=1200)
    assert fitted[-1]["content"][0] is last
    assert any(b is messages[-2]["content"][0] for b in blocks_of(fitted))
    assert len(marked(fitted)) == 2


def test_cache_control_of_a_cleared_tool_result_moves_to_its_replacement() -> None:
    messages = conversation(8)
    # A marker on the first tool result and one nested inside the second's content.
    messages[2]["content"][0]["cache_control"] = EPHEMERAL
    messages[6]["content"][0]["content"][0]["cache_control"] = EPHEMERAL
    _, fitted = fit_messages(messages, budget=1200)
    assert_anthropic(None, fitted)
    results = {b["tool_use_id"]: b for b in blocks_of(fitted) if isinstance(b, dict) and b["type"] == "tool_result"}
    for tid in ("toolu_000", "toolu_001"):
        block = results[tid]
        assert block["content"].startswith("[output of `records` omitted"), "the budget is meant to clear it"
        assert block["cache_control"] == EPHEMERAL


def test_cache_control_of_a_dropped_block_moves_to_the_last_kept_block_before_it() -> None:
    messages = conversation(30)
    target = (61, 0)  # turn 15's "Looking up record 15." text, with its tool_use
    messages[target[0]]["content"][target[1]]["cache_control"] = EPHEMERAL
    engine = ContextEngine(config=EngineConfig(strategy="compacted"))
    _, fitted = fit_messages(messages, budget=1200, engine=engine)
    assert_anthropic(None, fitted)
    present = {id(b) for b in blocks_of(fitted)} | {id(m["content"]) for m in fitted if isinstance(m["content"], str)}
    texts = {b["text"] for b in blocks_of(fitted) if isinstance(b, dict) and b["type"] == "text"}
    assert id(messages[target[0]]["content"][target[1]]) not in present, "the budget is meant to drop it"
    carriers = marked(fitted)
    assert len(carriers) == 1
    # The input blocks before the marked one, newest first; a string content counts as one text block.
    before = []
    for m in messages[: target[0]]:
        if isinstance(m["content"], str):
            before.append(({"type": "text", "text": m["content"]}, id(m["content"]) in present or m["content"] in texts))
        else:
            before += [(b, id(b) in present) for b in m["content"]]
    carrier_of = [b for b, _ in before if carriers[0] == {**b, "cache_control": EPHEMERAL}]
    last_present = next((b for b, kept in reversed(before) if kept or b in carrier_of), None)
    assert last_present is not None and carriers[0] == {**last_present, "cache_control": EPHEMERAL}


def test_cache_control_with_nothing_left_before_it_moves_to_the_system_blocks() -> None:
    messages = conversation(30)
    messages[1]["content"][0]["cache_control"] = EPHEMERAL
    system = [{"type": "text", "text": "You audit records."}, {"type": "text", "text": "Answer in one line."}]
    engine = ContextEngine(config=EngineConfig(strategy="compacted"))
    out_system, fitted = fit_messages(messages, system=system, budget=1000, engine=engine)
    assert not any(b is messages[1]["content"][0] for b in blocks_of(fitted)), "the budget is meant to drop it"
    assert not marked(fitted)
    assert out_system[-1] == {**system[-1], "cache_control": EPHEMERAL}
    assert out_system[0] is system[0] and "cache_control" not in system[-1]
    TypeAdapter(list[TextBlockParam]).validate_python(out_system)
    assert_anthropic(None, fitted)


def test_system_as_blocks_comes_back_as_blocks() -> None:
    system = [{"type": "text", "text": "You audit records.", "cache_control": EPHEMERAL}]
    out_system, fitted = fit_messages(conversation(5), system=system, budget=100_000)
    assert out_system is system
    assert_anthropic(None, fitted)


@pytest.mark.parametrize("budget", [150, 200])
def test_a_conversation_left_starting_with_the_assistant_gets_an_opening_user_turn(budget: int) -> None:
    messages: list[dict[str, Any]] = []
    for i in range(8):
        messages.append({"role": "user", "content": f"Filler {i}: " + "the garden needed water. " * 30})
        messages.append({"role": "assistant", "content": f"The launch code for rocket {i} is {4400 + i}."})
    messages.append({"role": "user", "content": "What was the launch code for rocket 2?"})
    engine = ContextEngine()
    system, fitted = fit_messages(messages, budget=budget, engine=engine)
    assert_anthropic(system, fitted)
    assert fitted[0] == {"role": "user", "content": [{"type": "text", "text": CONTINUATION}]}
    # The opening turn is paid for out of the budget.
    assert tokens(None, fitted, engine) <= budget


def test_under_budget_everything_is_returned_as_is() -> None:
    messages = conversation(4)
    system, fitted = fit_messages(messages, system="s", budget=100_000)
    assert system == "s" and len(fitted) == len(messages)
    for a, b in zip(fitted, messages):
        if isinstance(b["content"], str):
            assert a["content"] is b["content"]
        else:
            assert all(x is y for x, y in zip(a["content"], b["content"]))


def test_types_and_errors() -> None:
    problems = type_problems(list[TextBlockParam], [{"type": "text", "text": "x"}], "system", "system blocks")
    assert not problems
    with pytest.raises(InvalidInputError, match="system="):
        fit_messages([{"role": "system", "content": "x"}], budget=100)
    with pytest.raises(InvalidTypeError, match="content"):
        fit_messages([{"role": "user", "content": 3}], budget=100)
    with pytest.raises(InvalidInputError, match="text blocks"):
        fit_messages([{"role": "user", "content": "x"}], system=[{"type": "image"}], budget=100)
    with pytest.raises(InvalidInputError, match="tool_use_id"):
        fit_messages([{"role": "user", "content": [{"type": "tool_result"}]}], budget=100)


def test_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLES / "anthropic_messages.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "cache breakpoints" in out and "request:" in out


@st.composite
def anthropic_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Random tool-using conversations: text turns (a string or blocks,
    some with cache_control), tool_use turns with one or two calls and their
    results, of random sizes; a short current question last."""
    messages: list[dict[str, Any]] = []
    n = draw(st.integers(1, 25))
    for i in range(n):
        words = " ".join(f"fact{i}_{k}" for k in range(draw(st.integers(1, 120))))
        if draw(st.booleans()):
            content: Any = f"Question {i}: {words}"
            if draw(st.booleans()):
                content = [{"type": "text", "text": content}]
                if draw(st.integers(0, 4)) == 0:
                    content[0]["cache_control"] = EPHEMERAL
            messages.append({"role": "user", "content": content})
            messages.append({"role": "assistant", "content": f"Answer {i}: {words[:200]}"})
        else:
            if not messages:
                messages.append({"role": "user", "content": "Start."})
            calls = [{"type": "tool_use", "id": f"toolu_{i}_{c}", "name": "lookup", "input": {"q": i}}
                     for c in range(draw(st.integers(1, 2)))]
            messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Looking up {i}."}, *calls]})
            results: list[Any] = [{"type": "tool_result", "tool_use_id": c["id"], "content": f"result {i}: {words}"}
                                  for c in calls]
            if draw(st.integers(0, 4)) == 0:
                results[-1]["cache_control"] = EPHEMERAL
            messages.append({"role": "user", "content": results})
            messages.append({"role": "assistant", "content": f"Found {i}."})
    messages.append({"role": "user", "content": "What did we find first?"})
    return messages


_ENGINE = ContextEngine()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(anthropic_conversations(), st.integers(120, 3000))
def test_random_conversations_fit_and_stay_valid(messages: list[dict[str, Any]], budget: int) -> None:
    system, fitted = fit_messages(messages, system="You look things up.", budget=budget, engine=_ENGINE)
    assert_anthropic(system, fitted)
    assert tokens(system, fitted, _ENGINE) <= budget
    assert last_text(fitted) == "What did we find first?"
    assert len(marked(fitted)) <= len(marked(messages))
