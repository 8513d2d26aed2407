"""Anthropic-style messages in and out: content blocks (`text`, `tool_use`,
`tool_result`) become OpenAI-style messages (assistant `tool_calls`, `tool`
messages), so the rest of the engine sees one format."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ctxfold.errors import InvalidInputError, InvalidTypeError

__all__ = ["is_anthropic", "from_anthropic", "split_anthropic", "to_anthropic"]

_BLOCK_TYPES = {"tool_use", "tool_result"}
_META_KEYS = ("id", "timestamp", "importance", "pinned", "kind")


def _blocks(message: Any) -> list[Mapping[str, Any]]:
    content = message.get("content") if isinstance(message, Mapping) else None
    if isinstance(content, Sequence) and not isinstance(content, str):
        return [b for b in content if isinstance(b, Mapping)]
    return []


def is_anthropic(messages: Sequence[Any]) -> bool:
    """True when any message carries `tool_use` or `tool_result` blocks."""
    return any(b.get("type") in _BLOCK_TYPES for m in messages for b in _blocks(m))


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, Mapping) and b.get("type") == "text")
    return ""


def from_anthropic(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """OpenAI-style messages for Anthropic-style ones (metadata keys kept;
    a message split into several gets ids `<id>`, `<id>.1`, ...)."""
    return split_anthropic(messages)[0]


def split_anthropic(messages: Sequence[Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    """`from_anthropic(messages)` and, for each message it returns, the
    caller's message it came from (what `restore` gives back)."""
    out: list[dict[str, Any]] = []
    sources: list[Any] = []
    for message in messages:
        blocks = _blocks(message)
        if not any(b.get("type") in _BLOCK_TYPES for b in blocks):
            out.append(dict(message))
            sources.append(message)
            continue
        meta = {k: message[k] for k in _META_KEYS if k in message}
        converted = _convert(message["role"], blocks)
        for j, m in enumerate(converted):
            m.update(meta)
            if "id" in meta and j:
                m["id"] = f"{meta['id']}.{j}"
            out.append(m)
            sources.append(message)
    return out, sources


