"""ctxfold.integrations.langchain against the real LangChain: `FitContext` in
a `create_agent` agent with a fake chat model, `fit_messages` on message
lists and in an LCEL chain, the examples run as scripts."""

from __future__ import annotations

import asyncio
import runpy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("langchain.agents", reason="needs langchain (the integrations extra)")
pytest.importorskip("openai", reason="needs the openai SDK (dev extras)")
pytest.importorskip("anthropic", reason="needs the anthropic SDK (dev extras)")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from scripted_chat_model import ScriptedChatModel  # noqa: E402
from sdk_checks import assert_openai  # noqa: E402

import ctxfold  # noqa: E402
from ctxfold import ContextEngine, EngineConfig, InvalidInputError, InvalidTypeError  # noqa: E402
from ctxfold.integrations import IntegrationImportError  # noqa: E402
from ctxfold.integrations._common import require  # noqa: E402
from ctxfold.integrations.langchain import FitContext, fit_messages, to_openai_dicts  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@tool
def weather(city: str) -> str:
    """Forecast for a city."""
    return f"{city}: sunny, 21 C"


def oslo_model() -> ScriptedChatModel:
    """A model that calls the weather tool for Oslo, then answers."""
    return ScriptedChatModel(messages=iter([
        AIMessage("", tool_calls=[{"id": "call_oslo", "name": "weather", "args": {"city": "Oslo"}}]),
        AIMessage("Oslo: sunny."),
    ]))


def long_history(turns: int = 50) -> list[Any]:
    """`4 * turns` messages: question, tool call, tool result, answer; every
    tenth question carries an image block, every seventh turn two parallel calls."""
    out: list[Any] = []
    for i in range(turns):
        text = f"Question {i}: what is the weather in city {i}? We travel there on day {i % 9}."
        if i % 10 == 3:
            out.append(HumanMessage(content=[{"type": "text", "text": text},
                                             {"type": "image", "url": f"https://example.com/map-{i}.png"}]))
        else:
            out.append(HumanMessage(text))
        calls = [{"id": f"call_{i}", "name": "weather", "args": {"city": f"city {i}"}}]
        if i % 7 == 0:
            calls.append({"id": f"call_{i}b", "name": "weather", "args": {"city": f"suburb {i}"}})
        out.append(AIMessage("", tool_calls=calls))
        for c in calls:
            out.append(ToolMessage(f"{c['args']['city']}: sunny, {i % 25} C. " + "Hourly: clear, wind 3 m/s. " * 14,
                                   tool_call_id=c["id"], name="weather"))
        out.append(AIMessage(f"City {i} will be sunny at {i % 25} degrees."))
    return out


def openai_view(messages: list[Any]) -> list[dict[str, Any]]:
    """What an OpenAI chat model is sent for `messages` (LangChain's own
    converter), minus the `name` it adds to tool messages, which the OpenAI
    request type does not declare."""
    dicts = convert_to_openai_messages(messages)
    for d in dicts:
        if d["role"] == "tool":
            d.pop("name", None)
    return dicts


def check_fitted(view: list[Any], budget: int, originals: list[Any]) -> None:
    """`view` fits, is a valid request, and every message not marked as
    changed by ctxfold is one of `originals`, the same object."""
    dicts = openai_view(view)
    assert_openai(dicts)
    assert ctxfold.count_messages(dicts) <= budget
    ids = {id(m) for m in originals}
    for m in view:
        if "ctxfold" not in m.response_metadata:
            assert id(m) in ids, f"a message that is not the caller's object and not marked: {m!r}"


def test_create_agent_model_sees_fitted_history_state_keeps_everything() -> None:
    budget = 2000
    past = long_history(50)
    assert len(past) >= 200
    question = HumanMessage("And what about Oslo tomorrow?")
    model = oslo_model()
    fit = FitContext(budget=budget)
    system = "You are a weather assistant."
    agent = create_agent(model, [weather], system_prompt=system, middleware=[fit])

    state = agent.invoke({"messages": [*past, question]})

    assert ctxfold.count_messages(openai_view(past)) > 5 * budget
    assert len(model.prompts) == 2
    for prompt in model.prompts:
        assert isinstance(prompt[0], SystemMessage) and prompt[0].content == system
        assert any(m is question for m in prompt), "the current question must reach the model"
        check_fitted(prompt, budget, [*past, question, prompt[0], *state["messages"]])
    # The second call sees this turn's tool call and result, verbatim.
    assert [m.type for m in model.prompts[1][-3:]] == ["human", "ai", "tool"]
    # The state holds every message, the caller's objects first, in order.
    assert len(state["messages"]) == len(past) + 4
    assert [m.id for m in state["messages"][: len(past)]] == [m.id for m in past]
    assert fit.last_result.report.tokens_out <= budget
    assert fit.last_result.report.counts["dropped"] > 0


