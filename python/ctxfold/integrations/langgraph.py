"""LangGraph: a pre-model hook that fits what the model sees, so the graph's
stored messages stay complete::

    from langgraph.prebuilt import create_react_agent
    from ctxfold.integrations.langgraph import PreModelHook

    agent = create_react_agent(model, tools, prompt=PROMPT,
                               pre_model_hook=PreModelHook(budget=8000, prompt=PROMPT))

The hook returns ``{"llm_input_messages": fitted}``: `create_react_agent`
sends those to the model instead of the state's `messages`, which it leaves
as they are. In a graph of your own, add the hook as the node before the
model's and have the model node read ``llm_input_messages`` (the state needs
that key, as a plain list, next to `messages`).

Messages are fitted as `ctxfold.integrations.langchain.fit_messages` fits
them: kept ones are the state's own objects, tool calls stay with their
results, the last user message is always there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.integrations._common import require

require("langgraph", "langgraph", "ctxfold.integrations.langgraph")

from langchain_core.messages import BaseMessage, SystemMessage  # noqa: E402

from ctxfold.integrations.langchain import _Fitter, _messages  # noqa: E402

__all__ = ["PreModelHook"]


class PreModelHook:
    """A `pre_model_hook` for `langgraph.prebuilt.create_react_agent` (or a
    node of your own graph): ``{"llm_input_messages": <the state's messages
    fitted into budget tokens>}``.

    `prompt` is the agent's system prompt when the agent adds it after the
    hook (the `prompt=` of `create_react_agent`, a str or `SystemMessage`):
    it is counted in the budget, not returned. `messages_key` names the
    state's message list. Other options as
    `ctxfold.integrations.langchain.fit_messages`: `budget`,
    `model`/`encoding` or `engine`, `query`, `marker_role`. `last_result` is
    the engine's `ContextResult` of the latest call.

    Example::

        hook = PreModelHook(budget=8000, prompt="You are a travel agent.")
        agent = create_react_agent(model, tools, prompt="You are a travel agent.", pre_model_hook=hook)
        agent.invoke({"messages": history})   # the returned messages: all of them
    """

    def __init__(
        self,
        budget: int | None = None,
        *,
        prompt: str | SystemMessage | None = None,
        messages_key: str = "messages",
        model: str | None = None,
        encoding: str | None = None,
        engine: Any = None,
        query: str | None = None,
        marker_role: str = "user",
    ) -> None:
        self._fitter = _Fitter(budget, model, encoding, engine, query, marker_role)
        if isinstance(prompt, str):
            prompt = SystemMessage(content=prompt)
        if prompt is not None and not isinstance(prompt, SystemMessage):
            raise InvalidTypeError(f"prompt: expected str, SystemMessage or None, got {type(prompt).__name__}")
        if not isinstance(messages_key, str) or not messages_key:
            raise InvalidInputError(f"messages_key: expected the name of the state's message list, got {messages_key!r}")
        self.prompt = prompt
        self.messages_key = messages_key

    @property
    def last_result(self) -> Any:
        return self._fitter.last_result

    def __call__(self, state: Any) -> dict[str, list[BaseMessage]]:
        raw = state.get(self.messages_key) if isinstance(state, Mapping) else getattr(state, self.messages_key, None)
        if raw is None:
            raise InvalidInputError(
                f"state: no {self.messages_key!r} key; pass messages_key= naming the state's message list"
            )
        messages = _messages(raw)
        if self.prompt is None:
            return {"llm_input_messages": self._fitter.fit(messages)}
        fitted = self._fitter.fit([self.prompt, *messages])
        # The engine keeps a system prompt first and verbatim; the agent adds it back.
        return {"llm_input_messages": fitted[1:] if fitted and fitted[0] is self.prompt else fitted}
