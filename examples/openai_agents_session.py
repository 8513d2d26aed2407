"""An OpenAI Agents SDK run whose session history is fitted before the run.

`FitSession` wraps the session that stores the conversation (here an
in-memory `SQLiteSession`): the runner reads the history through it, fitted
into the budget, and writes the new items through it, so the store keeps
everything. Runs offline: the model is a fake implementing the SDK's `Model`
interface that records the input it was given (scripted_agents_model.py,
next to this file).

    python examples/openai_agents_session.py
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agents import Agent, Runner, SQLiteSession, function_tool, set_tracing_disabled
from openai.types.responses import ResponseFunctionToolCall

from ctxfold.integrations.openai_agents import FitSession
from scripted_agents_model import ScriptedModel, reply

BUDGET = 2000


@function_tool
def stock(item: str) -> str:
    """Units of an item in stock."""
    return f"{item}: 12 units in stock"


def history(turns: int) -> list[dict[str, Any]]:
    """Stored items of earlier runs: a question, a function call and its output, an answer."""
    items: list[dict[str, Any]] = []
    for i in range(turns):
        items += [
            {"role": "user", "content": f"How many units of part P-{i} do we have? Reorder at {i % 7 + 3}."},
            {"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": "stock",
             "arguments": json.dumps({"item": f"P-{i}"})},
            {"type": "function_call_output", "call_id": f"call_{i}",
             "output": f"P-{i}: {i % 20} units; " + "bin A-3, last counted on Monday; " * 12},
            reply(f"We have {i % 20} units of P-{i}.", i).model_dump(exclude_unset=True),
        ]
    return items


def reorder_check_model(answer: str) -> ScriptedModel:
    """A model that looks up the stock of P-7, then answers `answer`."""
    return ScriptedModel([
        ResponseFunctionToolCall(type="function_call", id="fc_new", call_id="call_new", name="stock",
                                 arguments=json.dumps({"item": "P-7"})),
        reply(answer, 999),
    ])


async def main() -> None:
    set_tracing_disabled(True)
    store = SQLiteSession("warehouse-chat")
    past = history(50)
    await store.add_items(past)
    model = reorder_check_model("We have 12 units of P-7, above its reorder point.")
    agent = Agent(name="warehouse", instructions="You answer stock questions.", model=model, tools=[stock])
    session = FitSession(store, budget=BUDGET)

    result = await Runner.run(agent, "Do we need to reorder P-7?", session=session)

    print(f"stored before the run: {len(past)} items")
    print(f"model input, first call: {len(model.inputs[0])} items (the fitted history and the new question)")
    print("history:", session.last_result.report.to_text().splitlines()[0])
    assert session.last_result.tokens <= BUDGET
    stored = await store.get_items()
    print(f"stored after the run: {len(stored)} items (the history and this run's {len(stored) - len(past)})")
    assert len(stored) == len(past) + 4
    print("answer:", result.final_output)


if __name__ == "__main__":
    asyncio.run(main())