def test_create_agent_async() -> None:
    budget = 1500
    past = long_history(30)
    model = ScriptedChatModel(messages=iter(["It will be sunny."]))
    agent = create_agent(model, [weather], middleware=[FitContext(budget=budget)])
    state = asyncio.run(agent.ainvoke({"messages": [*past, HumanMessage("Summer plans?")]}))
    assert len(state["messages"]) == len(past) + 2
    check_fitted(model.prompts[0], budget, [*past, *state["messages"]])


def prose_history(turns: int = 30) -> list[Any]:
    """Long user questions and answers: what the engine summarises."""
    out: list[Any] = []
    for i in range(turns):
        out.append(HumanMessage(f"Tell me about town {i}. " + "I want details on its founding, trade and people. " * 6))
        out.append(AIMessage(f"Town {i} was founded in {1500 + i}. " + " ".join(
            f"In {1600 + i + k} it built a {w} by the river." for k, w in enumerate(["mill", "bridge", "church", "school"] * 4))))
    return out


@pytest.mark.parametrize("strategy", ["optimal", "windowed", "compacted", "multi_level"])
@pytest.mark.parametrize("history", ["tools", "prose"])
def test_fit_messages_maps_every_output_to_its_original(strategy: str, history: str) -> None:
    past = long_history(40) if history == "tools" else prose_history(30)
    past.append(HumanMessage("When was town 3 founded, and what is the weather in city 3?"))
    for i, m in enumerate(past):
        m.id = f"msg-{i}"
    by_id = {m.id: (i, m) for i, m in enumerate(past)}
    budget = 1800
    engine = ContextEngine(config=EngineConfig(strategy=strategy))
    fitted = fit_messages(past, budget=budget, engine=engine)
    check_fitted(fitted, budget, past)
    assert fitted[-1] is past[-1]
    statuses = set()
    positions = []
    for m in fitted:
        info = m.response_metadata.get("ctxfold")
        if info is None:
            positions.append(by_id[m.id][0])
            continue
        statuses.add(info["status"])
        if info["status"] == "marker":
            assert isinstance(m, HumanMessage) and m.id is None
            continue
        # A changed message is a copy of its own original: same id, type, call ids, new content.
        index, original = by_id[m.id]
        assert info["id"] == m.id and type(m) is type(original)
        assert m.content != original.content
        if isinstance(m, ToolMessage):
            assert m.tool_call_id == original.tool_call_id and m.artifact is None
        if info["status"] == "summarized" and not isinstance(m, ToolMessage):
            assert m.content.startswith(("[summary] ", "[excerpt] "))
        positions.append(index)
    assert positions == sorted(positions)
    assert statuses, "the budget is meant to force some messages to change"


def test_fit_messages_under_budget_returns_the_same_objects() -> None:
    past = long_history(3)
    fitted = fit_messages(past, budget=100_000)
    assert len(fitted) == len(past) and all(a is b for a, b in zip(fitted, past))


def test_multi_level_markers_are_user_messages() -> None:
    past = long_history(40)
    engine = ContextEngine(config=EngineConfig(strategy="multi_level"))
    fitted = fit_messages(past, budget=1500, engine=engine)
    markers = [m for m in fitted if m.response_metadata.get("ctxfold", {}).get("status") == "marker"]
    assert markers and all(isinstance(m, HumanMessage) for m in markers)
    check_fitted(fitted, 1500, past)
    system_markers = fit_messages(past, budget=1500, engine=engine, marker_role="system")
    assert any(isinstance(m, SystemMessage) and "ctxfold" in m.response_metadata for m in system_markers)


def test_chain_with_fit_messages_runnable() -> None:
    budget = 1500
    past = long_history(30)
    prompt = ChatPromptTemplate.from_messages([
        ("system", "You plan trips."), MessagesPlaceholder("history"), ("human", "{question}"),
    ])
    model = ScriptedChatModel(messages=iter(["Pack for sun."]))
    chain = prompt | fit_messages(budget=budget) | model
    answer = chain.invoke({"history": past, "question": "What should I pack for city 12?"})
    assert answer.content == "Pack for sun."
    seen = model.prompts[0]
    assert isinstance(seen[0], SystemMessage) and seen[-1].content == "What should I pack for city 12?"
    dicts = openai_view(seen)
    assert_openai(dicts)
    assert ctxfold.count_messages(dicts) <= budget
    assert sum(any(m is p for p in past) for m in seen) > 10


def test_conversion_counts_what_langchain_sends() -> None:
    past = long_history(5)
    ours = ctxfold.count_messages(to_openai_dicts(past))
    theirs = ctxfold.count_messages(convert_to_openai_messages(past))
    # Text blocks are joined into one string (so they can be summarised): never less than LangChain's count.
    assert theirs <= ours <= theirs + 10


