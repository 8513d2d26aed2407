"""OpenAI Agents SDK: a session whose history is fitted into a token budget
before each run, while the session it wraps keeps every item::

    from agents import Agent, Runner, SQLiteSession
    from ctxfold.integrations.openai_agents import FitSession

    session = FitSession(SQLiteSession("user-42", "chats.db"), budget=8000)
    result = await Runner.run(agent, "What did we decide yesterday?", session=session)

`FitSession` implements the SDK's `Session` protocol (`get_items`,
`add_items`, `pop_item`, `clear_session`). `get_items()` (no limit: the read
the runner builds its input from) returns the history fitted; the writes and
every read with a `limit` (the runner's bookkeeping of the latest items) go
to the wrapped session as they are. The budget is for the history: the run
adds the agent's instructions, tool definitions and the new input on top.

Items are Responses-API input items. A function call and its output stay
together (calls of one turn are one unit, with the assistant message and
reasoning items before them); a kept item is the stored item itself; a
shortened message or tool output is a copy with the new text (ids kept); the
engine's chunk summaries and gap markers are user messages. Items of other
kinds (hosted tool calls, computer use, ...) are kept or dropped whole, in
runs of consecutive such items.

`fit_items` does the same to a list of items, for a `session_input_callback`
or a loop of your own.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.integrations._common import Fitted, Fitter, parts_content, require, tool_call

require("agents", "openai-agents", "ctxfold.integrations.openai_agents")

__all__ = ["FitSession", "fit_items"]

_MESSAGE_ROLES = ("user", "system", "developer", "assistant")
_TEXT_PARTS = ("input_text", "output_text", "text")


class _Unit:
    """Consecutive items the engine sees as one chat message."""

    __slots__ = ("items", "kind", "message", "text_item")

    def __init__(self, items: list[int], kind: str, message: dict[str, Any], text_item: int | None) -> None:
        self.items = items
        self.kind = kind
        self.message = message
        #: The item whose text a shortened form replaces.
        self.text_item = text_item


def _kind(item: Mapping[str, Any]) -> str:
    kind = item.get("type")
    if kind in (None, "message") and item.get("role") in _MESSAGE_ROLES:
        return "message"
    return str(kind)


def _parts_text(content: Any) -> Any:
    """A message's content as the engine takes it: the text when it is all
    text, otherwise text and image parts."""
    if isinstance(content, str):
        return content
    if not isinstance(content, Sequence):
        return ""
    parts: list[dict[str, Any]] = []
    for part in content:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in _TEXT_PARTS:
            parts.append({"type": "text", "text": str(part.get("text") or "")})
        elif kind == "refusal":
            parts.append({"type": "text", "text": str(part.get("refusal") or "")})
        elif kind == "input_image":
            parts.append({"type": "image_url", "image_url": {"url": str(part.get("image_url") or "file")}})
        else:
            name = part.get("filename") or part.get("file_id") or ""
            parts.append({"type": "text", "text": f"[{kind} {name}]".replace(" ]", "]")})
    return parts_content(parts)


def _opaque_text(item: Mapping[str, Any]) -> str:
    return json.dumps(item, ensure_ascii=False, default=str, sort_keys=True)


def _units(items: Sequence[Any]) -> list[_Unit]:
    """Group `items` into the engine's messages."""
    for i, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise InvalidTypeError(f"items[{i}]: expected a dict (a Responses input item), got {type(item).__name__}")
    units: list[_Unit] = []
    reasoning: list[int] = []
    i, n = 0, len(items)
    while i < n:
        item, kind = items[i], _kind(items[i])
        if kind == "reasoning":
            # A reasoning item goes with what the model produced after it.
            reasoning.append(i)
            i += 1
            continue
        if kind == "message":
            role = item["role"]
            message: dict[str, Any] = {"role": role, "content": _parts_text(item.get("content"))}
            members, text_item = [*reasoning, i], i
            i += 1
            if role == "assistant":
                calls, more = _calls(items, i)
                if calls:
                    message["tool_calls"] = calls
                    members += more
                    i = more[-1] + 1
            units.append(_Unit(members, "message", message, text_item))
        elif kind == "function_call":
            calls, more = _calls(items, i)
            units.append(_Unit([*reasoning, *more], "calls", {"role": "assistant", "content": None, "tool_calls": calls}, None))
            i = more[-1] + 1
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            if not isinstance(call_id, str):
                raise InvalidInputError(f"items[{i}]: a function_call_output needs the 'call_id' of its function_call")
            output = item.get("output")
            content = output if isinstance(output, str) else _parts_text(output)
            units.append(_Unit([*reasoning, i], "output", {"role": "tool", "tool_call_id": call_id, "content": content}, i))
            i += 1
        else:
            # Kinds the engine cannot shorten: a run of them is kept or dropped whole.
            run = [i]
            i += 1
            while i < n and _kind(items[i]) not in ("message", "function_call", "function_call_output", "reasoning"):
                run.append(i)
                i += 1
            text = "\n".join(_opaque_text(items[k]) for k in run)
            units.append(_Unit([*reasoning, *run], "opaque", {"role": "assistant", "content": text}, None))
        reasoning = []
    if reasoning:
        units.append(_Unit(reasoning, "opaque", {"role": "assistant", "content": "[reasoning]"}, None))
    return units


