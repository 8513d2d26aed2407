"""A LangGraph ReAct agent whose model sees a fitted context.

`PreModelHook` is the agent's `pre_model_hook`: it returns
``{"llm_input_messages": fitted}``, which the agent sends to the model in
place of the state's messages; the graph's state keeps them all. The second
half builds the same thing by hand: a graph whose model node reads
``llm_input_messages``.

Runs offline: the chat model is a fake that records what it was sent
(scripted_chat_model.py, next to this file).

    python examples/langgraph_agent.py
"""

from __future__ import annotations

import warnings
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolMessage, convert_to_openai_messages
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

import ctxfold
from ctxfold.integrations.langgraph import PreModelHook
from scripted_chat_model import ScriptedChatModel

BUDGET = 2000
PROMPT = "You are a support agent for a bike shop. Look orders up with the orders tool."


@tool
def orders(order_id: int) -> str:
    """Status of an order."""
    return f"order {order_id}: shipped, arrives Thursday"


def history(turns: int) -> list[Any]:
    out: list[Any] = []
    for i in range(turns):
        out += [
            HumanMessage(f"Where is my order {500 + i}? It contained a {('helmet', 'chain', 'saddle')[i % 3]}."),
            AIMessage("", tool_calls=[{"id": f"call_{i}", "name": "orders", "args": {"order_id": 500 + i}}]),
            ToolMessage(f"order {500 + i}: " + "in transit, scanned at the regional depot; " * 15,
                        tool_call_id=f"call_{i}", name="orders"),
            AIMessage(f"Order {500 + i} is in transit."),
        ]
    return out


def tokens(messages: list[Any]) -> int:
    return ctxfold.count_messages(convert_to_openai_messages(messages))


def react_agent(past: list[Any]) -> None:
    with warnings.catch_warnings():
        # create_react_agent is deprecated in favour of langchain's create_agent (examples/langchain_agent.py).
        warnings.simplefilter("ignore", DeprecationWarning)
        from langgraph.prebuilt import create_react_agent

        model = ScriptedChatModel(messages=iter([
            AIMessage("", tool_calls=[{"id": "call_new", "name": "orders", "args": {"order_id": 777}}]),
            AIMessage("Order 777 has shipped and arrives on Thursday."),
        ]))
        agent = create_react_agent(model, [orders], prompt=PROMPT, pre_model_hook=PreModelHook(budget=BUDGET, prompt=PROMPT))
    state = agent.invoke({"messages": [*past, HumanMessage("And order 777?")]})
    for n, prompt in enumerate(model.prompts, 1):
        print(f"react agent, model call {n}: {len(prompt)} messages, {tokens(prompt)} tokens (budget {BUDGET})")
        assert tokens(prompt) <= BUDGET
    print(f"react agent state: {len(state['messages'])} messages (nothing removed)")
    assert len(state["messages"]) == len(past) + 4


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    # The model's view: replaced on every write, never merged into `messages`.
    llm_input_messages: Annotated[list[AnyMessage], lambda old, new: new]


def fitted_graph(model: Any, hook: PreModelHook) -> Any:
    """A graph of your own: the hook's node, then a model node that reads
    ``llm_input_messages``."""
    graph = StateGraph(State)
    graph.add_node("fit", hook)
    graph.add_node("model", lambda state: {"messages": [model.invoke(state["llm_input_messages"])]})
    graph.add_edge(START, "fit")
    graph.add_edge("fit", "model")
    graph.add_edge("model", END)
    return graph.compile()


def own_graph(past: list[Any]) -> None:
    model = ScriptedChatModel(messages=iter(["Your saddle was in order 502; it was delivered."]))
    graph = fitted_graph(model, PreModelHook(budget=BUDGET))
    state = graph.invoke({"messages": [*past, HumanMessage("Which order had the saddle?")]})
    seen = model.prompts[-1]
    print(f"own graph: model saw {len(seen)} messages, {tokens(seen)} tokens; state holds {len(state['messages'])}")
    assert tokens(seen) <= BUDGET and len(state["messages"]) == len(past) + 2


def main() -> None:
    past = history(50)
    print(f"history: {len(past)} messages, {tokens(past)} tokens")
    react_agent(past)
    own_graph(past)


if __name__ == "__main__":
    main()
