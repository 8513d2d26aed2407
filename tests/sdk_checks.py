"""Checks that messages are valid requests for the official OpenAI and
Anthropic SDKs: each message validated against the SDK's own TypedDict with
pydantic, every key checked against that TypedDict (pydantic ignores extra
keys), and the structural rules of each API that no type can express.

Test-only: the library itself does not depend on either SDK.

Each `*_problems` function returns a list of readable problems (empty: valid);
the `assert_*` twins raise AssertionError listing them all.
"""

from __future__ import annotations

import functools
import re
import types
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin

import anthropic.types
import openai.types.chat
from pydantic import TypeAdapter, ValidationError
from typing_extensions import Annotated, NotRequired, Required, get_type_hints, is_typeddict

__all__ = [
    "openai_problems",
    "anthropic_problems",
    "assert_openai",
    "assert_anthropic",
    "unknown_keys",
    "CTXFOLD_METADATA_KEYS",
]

OPENAI_MESSAGE = openai.types.chat.ChatCompletionMessageParam
ANTHROPIC_MESSAGE = anthropic.types.MessageParam
#: Keys ctxfold reads from input messages; never part of an API request.
CTXFOLD_METADATA_KEYS = ("id", "timestamp", "importance", "pinned", "kind", "_source")
#: Anthropic rejects any other tool_use id.
TOOL_USE_ID = re.compile(r"[a-zA-Z0-9_-]+")


@functools.cache
def _adapter(tp: Any) -> TypeAdapter:
    return TypeAdapter(tp)