def _calls(items: Sequence[Mapping[str, Any]], start: int) -> tuple[list[dict[str, Any]], list[int]]:
    """The function calls from `start` on (a turn's parallel calls), with
    any reasoning items between them."""
    calls: list[dict[str, Any]] = []
    members: list[int] = []
    k = start
    while k < len(items) and _kind(items[k]) in ("function_call", "reasoning"):
        item = items[k]
        if _kind(item) == "function_call":
            call_id = item.get("call_id")
            if not isinstance(call_id, str) or not call_id:
                raise InvalidInputError(f"items[{k}]: a function_call needs a 'call_id'")
            arguments = item.get("arguments")
            arguments = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
            calls.append(tool_call(call_id, str(item.get("name") or ""), arguments))
        members.append(k)
        k += 1
    while members and _kind(items[members[-1]]) == "reasoning":
        members.pop()
    return calls, members


def _shortened(item: Mapping[str, Any], text: str) -> dict[str, Any]:
    """A copy of `item` with its text replaced."""
    out = dict(item)
    if _kind(item) == "function_call_output":
        out["output"] = text
        return out
    content = item.get("content")
    if isinstance(content, str) or not content:
        out["content"] = text
        return out
    part = "output_text" if item.get("role") == "assistant" else "input_text"
    replacement: dict[str, Any] = {"type": part, "text": text}
    if part == "output_text":
        replacement["annotations"] = []
    out["content"] = [replacement]
    return out


def _new_item(message: Mapping[str, Any], marker_role: str) -> list[dict[str, Any]]:
    """Items for a message the engine wrote: a summary or gap marker, or a
    stand-in output for an unanswered call."""
    role = message.get("role")
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    if role == "tool":
        return [{"type": "function_call_output", "call_id": str(message.get("tool_call_id")), "output": text}]
    if role in ("system", "developer"):
        role = marker_role
    if not text.strip():
        return []
    return [{"role": role if role in _MESSAGE_ROLES else "user", "content": text}]


