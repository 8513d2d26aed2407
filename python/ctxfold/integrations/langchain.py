"""LangChain: fit the messages a chat model sees into a token budget.

- `FitContext`: an agent middleware for `langchain.agents.create_agent`. It
  fits the model's view of each call (system prompt and messages) and leaves
  the agent state's messages complete::

      from langchain.agents import create_agent
      from ctxfold.integrations.langchain import FitContext

      agent = create_agent(model, tools, middleware=[FitContext(budget=8000)])

- `fit_messages`: a `trim_messages`-style callable on `BaseMessage` lists for
  chains. Called with messages it returns the fitted list; called without,
  a Runnable to put in an LCEL chain::

      from ctxfold.integrations.langchain import fit_messages

      chain = prompt | fit_messages(budget=8000) | model
      short = fit_messages(history, budget=8000)

A message kept verbatim is the caller's own object (ids, metadata, content
blocks, tool calls untouched). A shortened one is a copy of the original with
the new content and ``response_metadata["ctxfold"]`` saying what happened
(``{"status": "summarized" | "cleared", "id": ...}``; `ContextEngine.restore`
returns the original by that id). The engine's own messages (chunk summaries,
gap markers) are new `HumanMessage`s (``marker_role="system"``: `SystemMessage`s)
marked ``{"status": "marker"}``. Tool calls and their `ToolMessage`s stay
together; the last user message is always there.

Counting is the engine's (OpenAI's accounting with the `model=` or
`encoding=` tokenizer, o200k_base by default): text, tool calls and their
arguments, 85 tokens per image; other attachments (files, audio) count as a
short caption. Tool definitions are not counted: leave room for them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.integrations._common import (
    Fitted,
    Fitter,
    parts_content,
    require,
    tool_call,
    tool_call_arguments,
)

require("langchain_core", "langchain-core", "ctxfold.integrations.langchain")

from langchain_core.messages import (  # noqa: E402
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)
from langchain_core.runnables import RunnableLambda  # noqa: E402

__all__ = ["FitContext", "fit_messages", "to_openai_dicts"]

_CHAT_ROLES = ("system", "developer", "user", "assistant")
#: Content blocks that repeat what `AIMessage.tool_calls` already holds.
_CALL_BLOCKS = ("tool_use", "tool_call", "tool_call_chunk", "function_call")
_IMAGE_BLOCKS = ("image", "image_url", "input_image")
_THINKING_BLOCKS = ("reasoning", "thinking")


def to_openai_dicts(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The OpenAI-style dicts the engine counts and plans with, one per
    message (text-only content joined into one string so it can be
    summarised; images as ``image_url`` parts)."""
    return [_to_dict(m, f"messages[{i}]") for i, m in enumerate(messages)]


def _to_dict(message: Any, where: str) -> dict[str, Any]:
    if not isinstance(message, BaseMessage):
        raise InvalidTypeError(f"{where}: expected a langchain BaseMessage, got {type(message).__name__}")
    if isinstance(message, ToolMessage):
        content = _content(message.content, where)
        out: dict[str, Any] = {"role": "tool", "tool_call_id": str(message.tool_call_id), "content": content}
    elif isinstance(message, AIMessage):
        out = {"role": "assistant", "content": _content(message.content, where)}
        calls = [_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(message.tool_calls)]
        # Calls whose arguments did not parse are still sent, and answered by a ToolMessage.
        calls += [_call(c, f"{where}.invalid_tool_calls[{j}]") for j, c in enumerate(message.invalid_tool_calls) if c.get("id")]
        if calls:
            out["tool_calls"] = calls
            if out["content"] == "":
                out["content"] = None
    elif isinstance(message, HumanMessage):
        out = {"role": "user", "content": _content(message.content, where)}
    elif isinstance(message, SystemMessage):
        developer = message.additional_kwargs.get("__openai_role__") == "developer"
        out = {"role": "developer" if developer else "system", "content": _content(message.content, where)}
    elif isinstance(message, ChatMessage):
        role = message.role if message.role in _CHAT_ROLES else "user"
        out = {"role": role, "content": _content(message.content, where)}
    else:
        raise InvalidInputError(
            f"{where}: a {type(message).__name__} has no place in a chat model's input; use HumanMessage, "
            "AIMessage, SystemMessage or ToolMessage"
        )
    if isinstance(message.name, str) and message.name:
        # Counted for tool messages too: LangChain's converters send it.
        out["name"] = message.name
    return out