def test_argument_errors() -> None:
    with pytest.raises(InvalidInputError, match="budget"):
        fit_messages([HumanMessage("hi")], budget=2)
    with pytest.raises(InvalidTypeError, match="budget"):
        FitContext(budget="8000")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="engine"):
        fit_messages([HumanMessage("hi")], budget=100, engine=ContextEngine(), model="gpt-4o")
    with pytest.raises(InvalidInputError, match="marker_role"):
        fit_messages([HumanMessage("hi")], budget=100, marker_role="assistant")
    with pytest.raises(InvalidInputError, match=r"tool_calls\[0\].*id"):
        fit_messages([AIMessage("", tool_calls=[{"id": None, "name": "f", "args": {}}])], budget=100)
    with pytest.raises(InvalidTypeError, match="messages"):
        fit_messages("hello", budget=100)


def test_missing_framework_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(IntegrationImportError, match="pip install 'no-such-framework'") as info:
        require("ctxfold_no_such_framework", "no-such-framework", "ctxfold.integrations.test")
    assert isinstance(info.value, ImportError) and isinstance(info.value, ctxfold.CtxFoldError)
    # FitContext needs `langchain` itself; fit_messages only langchain-core.
    from ctxfold.integrations import langchain as module

    monkeypatch.setitem(sys.modules, "langchain.agents.middleware", None)
    with pytest.raises(IntegrationImportError, match="pip install 'langchain'"):
        module._make_fit_context()


def test_integrations_package_imports_no_framework() -> None:
    code = (
        "import sys, ctxfold.integrations\n"
        "heavy = [m for m in ('langchain', 'langchain_core', 'langgraph', 'agents', 'anthropic') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize("script", ["langchain_agent.py", "langchain_chain.py"])
def test_example_runs(script: str, capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLES / script), run_name="__main__")
    out = capsys.readouterr().out
    assert "answer:" in out and "budget" in out


def test_invalid_tool_calls_stay_with_their_tool_messages() -> None:
    past = long_history(20)
    broken = AIMessage("", invalid_tool_calls=[{"id": "bad_1", "name": "weather", "args": "{city: Oslo", "error": "bad JSON",
                                                 "type": "invalid_tool_call"}])
    past += [HumanMessage("Oslo?"), broken, ToolMessage("Error: arguments are not JSON", tool_call_id="bad_1"),
             AIMessage("Sorry, let me retry."), HumanMessage("Oslo, please.")]
    fitted = fit_messages(past, budget=800)
    kept = [m for m in fitted if m is broken]
    answers = [m for m in fitted if isinstance(m, ToolMessage) and m.tool_call_id == "bad_1"]
    assert len(kept) == len(answers) == 1
    assert fitted[fitted.index(broken) + 1] is answers[0]
    assert ctxfold.count_messages(openai_view(fitted)) <= 800


@st.composite
def langchain_histories(draw: st.DrawFn) -> list[Any]:
    """Random agent histories: questions (some with image blocks), answers,
    tool calls (one to three in parallel) with their ToolMessages, of random sizes."""
    out: list[Any] = []
    for i in range(draw(st.integers(1, 30))):
        words = " ".join(f"w{i}_{k}" for k in range(draw(st.integers(1, 150))))
        if draw(st.integers(0, 5)) == 0:
            out.append(HumanMessage(content=[{"type": "text", "text": f"Q{i} {words}"},
                                             {"type": "image", "url": f"https://example.com/{i}.png"}]))
        else:
            out.append(HumanMessage(f"Q{i} {words}", name=draw(st.sampled_from([None, "ann"]))))
        if draw(st.booleans()):
            calls = [{"id": f"c{i}_{j}", "name": "search", "args": {"q": i, "j": j}} for j in range(draw(st.integers(1, 3)))]
            out.append(AIMessage(draw(st.sampled_from(["", f"Searching {i}."])), tool_calls=calls))
            out += [ToolMessage(f"result {i}/{c['args']['j']}: {words}", tool_call_id=c["id"], name="search") for c in calls]
        out.append(AIMessage(f"A{i} {words[:300]}"))
    out.append(HumanMessage("What came first?"))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(langchain_histories(), st.integers(60, 3000))
def test_random_histories_fit_and_keep_their_objects(past: list[Any], budget: int) -> None:
    fitted = fit_messages(past, budget=budget)
    check_fitted(fitted, budget, past)
    assert fitted[-1] is past[-1]
    order = [next(i for i, p in enumerate(past) if p is m) for m in fitted if "ctxfold" not in m.response_metadata]
    assert order == sorted(order)
