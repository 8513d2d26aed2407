"""What the framework adapters share: importing a framework with a helpful
error, the engine and options an adapter fits with, the OpenAI-style content
and tool calls the engine reads, ids for the engine's input, and which
message of the engine's output came from which input message."""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import numbers
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import msgspec

from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.integrations import IntegrationImportError

__all__ = [
    "require",
    "resolve_engine",
    "check_budget",
    "check_query",
    "check_marker_role",
    "parts_content",
    "tool_call",
    "tool_call_arguments",
    "assign_ids",
    "Fitted",
    "fit_dicts",
    "Fitter",
    "MARKER_ROLES",
]

#: The keys of an OpenAI message the engine reads and returns.
API_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")
#: What a shortened message keeps of its original: all but the content.
_SHAPE_KEYS = tuple(k for k in API_KEYS if k != "content")
#: Where the engine's own messages (chunk summaries, gap markers) go: a user
#: turn is valid for every provider; a system message mid-conversation is
#: not (Anthropic, Gemini).
MARKER_ROLES = ("user", "system")


def require(module: str, package: str, what: str) -> Any:
    """`module` imported, or `IntegrationImportError` naming the install."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise IntegrationImportError(
            f"{what} needs the {package!r} package, which is not installed: "
            f"pip install {package!r} (or pip install 'ctxfold[integrations]')"
        ) from e


@functools.lru_cache(maxsize=8)
def _default_engine(model: str | None, encoding: str | None) -> Any:
    from ctxfold.engine.context_engine import ContextEngine

    return ContextEngine(model, encoding=encoding)


def resolve_engine(engine: Any, model: str | None, encoding: str | None) -> Any:
    """`engine` when given; otherwise one engine per (model, encoding), shared
    by the adapters of a process so its caches (token counts, summaries)
    serve every turn and every adapter."""
    from ctxfold.engine.context_engine import ContextEngine

    if engine is not None:
        if model is not None or encoding is not None:
            raise InvalidInputError(
                "engine: pass either engine= or model=/encoding=, not both (the engine counts with its own tokenizer)"
            )
        if not isinstance(engine, ContextEngine):
            raise InvalidTypeError(f"engine: expected a ctxfold.ContextEngine, got {type(engine).__name__}")
        return engine
    for name, value in (("model", model), ("encoding", encoding)):
        if value is not None and not isinstance(value, str):
            raise InvalidTypeError(f"{name}: expected str, got {type(value).__name__}")
    return _default_engine(model, encoding)


def check_budget(budget: Any) -> int | None:
    """`budget` as an int (None: the engine's `config.budget`)."""
    if budget is None:
        return None
    if isinstance(budget, bool) or not isinstance(budget, numbers.Integral):
        raise InvalidTypeError(f"budget: expected int, got {type(budget).__name__}")
    if budget <= 3:
        raise InvalidInputError(f"budget: must be > 3 (the reply priming alone costs 3 tokens), got {budget}")
    return int(budget)


def check_query(query: Any) -> str | None:
    if query is not None and not isinstance(query, str):
        raise InvalidTypeError(f"query: expected str or None (None: the last user message), got {type(query).__name__}")
    return query


def check_marker_role(role: Any) -> str:
    if role not in MARKER_ROLES:
        raise InvalidInputError(f"marker_role: use 'user' or 'system', got {role!r}")
    return str(role)


def parts_content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    """A message's content as the engine takes it: one string when every part
    is text (what it can summarise), otherwise the text and image parts."""
    if any(p["type"] != "text" for p in parts):
        return parts
    return "\n".join(p["text"] for p in parts)


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """An OpenAI tool call (`arguments`: JSON text), the form the engine reads."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def tool_call_arguments(call: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The name and the arguments, as a dict, of an OpenAI tool call in the
    engine's output; arguments that are not a JSON object come back under
    ``"arguments"``."""
    function = call.get("function") or {}
    try:
        args = json.loads(function.get("arguments") or "{}")
    except json.JSONDecodeError:
        args = {"arguments": function.get("arguments")}
    return function.get("name", ""), args if isinstance(args, dict) else {"arguments": args}


_encode = msgspec.json.Encoder(order="deterministic").encode


def _key(message: Mapping[str, Any], keys: Sequence[str] = API_KEYS) -> bytes:
    """The message's API keys as canonical JSON: equal for equal messages."""
    api = {k: message[k] for k in keys if k in message}
    try:
        return _encode(api)
    except (TypeError, ValueError, msgspec.EncodeError):
        return json.dumps(api, sort_keys=True, ensure_ascii=True, default=repr).encode("ascii")


def assign_ids(messages: list[dict[str, Any]], given: Sequence[Any]) -> None:
    """Give each message an ``id``: `given[i]` when it is a non-empty str used
    once, otherwise one derived from the message's content and its number
    among identical messages (stable as the history grows, as the engine's
    own ids are), so the engine's report and `restore` name the same
    message every turn."""
    counts: dict[Any, int] = {}
    for g in given:
        if isinstance(g, str) and g:
            counts[g] = counts.get(g, 0) + 1
    used = {g for g, n in counts.items() if n == 1}
    copies: dict[bytes, int] = {}
    for message, g in zip(messages, given):
        if isinstance(g, str) and g and counts[g] == 1:
            message["id"] = g
            continue
        key = _key(message)
        copy = copies.get(key, 0)
        copies[key] = copy + 1
        digest = hashlib.blake2b(key + b"\x00%d" % copy, digest_size=16).hexdigest()
        candidate, n = f"h-{digest[:12]}", 1
        while candidate in used:
            n += 1
            candidate = f"h-{digest}-{n}"
        used.add(candidate)
        message["id"] = candidate


class Fitted(NamedTuple):
    """One message of the engine's output and where it came from."""

    message: dict[str, Any]
    """The OpenAI-style message the engine returned."""
    source: int | None
    """Index of the input message it stands for (None: a message the engine
    wrote: a chunk summary, a gap marker, a repair)."""
    status: str
    """``kept`` (the input message verbatim), ``summarized`` or ``cleared``
    (its content replaced), ``new`` (no input message)."""
    id: str | None
    """The engine's id of the input message (None for a new one)."""


def _in_chunk(reason: str) -> bool:
    # Members of a chunk summary are not in the output one by one.
    return "chunk summary" in reason or "dropped chunk" in reason


def fit_dicts(
    engine: Any, messages: list[dict[str, Any]], budget: int | None, query: str | None
) -> tuple[Any, list[Fitted]]:
    """`engine.optimize(messages)` and, for each output message, the input
    message it came from. `messages` carry unique ``id`` keys (`assign_ids`)."""
    result = engine.optimize(messages, budget=budget, query=query)
    by_id = {r.id: r for r in result.items}
    verbatim: dict[bytes, deque[int]] = {}
    changed: dict[bytes, deque[int]] = {}
    for k, message in enumerate(messages):
        r = by_id.get(message["id"])
        if r is None:
            continue
        if r.status == "kept":
            verbatim.setdefault(_key(message), deque()).append(k)
        elif r.status in ("summarized", "cleared") and not _in_chunk(r.reason):
            changed.setdefault(_key(message, _SHAPE_KEYS), deque()).append(k)
    out: list[Fitted] = []
    for m in result.messages:
        queue = verbatim.get(_key(m))
        if queue:
            k = queue.popleft()
            out.append(Fitted(m, k, "kept", messages[k]["id"]))
            continue
        queue = changed.get(_key(m, _SHAPE_KEYS))
        if queue:
            k = queue.popleft()
            out.append(Fitted(m, k, by_id[messages[k]["id"]].status, messages[k]["id"]))
            continue
        out.append(Fitted(m, None, "new", None))
    return result, out


class Fitter:
    """The engine, budget and options an adapter fits with, checked when the
    adapter is made, and the engine's `ContextResult` of its latest fit."""

    def __init__(
        self,
        budget: int | None,
        model: str | None,
        encoding: str | None,
        engine: Any,
        query: str | None,
        marker_role: str = "user",
    ) -> None:
        self.budget = check_budget(budget)
        self.engine = resolve_engine(engine, model, encoding)
        self.query = check_query(query)
        self.marker_role = check_marker_role(marker_role)
        self.last_result: Any = None

    def fit_openai_dicts(self, messages: list[dict[str, Any]], given_ids: Sequence[Any]) -> list[Fitted]:
        """`messages` (OpenAI-style dicts, given ids by `assign_ids`) fitted,
        each output message with the input message it came from."""
        assign_ids(messages, given_ids)
        self.last_result, fitted = fit_dicts(self.engine, messages, self.budget, self.query)
        return fitted