def _convert(role: str, blocks: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    text = "\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    if role == "assistant":
        calls = [
            {
                "id": str(b.get("id")),
                "type": "function",
                "function": {"name": str(b.get("name", "")), "arguments": json.dumps(b.get("input", {}), ensure_ascii=False)},
            }
            for b in blocks
            if b.get("type") == "tool_use"
        ]
        return [{"role": "assistant", "content": text or None, "tool_calls": calls}]
    results = [
        {"role": "tool", "tool_call_id": str(b.get("tool_use_id")), "content": _text_of(b.get("content"))}
        for b in blocks
        if b.get("type") == "tool_result"
    ]
    return results + ([{"role": role, "content": text}] if text else [])


#: The opening user turn when what is left of a conversation starts with the
#: assistant (Anthropic's first message must be the user's): neutral, short,
#: and plainly not something the user said.
CONTINUATION = "(conversation continues)"
_SYSTEM_ROLES = ("system", "developer")
_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
_DATA_URL = re.compile(r"data:([^;,]+);base64,(.*)", re.DOTALL)
#: The system messages the engine writes into the conversation (a chunk
#: summary, a gap marker): part of the history even right after the system prompt.
_ENGINE_MARKER = re.compile(r"\[(?:level-\d+ summary of \d+ messages, |\.\.\. \d+ messages omitted \.\.\.\])")


def to_anthropic(
    messages: Sequence[Mapping[str, Any]], *, cache_breakpoint: int | None = None
) -> tuple[str | None, list[dict[str, Any]]]:
    """(system, messages) for Anthropic's Messages API from OpenAI-style messages.

    - `system`: the leading system/developer messages, joined by a blank
      line (None when there are none or they are blank). A system message
      later in the conversation stays where it is, as a text block of the
      user turn at that position; so do the engine's chunk summaries
      (``[level-1 summary of ...``) and gap markers (``[... 3 messages
      omitted ...]``) even right after the system prompt, since they stand
      for conversation.
    - Turns alternate user/assistant: consecutive messages of one side are
      merged into one turn. When the conversation would start with the
      assistant, a user turn reading `CONTINUATION` opens it.
    - Every content is a list of blocks. Assistant tool calls become
      `tool_use` blocks after the assistant's text (none for a `None` or
      blank content); their arguments become the `input` dict (arguments
      that are not a JSON object: ``{"arguments": <the string>}``). Tool
      messages become `tool_result` blocks at the front of the next user
      turn, ahead of its text; an empty result leaves `content` out.
    - Empty and whitespace-only texts make no block (Anthropic rejects
      them), so a message with neither text nor tool calls adds nothing,
      and a conversation with nothing else gives an empty list (add the
      user's turn before sending). A final assistant turn loses its
      trailing whitespace (Anthropic rejects it).
    - Tool call ids outside ``[A-Za-z0-9_-]`` (Anthropic's id alphabet) get
      those characters replaced by ``_``; an id used again by a later call
      gets a ``_<n>`` suffix, so every tool_use id is unique; each result
      follows its call's new id.
    - Only Anthropic's keys come out: `name`, ctxfold's metadata (`id`,
      `pinned`, ...) and anything else are left out. User images (`image_url`
      parts, http(s) or base64 data URLs) become `image` blocks.
    - `cache_breakpoint` (a `ContextResult.cache_breakpoint`): the last block
      made from that message, or from the nearest one before it that makes a
      block, gets ``cache_control: {"type": "ephemeral"}``, so Anthropic caches
      the prompt up to there (nothing is marked when it falls in the leading
      system messages).

    Raises `InvalidInputError` for what no valid Anthropic request can hold:
    a tool call answered by no tool message before the next assistant
    message, a tool message answering no open call of the last assistant
    message, a role other than system/developer/user/assistant/tool, and
    content parts with no Anthropic equivalent (audio, files).
    """
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidTypeError(f"messages: expected a list of message dicts, got {type(messages).__name__}")
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise InvalidTypeError(f"messages[{i}]: expected a dict, got {type(m).__name__}")
    head = next((i for i, m in enumerate(messages) if m.get("role") not in _SYSTEM_ROLES or _is_marker(m)), len(messages))
    prompts = [_joined_text(m.get("content"), f"messages[{i}]") for i, m in enumerate(messages[:head])]
    system = "\n\n".join(p for p in prompts if p.strip())
    if cache_breakpoint is not None and (
        isinstance(cache_breakpoint, bool) or not isinstance(cache_breakpoint, int)
        or not 0 <= cache_breakpoint < len(messages)
    ):
        raise InvalidInputError(
            f"cache_breakpoint: must be an index into messages (0 to {len(messages) - 1}) or None, got {cache_breakpoint!r}"
        )
    turns: list[dict[str, Any]] = []
    marked: dict[str, Any] | None = None
    ids = _ToolIds()
    # The open calls of the last assistant turn: caller's id -> (tool_use id, index of its message).
    pending: dict[str, tuple[str, int]] = {}
    for i in range(head, len(messages)):
        m, where = messages[i], f"messages[{i}]"
        role = m.get("role")
        if role in _SYSTEM_ROLES or role == "user":
            _add_turn(turns, "user", _text_blocks(m.get("content"), where, images=role == "user"))
        elif role == "assistant":
            if m.get("function_call") is not None:
                raise InvalidInputError(f"{where}: 'function_call' (the deprecated form) does not convert; use 'tool_calls'")
            blocks = _text_blocks(m.get("content"), where, images=False)
            calls = m.get("tool_calls") or ()
            if isinstance(calls, (str, bytes)) or not isinstance(calls, Sequence):
                raise InvalidTypeError(f"{where}['tool_calls']: expected a list, got {type(calls).__name__}")
            opened: dict[str, tuple[str, int]] = {}
            for j, call in enumerate(calls):
                block = _tool_use(call, f"{where}['tool_calls'][{j}]", ids)
                if call["id"] in pending or call["id"] in opened:
                    raise InvalidInputError(
                        f"{where}['tool_calls'][{j}]: tool call id {call['id']!r} is already open; give every call its own id"
                    )
                opened[call["id"]] = (block["id"], i)
                blocks.append(block)
            if blocks and pending and turns[-1]["role"] == "user":
                _unanswered(pending)
            pending.update(opened)
            _add_turn(turns, "assistant", blocks)
        elif role == "tool":
            call_id = m.get("tool_call_id")
            if call_id not in pending:
                raise InvalidInputError(
                    f"{where}: tool result for {call_id!r} answers no open tool call of the preceding assistant "
                    "message; put it after the assistant message whose tool_calls has that id, once"
                )
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": pending.pop(call_id)[0]}
            text = _joined_text(m.get("content"), where)
            if text.strip():
                result["content"] = text
            if turns[-1]["role"] != "user":
                turns.append({"role": "user", "content": []})
            blocks = turns[-1]["content"]
            # tool_result blocks go before any text of the turn
            blocks.insert(next((k for k, b in enumerate(blocks) if b["type"] != "tool_result"), len(blocks)), result)
        else:
            raise InvalidInputError(f"{where}: unknown role {role!r}; use system, developer, user, assistant or tool")
        if i == cache_breakpoint and turns:
            marked = _last_block(turns[-1], role)
    if pending:
        _unanswered(pending)
    if marked is not None:
        marked["cache_control"] = {"type": "ephemeral"}
    if turns and turns[-1]["role"] == "assistant" and turns[-1]["content"][-1]["type"] == "text":
        last = turns[-1]["content"][-1]
        last["text"] = last["text"].rstrip()
    if turns and turns[0]["role"] == "assistant":
        turns.insert(0, {"role": "user", "content": [{"type": "text", "text": CONTINUATION}]})
    return (system or None), turns


def _last_block(turn: dict[str, Any], role: Any) -> dict[str, Any] | None:
    """The block a message just added ends with: for a tool result, the last
    tool_result (text of the turn comes after them); else the turn's last block."""
    blocks = turn["content"]
    if role == "tool":
        return next((b for b in reversed(blocks) if b["type"] == "tool_result"), None)
    return blocks[-1] if blocks else None


def _is_marker(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, str) and _ENGINE_MARKER.match(content) is not None


def _add_turn(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    """Append `blocks` as a `role` turn, merged into the last turn when it is `role`'s too."""
    if not blocks:
        return
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(blocks)
    else:
        turns.append({"role": role, "content": blocks})


def _unanswered(pending: Mapping[str, tuple[str, int]]) -> None:
    call_id, (_, i) = next(iter(pending.items()))
    raise InvalidInputError(
        f"messages[{i}]: tool call {call_id!r} has no tool message answering it before the next assistant "
        f"message; add {{'role': 'tool', 'tool_call_id': {call_id!r}, 'content': ...}} after it "
        "(Anthropic needs every tool_use answered in the next user turn)"
    )


def _text_blocks(content: Any, where: str, images: bool) -> list[dict[str, Any]]:
    """The content blocks of a message's `content`, blank texts left out."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    if not isinstance(content, Sequence):
        raise InvalidTypeError(f"{where}['content']: expected a str, a list of parts or None, got {type(content).__name__}")
    blocks: list[dict[str, Any]] = []
    for j, part in enumerate(content):
        at = f"{where}['content'][{j}]"
        if not isinstance(part, Mapping):
            raise InvalidTypeError(f"{at}: expected a content part dict, got {type(part).__name__}")
        kind = part.get("type")
        if kind in ("text", "refusal"):
            text = part.get(kind)
            if not isinstance(text, str):
                raise InvalidTypeError(f"{at}[{kind!r}]: expected str, got {type(text).__name__}")
            if text.strip():
                blocks.append({"type": "text", "text": text})
        elif kind == "image_url" and images:
            blocks.append(_image(part.get("image_url"), at))
        else:
            raise InvalidInputError(
                f"{at}: a {kind!r} part has no Anthropic equivalent here; use text parts (and image_url in user messages)"
            )
    return blocks


def _joined_text(content: Any, where: str) -> str:
    """A content's text parts as one string (system prompts, tool results)."""
    return "\n".join(b["text"] for b in _text_blocks(content, where, images=False))


def _image(image_url: Any, where: str) -> dict[str, Any]:
    url = image_url.get("url") if isinstance(image_url, Mapping) else image_url
    if not isinstance(url, str) or not url:
        raise InvalidInputError(f"{where}['image_url']: needs a 'url' (http(s) or a base64 data URL)")
    data = _DATA_URL.fullmatch(url)
    if data is None:
        if url.startswith("data:"):
            raise InvalidInputError(f"{where}['image_url']: a data URL must be base64 ('data:image/png;base64,...')")
        return {"type": "image", "source": {"type": "url", "url": url}}
    if data.group(1) not in _IMAGE_TYPES:
        raise InvalidInputError(
            f"{where}['image_url']: Anthropic takes {', '.join(_IMAGE_TYPES)} images, not {data.group(1)!r}"
        )
    return {"type": "image", "source": {"type": "base64", "media_type": data.group(1), "data": data.group(2)}}


def _tool_use(call: Any, where: str, ids: _ToolIds) -> dict[str, Any]:
    if not isinstance(call, Mapping):
        raise InvalidTypeError(f"{where}: expected a dict, got {type(call).__name__}")
    if not isinstance(call.get("id"), str) or not call["id"]:
        raise InvalidInputError(f"{where}: a tool call needs a non-empty str 'id'")
    if call.get("type", "function") != "function":
        raise InvalidInputError(f"{where}: a {call.get('type')!r} tool call does not convert; only 'function' calls do")
    function = call.get("function")
    name = function.get("name") if isinstance(function, Mapping) else None
    if not isinstance(function, Mapping) or not isinstance(name, str):
        raise InvalidInputError(f"{where}['function']: needs the tool's 'name' (str)")
    return {"type": "tool_use", "id": ids.new(call["id"]), "name": name, "input": _tool_input(function.get("arguments"))}


def _tool_input(arguments: Any) -> dict[str, Any]:
    """Tool call arguments as the dict Anthropic's `input` must be."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    if isinstance(arguments, Mapping):
        return dict(arguments)
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return parsed
    return {"arguments": arguments}


class _ToolIds:
    """Anthropic tool_use ids for the caller's call ids: the same id when it
    is valid and new, otherwise a valid and unused one."""

    _INVALID = re.compile(r"[^A-Za-z0-9_-]")

    def __init__(self) -> None:
        self.used: set[str] = set()

    def new(self, call_id: str) -> str:
        base = self._INVALID.sub("_", call_id)
        candidate, n = base, 1
        while candidate in self.used:
            n += 1
            candidate = f"{base}_{n}"
        self.used.add(candidate)
        return candidate