def _call(call: Any, where: str) -> dict[str, Any]:
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidInputError(
            f"{where}: a tool call needs an 'id' (its ToolMessage names it in tool_call_id); "
            "give the AIMessage's tool_calls ids"
        )
    args = call.get("args")
    arguments = args if isinstance(args, str) else json.dumps(args or {}, ensure_ascii=False)
    return tool_call(call_id, str(call.get("name") or ""), arguments)


def _content(content: Any, where: str) -> Any:
    """A string when every block is text (what the engine can summarise),
    otherwise text and image parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InvalidTypeError(f"{where}.content: expected str or a list of content blocks, got {type(content).__name__}")
    parts: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, str):
            parts.append({"type": "text", "text": block})
            continue
        if not isinstance(block, dict):
            raise InvalidTypeError(f"{where}.content: a content block must be a str or a dict, got {type(block).__name__}")
        kind = block.get("type")
        if kind in _CALL_BLOCKS:
            continue
        if kind == "text" or (kind is None and isinstance(block.get("text"), str)):
            parts.append({"type": "text", "text": str(block.get("text") or "")})
        elif kind in _THINKING_BLOCKS:
            text = block.get(kind) or block.get("text")
            if isinstance(text, str) and text:
                parts.append({"type": "text", "text": text})
        elif kind in _IMAGE_BLOCKS:
            parts.append({"type": "image_url", "image_url": {"url": _image_url(block)}})
        else:
            parts.append({"type": "text", "text": _caption(block)})
    return parts_content(parts)


def _image_url(block: dict[str, Any]) -> str:
    url = block.get("image_url", block.get("url"))
    if isinstance(url, dict):
        url = url.get("url")
    return url if isinstance(url, str) else "data:image"


def _caption(block: dict[str, Any]) -> str:
    """What a file, audio or provider-specific block counts as: its type and
    any name or text it carries."""
    words = [f"[{block.get('type', 'block')}"]
    for key in ("title", "filename", "name", "text", "mime_type"):
        value = block.get(key)
        if isinstance(value, str) and value:
            words.append(value)
    return " ".join(words) + "]"


def _messages(messages: Any) -> list[BaseMessage]:
    if isinstance(messages, (str, bytes)):
        raise InvalidTypeError("messages: expected a list of messages (or a PromptValue), got a str")
    try:
        return convert_to_messages(messages)
    except (ValueError, TypeError, NotImplementedError) as e:
        raise InvalidInputError(f"messages: not a list of LangChain messages or message-likes: {e}") from e


class _Fitter(Fitter):
    """Fits `BaseMessage` lists."""

    def fit(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """`messages` fitted: kept ones are the same objects."""
        messages = list(messages)
        if not messages:
            return []
        fitted = self.fit_openai_dicts(to_openai_dicts(messages), [m.id for m in messages])
        return [self._back(f, messages) for f in fitted]

    def _back(self, f: Fitted, originals: list[BaseMessage]) -> BaseMessage:
        if f.status == "kept" and f.source is not None:
            return originals[f.source]
        content = f.message.get("content")
        text = content if isinstance(content, (str, list)) else ""
        if f.source is not None:
            original = originals[f.source]
            update: dict[str, Any] = {
                "content": text,
                "response_metadata": {**original.response_metadata, "ctxfold": {"status": f.status, "id": f.id}},
            }
            if isinstance(original, ToolMessage):
                update["artifact"] = None
            if isinstance(original, AIMessage):
                calls = _calls_back(f.message.get("tool_calls"))
                before = [c.get("id") for c in [*original.tool_calls, *original.invalid_tool_calls]]
                if [c["id"] for c in calls] != before:
                    update["tool_calls"], update["invalid_tool_calls"] = calls, []
            return original.model_copy(update=update)
        return _new_message(f.message, text, self.marker_role)


def _calls_back(calls: Any) -> list[dict[str, Any]]:
    out = []
    for call in calls or ():
        name, args = tool_call_arguments(call)
        out.append({"name": name, "args": args, "id": call.get("id"), "type": "tool_call"})
    return out


def _new_message(message: dict[str, Any], content: Any, marker_role: str) -> BaseMessage:
    """A message the engine wrote: a chunk summary or gap marker (system
    role), or a repair (a stand-in result for an unanswered tool call)."""
    role = message.get("role")
    meta = {"ctxfold": {"status": "marker" if role in ("system", "developer") else "repair"}}
    if role == "tool":
        return ToolMessage(content=content, tool_call_id=str(message.get("tool_call_id")), response_metadata=meta)
    if role == "assistant":
        return AIMessage(content=content, tool_calls=_calls_back(message.get("tool_calls")), response_metadata=meta)
    if role == "user" or marker_role == "user":
        return HumanMessage(content=content, response_metadata=meta)
    return SystemMessage(content=content, response_metadata=meta)


def fit_messages(
    messages: Any = None,
    *,
    budget: int | None = None,
    model: str | None = None,
    encoding: str | None = None,
    engine: Any = None,
    query: str | None = None,
    marker_role: str = "user",
) -> Any:
    """`messages` (`BaseMessage`s, message-likes or a `PromptValue`) fitted
    into `budget` tokens, like `langchain_core.messages.trim_messages` but
    by value rather than by position: the engine keeps, shortens or drops
    each message, tool calls and their results together, the last user
    message always there.

    Without `messages`, a `Runnable` doing the same, for a chain::

        chain = prompt | fit_messages(budget=4000) | model

    `budget` defaults to the engine's `config.budget`; `model=`/`encoding=`
    pick the tokenizer (or pass `engine=`, a `ctxfold.ContextEngine`, for its
    config, summarizer and store); `query` is what the next answer is about
    (default: the last user message); `marker_role` is the role of the
    engine's summary and gap-marker messages (``"user"``: `HumanMessage`,
    valid for every provider; ``"system"``: `SystemMessage`).
    """
    fitter = _Fitter(budget, model, encoding, engine, query, marker_role)
    if messages is None:
        return RunnableLambda(lambda value: fitter.fit(_messages(value)), name="ctxfold_fit_messages")
    return fitter.fit(_messages(messages))


def _middleware_base() -> type:
    base: type = require("langchain.agents.middleware", "langchain", "ctxfold.integrations.langchain.FitContext").AgentMiddleware
    return base


def _make_fit_context() -> type:
    base = _middleware_base()

    class FitContext(base):  # type: ignore[misc, valid-type]
        """Agent middleware for `langchain.agents.create_agent`: each model
        call sees its system prompt and messages fitted into `budget` tokens;
        the agent's state keeps every message::

            agent = create_agent(model, tools, middleware=[FitContext(budget=8000)])

        Options as `fit_messages`: `budget`, `model`/`encoding` or `engine`,
        `query`, `marker_role`. The system prompt counts in the budget and is
        never cut. `last_result` is the engine's `ContextResult` of the latest
        call (its `report` says what was kept, shortened and dropped).
        """

        def __init__(
            self,
            budget: int | None = None,
            *,
            model: str | None = None,
            encoding: str | None = None,
            engine: Any = None,
            query: str | None = None,
            marker_role: str = "user",
        ) -> None:
            super().__init__()
            self._fitter = _Fitter(budget, model, encoding, engine, query, marker_role)

        @property
        def last_result(self) -> Any:
            return self._fitter.last_result

        def _fitted_request(self, request: Any) -> Any:
            system = request.system_message
            head = [system] if system is not None else []
            fitted = self._fitter.fit([*head, *request.messages])
            if system is None:
                return request.override(messages=fitted)
            # The engine never drops a system prompt: it comes back first.
            return request.override(system_message=fitted[0], messages=fitted[1:])

        def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
            if not request.messages:
                return handler(request)
            return handler(self._fitted_request(request))

        async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
            if not request.messages:
                return await handler(request)
            import asyncio

            # The engine's Rust stages release the GIL: fit off the event loop.
            return await handler(await asyncio.to_thread(self._fitted_request, request))

    FitContext.__module__ = __name__
    return FitContext


def __getattr__(name: str) -> Any:
    # FitContext needs the `langchain` package; fit_messages only langchain-core.
    if name == "FitContext":
        cls = _make_fit_context()
        globals()["FitContext"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