class _ItemFitter(Fitter):
    """Fits lists of Responses input items."""

    def fit(self, items: Sequence[Any]) -> list[Any]:
        if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
            raise InvalidTypeError(f"items: expected a list of Responses input items, got {type(items).__name__}")
        items = list(items)
        if not items:
            return []
        units = _units(items)
        fitted = self.fit_openai_dicts([dict(u.message) for u in units], [_unit_id(items, u) for u in units])
        out: list[Any] = []
        for f in fitted:
            out += self._back(f, units, items)
        return out

    def _back(self, f: Fitted, units: list[_Unit], items: list[Any]) -> list[Any]:
        if f.source is None:
            return _new_item(f.message, self.marker_role)
        unit = units[f.source]
        if f.status == "kept":
            return [items[k] for k in unit.items]
        if unit.kind == "opaque" or unit.text_item is None:
            # No text to replace: such a unit is whole or absent.
            return [] if unit.kind == "opaque" else [items[k] for k in unit.items]
        content = f.message.get("content")
        text = content if isinstance(content, str) else ""
        return [_shortened(items[k], text) if k == unit.text_item else items[k] for k in unit.items]


def _unit_id(items: Sequence[Mapping[str, Any]], unit: _Unit) -> str | None:
    """The stored id of a unit's main item, when it has one."""
    anchor = unit.text_item if unit.text_item is not None else unit.items[-1]
    value = items[anchor].get("id")
    return value if isinstance(value, str) and value else None


def fit_items(
    items: Sequence[Any],
    *,
    budget: int | None = None,
    model: str | None = None,
    encoding: str | None = None,
    engine: Any = None,
    query: str | None = None,
    marker_role: str = "user",
) -> list[Any]:
    """Responses-API input items fitted into `budget` tokens (as
    `FitSession.get_items` fits a session's history). Options as `FitSession`.

    Example::

        history = await session.get_items()
        short = fit_items(history, budget=8000)
    """
    return _ItemFitter(budget, model, encoding, engine, query, marker_role).fit(items)


class FitSession:
    """An Agents SDK session that wraps `session` (any `Session`: `SQLiteSession`,
    a Redis or SQLAlchemy session, ...) and fits its history into `budget`
    tokens each time the runner reads it; the wrapped session keeps every
    item.

    `budget` defaults to the engine's `config.budget`; `model=`/`encoding=`
    pick the tokenizer (or pass `engine=`, a `ctxfold.ContextEngine`);
    `query` is what the next answer is about (default: the last user message
    of the history); `marker_role` is the role of the engine's summary and
    gap-marker messages (``"user"`` or ``"system"``). `last_result` is the
    engine's `ContextResult` of the latest fit.

    Example::

        session = FitSession(SQLiteSession("conversation-1"), budget=8000)
        await Runner.run(agent, "And the second option?", session=session)
    """

    #: Limits apply in the wrapped session (its own settings) before fitting.
    session_settings = None

    def __init__(
        self,
        session: Any,
        budget: int | None = None,
        *,
        model: str | None = None,
        encoding: str | None = None,
        engine: Any = None,
        query: str | None = None,
        marker_role: str = "user",
    ) -> None:
        for method in ("get_items", "add_items", "pop_item", "clear_session"):
            if not callable(getattr(session, method, None)):
                raise InvalidTypeError(
                    f"session: expected an Agents SDK session (with {method}()), got {type(session).__name__}"
                )
        self.session = session
        self._fitter = _ItemFitter(budget, model, encoding, engine, query, marker_role)

    @property
    def session_id(self) -> str:
        return self.session.session_id  # type: ignore[no-any-return]

    @property
    def last_result(self) -> Any:
        return self._fitter.last_result

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The history fitted into the budget; with a `limit`, the latest
        `limit` stored items as they are (the runner's bookkeeping reads)."""
        if limit is not None:
            return await self.session.get_items(limit)  # type: ignore[no-any-return]
        items = await self.session.get_items()
        # The engine's Rust stages release the GIL: fit off the event loop.
        return await asyncio.to_thread(self._fitter.fit, items)

    async def add_items(self, items: list[Any]) -> None:
        await self.session.add_items(items)

    async def pop_item(self) -> Any:
        return await self.session.pop_item()

    async def clear_session(self) -> None:
        await self.session.clear_session()
