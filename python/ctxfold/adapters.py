"""Anthropic-style messages in and out: content blocks (`text`, `tool_use`,
`tool_result`) become OpenAI-style messages (assistant `tool_calls`, `tool`
messages), so the rest of the engine sees one format."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

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


def to_anthropic(messages: Sequence[Mapping[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """(system, messages) in Anthropic's format for OpenAI-style messages:
    tool calls become `tool_use` blocks, tool results `tool_result` blocks in
    a user message."""
    system = "\n\n".join(str(m.get("content") or "") for m in messages if m.get("role") in ("system", "developer"))
    out: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role in ("system", "developer"):
            continue
        if role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.get("tool_call_id"), "content": _text_of(m.get("content"))}
            if out and out[-1]["role"] == "user" and isinstance(out[-1]["content"], list):
                out[-1]["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
            continue
        blocks: list[dict[str, Any]] = []
        if _text_of(m.get("content")):
            blocks.append({"type": "text", "text": _text_of(m.get("content"))})
        for call in m.get("tool_calls") or ():
            function = call.get("function", {})
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except json.JSONDecodeError:
                arguments = {"arguments": function.get("arguments")}
            blocks.append({"type": "tool_use", "id": call.get("id"), "name": function.get("name"), "input": arguments})
        out.append({"role": role, "content": blocks})
    return (system or None), out
