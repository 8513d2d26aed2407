"""A LangChain agent (`create_agent`) whose model sees a fitted context.

`FitContext` is agent middleware: before each model call it fits the system
prompt and the messages into the budget; the agent's state keeps them all.
Runs offline: the chat model is a fake that answers from a script and
records what it was sent (scripted_chat_model.py, next to this file).

    python examples/langchain_agent.py
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, convert_to_openai_messages
from langchain_core.tools import tool

import ctxfold
from ctxfold.integrations.langchain import FitContext
from scripted_chat_model import ScriptedChatModel

BUDGET = 2000
SYSTEM = "You are a travel assistant. Use the weather tool for forecasts."


@tool
def weather(city: str) -> str:
    """Today's forecast for a city."""
    return f"{city}: sunny, 21 C, light wind from the west."


def history(turns: int) -> list[Any]:
    """A long earlier conversation: a question, a tool call, its result, an answer."""
    out: list[Any] = []
    for i in range(turns):
        out += [
            HumanMessage(f"What will the weather be like in city number {i}? We may stop there on day {i % 9}."),
            AIMessage("", tool_calls=[{"id": f"call_{i}", "name": "weather", "args": {"city": f"city {i}"}}]),
            ToolMessage(f"city {i}: sunny, {10 + i % 15} C. " + "Hourly detail: clear skies, wind 3 m/s. " * 12,
                        tool_call_id=f"call_{i}", name="weather"),
            AIMessage(f"City {i} will be sunny at about {10 + i % 15} degrees."),
        ]
    return out


def main() -> None:
    model = ScriptedChatModel(messages=iter([
        AIMessage("", tool_calls=[{"id": "call_oslo", "name": "weather", "args": {"city": "Oslo"}}]),
        AIMessage("Oslo will be sunny at 21 C: pack a light jacket for the wind."),
    ]))
    fit = FitContext(budget=BUDGET)
    agent = create_agent(model, [weather], system_prompt=SYSTEM, middleware=[fit])
    past = history(50)
    question = HumanMessage("And what about Oslo tomorrow?")
    state = agent.invoke({"messages": [*past, question]})

    print(f"history: {len(past)} messages, {ctxfold.count_messages(convert_to_openai_messages(past))} tokens")
    for n, prompt in enumerate(model.prompts, 1):
        tokens = ctxfold.count_messages(convert_to_openai_messages(prompt))
        print(f"model call {n}: {len(prompt)} messages, {tokens} tokens (budget {BUDGET})")
        assert tokens <= BUDGET and any(m is question for m in prompt)
    print(f"agent state: {len(state['messages'])} messages (nothing removed)")
    assert state["messages"][: len(past)] == past
    print(fit.last_result.report.to_text().splitlines()[0])
    print("answer:", state["messages"][-1].content)


if __name__ == "__main__":
    main()
