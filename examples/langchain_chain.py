"""A LangChain chain with `fit_messages` between the prompt and the model,
where `trim_messages` would go: the history is fitted by value (the engine
keeps, shortens or drops each message), not cut by position.

Runs offline: the chat model is a fake that records what it was sent
(scripted_chat_model.py, next to this file).

    python examples/langchain_chain.py
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, convert_to_openai_messages
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder

import ctxfold
from ctxfold.integrations.langchain import fit_messages
from scripted_chat_model import ScriptedChatModel

BUDGET = 1500


def history() -> list[Any]:
    out: list[Any] = []
    for i in range(40):
        out += [
            HumanMessage(f"Note {i}: the invoice for order #{1000 + i} is due on day {i % 28 + 1}."),
            AIMessage("", tool_calls=[{"id": f"lookup_{i}", "name": "orders", "args": {"order": 1000 + i}}]),
            ToolMessage(f"order #{1000 + i}: " + "line item, quantity 2, unit price 19.90 EUR; " * 10,
                        tool_call_id=f"lookup_{i}"),
            AIMessage(f"Noted: order #{1000 + i} is due on day {i % 28 + 1}."),
        ]
    # A message with content blocks: an image next to the text.
    out.append(HumanMessage(content=[
        {"type": "text", "text": "Here is the receipt for order #1007."},
        {"type": "image", "url": "https://example.com/receipt-1007.png"},
    ]))
    out.append(AIMessage("Thanks, I have the receipt for order #1007."))
    return out


def main() -> None:
    prompt = ChatPromptTemplate.from_messages([
        ("system", "You keep track of orders and invoices."),
        MessagesPlaceholder("history"),
        ("human", "{question}"),
    ])
    model = ScriptedChatModel(messages=iter(["Order #1007 is due on day 8."]))
    chain = prompt | fit_messages(budget=BUDGET) | model

    past = history()
    answer = chain.invoke({"history": past, "question": "When is order #1007 due?"})
    seen = model.prompts[-1]
    tokens = ctxfold.count_messages(convert_to_openai_messages(seen))
    print(f"history: {len(past)} messages, {ctxfold.count_messages(convert_to_openai_messages(past))} tokens")
    print(f"model saw: {len(seen)} messages, {tokens} tokens (budget {BUDGET})")
    assert tokens <= BUDGET
    kept = sum(any(m is p for p in past) for m in seen)
    print(f"{kept} of them are the history's own message objects, unchanged")
    print("answer:", answer.content)


if __name__ == "__main__":
    main()
