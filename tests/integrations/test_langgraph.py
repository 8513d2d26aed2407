"""ctxfold.integrations.langgraph against the real LangGraph: `PreModelHook`
as the pre-model hook of `create_react_agent` and as a node of a hand-built
graph, over a 200-message history, with a fake chat model; the example run
as a script."""

from __future__ import annotations

import runpy
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="needs langgraph (the integrations extra)")
pytest.importorskip("openai", reason="needs the openai SDK (dev extras)")
pytest.importorskip("anthropic", reason="needs the anthropic SDK (dev extras)")

from langchain_core.messages import HumanMessage, SystemMessage  # noqa: E402
from langgraph_agent import fitted_graph  # noqa: E402
from scripted_chat_model import ScriptedChatModel  # noqa: E402
from .test_langchain import check_fitted, long_history, oslo_model, weather  # noqa: E402

import ctxfold  # noqa: E402
from ctxfold import InvalidInputError, InvalidTypeError  # noqa: E402
from ctxfold.integrations.langgraph import PreModelHook  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def react_agent(model: Any, hook: PreModelHook, prompt: str) -> Any:
    with warnings.catch_warnings():
        # create_react_agent is deprecated for langchain's create_agent, and still what LangGraph users run.
        warnings.simplefilter("ignore", DeprecationWarning)
        from langgraph.prebuilt import create_react_agent

        return create_react_agent(model, [weather], prompt=prompt, pre_model_hook=hook)


def test_react_agent_pre_model_hook_fits_model_view_only() -> None:
    budget = 2000
    prompt = "You are a weather assistant."
    past = long_history(50)
    assert len(past) >= 200
    question = HumanMessage("And Oslo?")
    model = oslo_model()
    hook = PreModelHook(budget=budget, prompt=prompt)
    agent = react_agent(model, hook, prompt)

    state = agent.invoke({"messages": [*past, question]})

    assert len(model.prompts) == 2
    for seen in model.prompts:
        # The agent puts its prompt back in front of what the hook returned: the whole fits.
        assert isinstance(seen[0], SystemMessage) and seen[0].content == prompt
        assert any(m.id == question.id for m in seen)
        check_fitted(seen[1:], budget, state["messages"])
        check_fitted(seen, budget, [seen[0], *state["messages"]])
    assert [m.type for m in model.prompts[1][-2:]] == ["ai", "tool"]
    # The graph's stored state holds everything.
    assert len(state["messages"]) == len(past) + 4
    assert [m.content for m in state["messages"][: len(past)]] == [m.content for m in past]
    assert hook.last_result.report.counts["dropped"] > 0


def test_hook_as_a_node_of_a_hand_built_graph() -> None:
    budget = 1500
    past = long_history(50)
    model = ScriptedChatModel(messages=iter(["Sunny all week."]))
    graph = fitted_graph(model, PreModelHook(budget=budget))
    state = graph.invoke({"messages": [*past, HumanMessage("And next week?")]})
    seen = model.prompts[0]
    check_fitted(seen, budget, state["messages"])
    assert seen[-1].content == "And next week?"
    assert len(state["messages"]) == len(past) + 2
    assert ctxfold.count_messages([{"role": "user", "content": m.text} for m in state["messages"]]) > 4 * budget


def test_hook_reads_object_states_and_checks_arguments() -> None:
    class ObjectState:
        messages = [HumanMessage("hi")]

    assert PreModelHook(budget=100)(ObjectState())["llm_input_messages"] == ObjectState.messages
    with pytest.raises(InvalidInputError, match="messages_key"):
        PreModelHook(budget=100)({"history": []})
    with pytest.raises(InvalidTypeError, match="prompt"):
        PreModelHook(budget=100, prompt=3)  # type: ignore[arg-type]


def test_example_runs(capsys: pytest.CaptureFixture[str]) -> None:
    runpy.run_path(str(EXAMPLES / "langgraph_agent.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert "react agent state" in out and "own graph" in out