def _drain(value: Any) -> None:
    """Iterate everything pydantic left lazy: an `Iterable[...]` field is
    validated item by item only when it is iterated."""
    if isinstance(value, Iterator):
        value = list(value)
    if isinstance(value, Mapping):
        for v in value.values():
            _drain(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _drain(v)


def type_problems(tp: Any, value: Any, where: str, name: str) -> list[str]:
    """Pydantic's verdict on `value` as `tp`, lazy iterables included."""
    try:
        _drain(_adapter(tp).validate_python(value))
    except ValidationError as e:
        errors = e.errors()
        # A union reports every member; the ones whose literal (role/type) did not fit are noise.
        misfits = {err["loc"][:-1] for err in errors if err["type"] == "literal_error"}
        errors = [err for err in errors if not any(err["loc"][: len(p)] == p for p in misfits)] or errors
        lines = [f"{'.'.join(map(str, err['loc']))}: {err['msg']}" for err in errors[:6]]
        return [f"{where}: not a valid {name}: " + "; ".join(lines)]
    return []


# --- unknown keys ---------------------------------------------------------------


def _strip(tp: Any) -> Any:
    while get_origin(tp) in (Annotated, Required, NotRequired):
        tp = get_args(tp)[0]
    return tp


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def _leaves(tp: Any) -> list[Any]:
    """The members of a (nested, annotated) union."""
    tp = _strip(tp)
    if _is_union(tp):
        return [leaf for arg in get_args(tp) for leaf in _leaves(arg)]
    return [tp]


@functools.cache
def _hints(td: Any) -> dict[str, Any]:
    return get_type_hints(td)


def _keys(td: Any) -> frozenset[str]:
    return frozenset(td.__required_keys__) | frozenset(td.__optional_keys__)


def _literal_fits(td: Any, value: Mapping[str, Any]) -> bool:
    """Whether `value`'s discriminating fields (`role`, `type`, ...: the
    Literal-typed ones) fit TypedDict `td`."""
    for key, hint in _hints(td).items():
        hint = _strip(hint)
        if get_origin(hint) is not Literal:
            continue
        if key in value:
            if value[key] not in get_args(hint):
                return False
        elif key in td.__required_keys__:
            return False
    return True


def _is_mapping_type(tp: Any) -> bool:
    return tp in (dict, Mapping, object, Any) or get_origin(tp) in (dict, Mapping)


def _is_sequence_type(tp: Any) -> bool:
    from collections import abc

    return get_origin(tp) in (list, tuple, abc.Iterable, abc.Sequence, abc.Collection)


def unknown_keys(tp: Any, value: Any, where: str = "value") -> list[str]:
    """Every key of `value` (nested dicts included) that the TypedDict it
    is checked against does not declare. Type mismatches are pydantic's to
    report; here a dict only has to match some member of a union by its
    Literal fields."""
    tp = _strip(tp)
    if _is_union(tp):
        candidates = [t for t in _leaves(tp) if _applies(t, value)]
        if isinstance(value, Mapping) and not candidates:
            return [f"{where}: matches no request type of the union by its literal fields (role/type)"]
        found = [unknown_keys(t, value, where) for t in candidates]
        return [] if not found or any(not f for f in found) else min(found, key=len)
    if is_typeddict(tp):
        if not isinstance(value, Mapping):
            return []
        hints = _hints(tp)
        problems = [f"{where}: unknown key {k!r} (not in {tp.__name__})" for k in value if k not in _keys(tp)]
        for k, v in value.items():
            if k in hints:
                problems += unknown_keys(hints[k], v, f"{where}.{k}")
        return problems
    if _is_sequence_type(tp) and isinstance(value, (list, tuple)):
        args = get_args(tp)
        if not args:
            return []
        return [p for j, v in enumerate(value) for p in unknown_keys(args[0], v, f"{where}[{j}]")]
    return []


def _applies(tp: Any, value: Any) -> bool:
    if isinstance(value, Mapping):
        return (is_typeddict(tp) and _literal_fits(tp, value)) or _is_mapping_type(tp)
    if isinstance(value, (list, tuple)):
        return _is_sequence_type(tp)
    return not is_typeddict(tp) and not _is_sequence_type(tp)


# --- OpenAI ---------------------------------------------------------------------


def openai_problems(messages: Any, allow_keys: Sequence[str] = ()) -> list[str]:
    """Problems of `messages` as the `messages` of an OpenAI chat completion
    request: each a `ChatCompletionMessageParam` with no key it does not
    declare (`allow_keys` are removed first: ctxfold's metadata on input),
    an assistant message has content or tool calls (a `tool_calls` list is
    never empty), tool call ids are unique, and the tool messages right
    after an assistant message answer each of its calls exactly once."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        return [f"messages: expected a list, got {type(messages).__name__}"]
    problems: list[str] = []
    pending: dict[str, int] = {}
    call_ids: set[str] = set()
    for i, raw in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(raw, Mapping):
            problems.append(f"{where}: expected a dict, got {type(raw).__name__}")
            continue
        m = {k: v for k, v in raw.items() if k not in allow_keys}
        problems += type_problems(OPENAI_MESSAGE, m, where, "ChatCompletionMessageParam")
        problems += unknown_keys(OPENAI_MESSAGE, m, where)
        role = m.get("role")
        if pending and role != "tool":
            problems.append(f"{where}: tool calls {sorted(pending)} of messages[{min(pending.values())}] are not answered by the tool messages right after it")
            pending = {}
        if role == "assistant":
            calls = m.get("tool_calls")
            if calls is not None and (not isinstance(calls, list) or not calls):
                problems.append(f"{where}: 'tool_calls' must be a non-empty list (leave it out instead)")
            if m.get("content") is None and not calls:
                problems.append(f"{where}: an assistant message needs content or tool_calls")
            for c in calls or ():
                cid = c.get("id") if isinstance(c, Mapping) else None
                if not isinstance(cid, str):
                    continue
                if cid in call_ids:
                    problems.append(f"{where}: tool call id {cid!r} is used twice")
                call_ids.add(cid)
                pending[cid] = i
        elif role == "tool":
            cid = m.get("tool_call_id")
            if cid in pending:
                del pending[cid]
            else:
                problems.append(f"{where}: tool message for {cid!r} answers no open call of the assistant message right before")
    if pending:
        problems.append(f"messages: tool calls {sorted(pending)} are never answered")
    return problems


# --- Anthropic ------------------------------------------------------------------


def _blank(text: Any) -> bool:
    return not isinstance(text, str) or not text.strip()


def _block_problems(block: Any, role: str, where: str, tool_use_ids: set[str]) -> list[str]:
    if not isinstance(block, Mapping):
        return [f"{where}: a content block must be a dict"]
    kind = block.get("type")
    problems: list[str] = []
    if kind == "text":
        if _blank(block.get("text")):
            problems.append(f"{where}: empty or whitespace-only text block (Anthropic rejects it)")
    elif kind == "tool_use":
        if role != "assistant":
            problems.append(f"{where}: tool_use in a {role} message")
        tid = block.get("id")
        if not isinstance(tid, str) or not TOOL_USE_ID.fullmatch(tid):
            problems.append(f"{where}: tool_use id {tid!r} does not match ^[a-zA-Z0-9_-]+$")
        elif tid in tool_use_ids:
            problems.append(f"{where}: tool_use id {tid!r} is used twice")
        tool_use_ids.add(str(tid))
        if not isinstance(block.get("input"), dict):
            problems.append(f"{where}: tool_use input must be a dict, got {type(block.get('input')).__name__}")
    elif kind == "tool_result":
        if role != "user":
            problems.append(f"{where}: tool_result in a {role} message")
        if "content" in block:
            content = block["content"]
            if isinstance(content, str):
                if not content.strip():
                    problems.append(f"{where}: empty tool_result content (leave 'content' out instead)")
            elif not isinstance(content, list):
                problems.append(f"{where}: tool_result content must be a str or a list of blocks")
            elif not content:
                problems.append(f"{where}: empty tool_result content list")
            else:
                for j, inner in enumerate(content):
                    if isinstance(inner, Mapping) and inner.get("type") == "text" and _blank(inner.get("text")):
                        problems.append(f"{where}.content[{j}]: empty or whitespace-only text block")
    return problems


def anthropic_problems(system: Any, messages: Any, allow_empty: bool = False) -> list[str]:
    """Problems of (`system`, `messages`) as an Anthropic Messages request:
    `system` a non-blank str or None; each message a `MessageParam` with no
    undeclared key; roles strictly alternating user/assistant from user;
    no empty content and no empty or whitespace-only text block; tool_use
    ids valid and unique, tool_use only from the assistant; every tool_use
    answered exactly once by a tool_result in the very next (user) message,
    whose tool_result blocks come before any other block, and no tool_result
    answering anything else; a final assistant message does not end in
    whitespace. `allow_empty` accepts an empty message list."""
    problems: list[str] = []
    if system is not None and not isinstance(system, str):
        problems.append(f"system: expected str or None, got {type(system).__name__}")
    elif isinstance(system, str) and not system.strip():
        problems.append("system: blank system prompt (use None)")
    if isinstance(messages, (str, bytes)) or not isinstance(messages, list):
        return problems + [f"messages: expected a list, got {type(messages).__name__}"]
    if not messages and not allow_empty:
        problems.append("messages: empty (Anthropic needs at least one message)")
    previous_role = None
    pending: set[str] = set()
    tool_use_ids: set[str] = set()
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(m, Mapping):
            problems.append(f"{where}: expected a dict, got {type(m).__name__}")
            continue
        problems += type_problems(ANTHROPIC_MESSAGE, m, where, "MessageParam")
        problems += unknown_keys(ANTHROPIC_MESSAGE, m, where)
        role = m.get("role")
        if role not in ("user", "assistant"):
            problems.append(f"{where}: role {role!r}; the conversation holds user and assistant turns only")
        if i == 0 and role != "user":
            problems.append(f"{where}: the first message must be the user's, got {role!r}")
        if role == previous_role:
            problems.append(f"{where}: two {role} messages in a row (roles must alternate)")
        previous_role = role
        content = m.get("content")
        blocks: list[Any] = []
        if isinstance(content, str):
            if not content.strip():
                problems.append(f"{where}: empty or whitespace-only content")
        elif isinstance(content, list):
            if not content:
                problems.append(f"{where}: empty content list")
            blocks = content
        for j, block in enumerate(blocks):
            problems += _block_problems(block, str(role), f"{where}.content[{j}]", tool_use_ids)
        kinds = [b.get("type") if isinstance(b, Mapping) else None for b in blocks]
        if role == "user":
            answered = [b.get("tool_use_id") for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_result"]
            first_other = next((j for j, k in enumerate(kinds) if k != "tool_result"), len(kinds))
            if "tool_result" in kinds[first_other:]:
                problems.append(f"{where}: a tool_result block comes after another kind of block (tool results go first)")
            for tid in answered:
                if tid not in pending:
                    problems.append(f"{where}: tool_result for {tid!r} answers no tool_use of the assistant message right before (or answers it twice)")
                pending.discard(tid)
            if pending:
                problems.append(f"{where}: tool_use ids {sorted(pending)} of the previous message have no tool_result here")
            pending = set()
        elif role == "assistant":
            if pending:
                problems.append(f"{where}: tool_use ids {sorted(pending)} are not answered by the next user message")
            pending = {b.get("id") for b in blocks if isinstance(b, Mapping) and b.get("type") == "tool_use"}
    if pending:
        problems.append(f"messages: tool_use ids {sorted(pending)} of the last message are never answered")
    if messages and isinstance(messages[-1], Mapping) and messages[-1].get("role") == "assistant":
        content = messages[-1].get("content")
        last = content if isinstance(content, str) else (content[-1].get("text") if content and isinstance(content[-1], Mapping) and content[-1].get("type") == "text" else None)
        if isinstance(last, str) and last != last.rstrip():
            problems.append("messages[-1]: a final assistant message cannot end in whitespace")
    return problems


def assert_openai(messages: Any, allow_keys: Sequence[str] = ()) -> None:
    problems = openai_problems(messages, allow_keys)
    assert not problems, "not a valid OpenAI request:\n  " + "\n  ".join(problems)


def assert_anthropic(system: Any, messages: Any, allow_empty: bool = False) -> None:
    problems = anthropic_problems(system, messages, allow_empty)
    assert not problems, "not a valid Anthropic request:\n  " + "\n  ".join(problems)
