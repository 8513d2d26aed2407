"""Turning the caller's messages into validated `Item`s: roles, ids,
timestamps, tool call/result pairs, token costs. Every problem is raised with
the index of the message and what to change; nothing is dropped silently."""

from __future__ import annotations

import datetime as dt
import functools
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ctxfold._core import Tokenizer
from ctxfold.adapters import is_anthropic, split_anthropic
from ctxfold.engine_cache import EngineCache
from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.tokens import message_costs
from ctxfold.types import Item

__all__ = ["parse_messages", "API_KEYS", "ROLES"]

#: The keys OpenAI's chat API reads; everything else is ctxfold metadata.
API_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")
ROLES = ("system", "developer", "user", "assistant", "tool")


def parse_messages(
    messages: Any, tokenizer: Tokenizer, system: str | None = None, cache: EngineCache | None = None
) -> list[Item]:
    """Validate `messages` (OpenAI-style dicts, or Anthropic-style content
    blocks) and return one `Item` per message, `system` first when given.
    With a `cache`, messages counted before are not counted again."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidTypeError(f"messages: expected a list of message dicts, got {type(messages).__name__}")
    messages = list(messages)
    sources: list[Any] = list(messages)
    if is_anthropic(messages):
        messages, sources = split_anthropic(messages)
    if system is not None:
        if not isinstance(system, str):
            raise InvalidTypeError(f"system: expected str, got {type(system).__name__}")
        messages = [{"role": "system", "content": system, "id": "system", "pinned": True}, *messages]
        sources = [messages[0], *sources]
    api_messages = [_api_message(m, i) for i, m in enumerate(messages)]
    if cache is None:
        costs = message_costs(api_messages, tokenizer)
    else:
        costs = cache.costs_of(api_messages, lambda todo: message_costs(todo, tokenizer))
    items: list[Item] = []
    seen_ids: set[str] = set()
    open_calls: set[str] = set()
    for i, (raw, source, api, cost) in enumerate(zip(messages, sources, api_messages, costs)):
        item = _item(raw, source, api, i, cost)
        if item.id in seen_ids:
            raise InvalidInputError(f"messages[{i}]: id {item.id!r} is used twice; ids must be unique")
        seen_ids.add(item.id)
        if item.role == "tool" and api.get("tool_call_id") not in open_calls:
            raise InvalidInputError(
                f"messages[{i}]: tool result for {api.get('tool_call_id')!r} has no matching tool call in an "
                "earlier assistant message; include the assistant message with that tool_calls id"
            )
        open_calls.update(item.tool_call_ids)
        items.append(item)
    return items


def _api_message(message: Any, i: int) -> dict[str, Any]:
    if not isinstance(message, Mapping):
        raise InvalidTypeError(f"messages[{i}]: expected a dict, got {type(message).__name__}")
    role = message.get("role")
    if role is None:
        raise InvalidInputError(f"messages[{i}]: missing 'role'; use one of {', '.join(ROLES)}")
    if role not in ROLES:
        raise InvalidInputError(f"messages[{i}]: unknown role {role!r}; use one of {', '.join(ROLES)}")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise InvalidInputError(f"messages[{i}]: a tool message needs the 'tool_call_id' of the call it answers")
    return {k: message[k] for k in API_KEYS if k in message}


def _item(raw: Mapping[str, Any], source: Any, api: dict[str, Any], i: int, cost: int) -> Item:
    where = f"messages[{i}]"
    calls = api.get("tool_calls") or ()
    call_ids = tuple(str(c.get("id")) for c in calls if isinstance(c, Mapping) and c.get("id") is not None)
    pinned = raw.get("pinned", False)
    if not isinstance(pinned, bool):
        raise InvalidTypeError(f"{where}['pinned']: expected bool, got {type(pinned).__name__}")
    kind = raw.get("kind")
    if kind is not None and not isinstance(kind, str):
        raise InvalidTypeError(f"{where}['kind']: expected str, got {type(kind).__name__}")
    if kind is None and api["role"] == "tool":
        kind = "tool_result"
    return Item(
        id=str(raw["id"]) if raw.get("id") is not None else f"m{i}",
        index=i,
        role=api["role"],
        message=api,
        text=message_text(api),
        tokens=cost,
        kind=kind,
        timestamp=_timestamp(raw.get("timestamp"), where),
        importance=_importance(raw.get("importance"), where),
        pinned=pinned,
        tool_call_ids=call_ids,
        source=source,
    )


def message_text(message: Mapping[str, Any]) -> str:
    """The readable text of a message: content (text parts joined) and the
    name and arguments of each tool call."""
    content = message.get("content")
    if isinstance(content, str):
        parts = [content]
    elif isinstance(content, Sequence):
        parts = [p if isinstance(p, str) else str(p.get("text", "")) for p in content if isinstance(p, (str, Mapping))]
    else:
        parts = []
    for call in message.get("tool_calls") or ():
        function = call.get("function", {}) if isinstance(call, Mapping) else {}
        parts.append(f"{function.get('name', '')}({function.get('arguments', '')})")
    return "\n".join(p for p in parts if p)


def _importance(value: Any, where: str) -> float:
    if value is None:
        return 0.5
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTypeError(f"{where}['importance']: expected a number in [0, 1], got {type(value).__name__}")
    if not 0.0 <= float(value) <= 1.0:
        raise InvalidInputError(f"{where}['importance']: must be in [0, 1], got {value}")
    return float(value)


def _timestamp(value: Any, where: str) -> float | None:
    """ISO 8601 text, a datetime, or epoch seconds, as epoch seconds (naive
    datetimes are taken as UTC)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        stamp = value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
        return stamp.timestamp()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise InvalidInputError(f"{where}['timestamp']: must be finite, got {value}")
        return float(value)
    if isinstance(value, str):
        try:
            return _iso_seconds(value)
        except ValueError:
            raise InvalidInputError(
                f"{where}['timestamp']: {value!r} is not ISO 8601; use e.g. '2024-05-01T12:00:00Z', "
                "a datetime, or epoch seconds"
            ) from None
    raise InvalidTypeError(f"{where}['timestamp']: expected ISO 8601 str, datetime or number, got {type(value).__name__}")


@functools.lru_cache(maxsize=65536)
def _iso_seconds(value: str) -> float:
    """Epoch seconds of an ISO 8601 text (naive: UTC); cached, as a
    conversation repeats its session dates."""
    stamp = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)).timestamp()


def dumps_arguments(arguments: Any) -> str:
    """Tool call arguments as the JSON string the chat API expects."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
