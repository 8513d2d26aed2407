"""Anthropic SDK: fit `messages` (and `system`) into a token budget and get
them back as `client.messages.create` takes them::

    from ctxfold.integrations.anthropic import fit_messages

    system, messages = fit_messages(history, system=SYSTEM, budget=8000)
    client.messages.create(model=..., max_tokens=1024, system=system, messages=messages)

What comes back:

- Blocks kept verbatim are the caller's own block objects (text, images,
  documents, `tool_use`, `tool_result`, thinking, server tool blocks; dicts or
  the SDK's response objects alike); a message left whole keeps its string
  content.
- A shortened text becomes one text block; a shortened tool result a
  `tool_result` block for the same `tool_use_id` (``is_error`` kept). A
  `tool_use` is kept or dropped with its `tool_result`, never apart. The
  engine's chunk summaries and gap markers are text blocks in user turns.
- `cache_control` stays on the blocks that survive. When a marked block is
  shortened its replacement carries the marker; when it is dropped, the
  marker moves to the last kept block before it (the cached prefix ends
  where it ended, minus what was removed), or to the last system block when
  nothing before it is left and `system` is a list of blocks.
- `system` comes back in the form it was given (str or a list of text
  blocks); it is counted in the budget and never shortened.
- Roles alternate from a user turn, and tool results open the user turn
  after their calls, as the Messages API requires.

Counting is the engine's (OpenAI's accounting with the `model=` or
`encoding=` tokenizer, o200k_base by default, which runs close to Claude's
for English text); images count 85 tokens; thinking blocks are not counted
(the API drops earlier turns' thinking from the prompt); documents and
server tool blocks count as their text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from ctxfold.adapters import CONTINUATION
from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.tokens import REPLY_PRIMING
from ctxfold.integrations._common import (
    Fitted,
    Fitter,
    assign_ids,
    fit_dicts,
    parts_content,
    require,
    tool_call,
    tool_call_arguments,
)

require("anthropic", "anthropic", "ctxfold.integrations.anthropic")

__all__ = ["fit_messages", "MessageFitter"]

_THINKING = ("thinking", "redacted_thinking")
Position = tuple[int, int]
_SYSTEM = -1


def _read(block: Any, where: str) -> Mapping[str, Any]:
    """A block's fields, whether a dict or one of the SDK's objects."""
    if isinstance(block, Mapping):
        return block
    dump = getattr(block, "model_dump", None)
    if callable(dump):
        return dump(exclude_none=True)  # type: ignore[no-any-return]
    raise InvalidTypeError(f"{where}: expected a content block (a dict), got {type(block).__name__}")


class _Unit(NamedTuple):
    """One engine message: the blocks of one message it stands for."""

    kind: str
    """system, user, assistant or tool."""
    position: int
    """The message's index (-1: the system prompt)."""
    blocks: list[int]
    """Indices of its blocks in the message's content (0 for string content)."""
    message: dict[str, Any]


def _text_parts(blocks: Sequence[tuple[int, Mapping[str, Any]]]) -> Any:
    """Text as one string (what the engine can summarise) unless an image is
    among the blocks."""
    parts: list[dict[str, Any]] = []
    for _, b in blocks:
        kind = b.get("type")
        if kind == "text":
            parts.append({"type": "text", "text": str(b.get("text") or "")})
        elif kind == "image":
            parts.append({"type": "image_url", "image_url": {"url": "image"}})
        elif kind in _THINKING or kind == "tool_use":
            continue
        else:
            parts.append({"type": "text", "text": _block_text(b)})
    return parts_content(parts)


def _block_text(block: Mapping[str, Any]) -> str:
    """The text a document, search result or server tool block counts as."""
    kind = block.get("type")
    if kind == "document":
        source = block.get("source")
        data = source.get("data") if isinstance(source, Mapping) and source.get("type") == "text" else None
        words = [str(block.get(k)) for k in ("title", "context") if block.get(k)]
        head = f"[document: {words[0]}]" if words else "[document]"
        return "\n".join([head, *words[1:], *([data] if isinstance(data, str) else [])])
    if kind == "search_result":
        inner = block.get("content")
        texts = [str(c.get("text", "")) for c in inner if isinstance(c, Mapping)] if isinstance(inner, list) else []
        return "\n".join([f"[search result: {block.get('title', '')}]", *texts])
    return json.dumps(dict(block), ensure_ascii=False, default=str)


def _result_text(content: Any) -> Any:
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, Sequence):
        return _text_parts([(j, _read(c, "tool_result content")) for j, c in enumerate(content)])
    return str(content)


def _units(messages: Sequence[Any]) -> list[_Unit]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidTypeError(f"messages: expected a list of message dicts, got {type(messages).__name__}")
    units: list[_Unit] = []
    for k, m in enumerate(messages):
        where = f"messages[{k}]"
        if not isinstance(m, Mapping):
            raise InvalidTypeError(f"{where}: expected a dict with 'role' and 'content', got {type(m).__name__}")
        role, content = m.get("role"), m.get("content")
        if role not in ("user", "assistant"):
            raise InvalidInputError(
                f"{where}: role {role!r}; Anthropic messages are 'user' or 'assistant' (the system prompt goes in system=)"
            )
        if isinstance(content, str):
            units.append(_Unit(role, k, [0], {"role": role, "content": content}))
            continue
        if isinstance(content, (bytes, Mapping)) or not isinstance(content, Sequence):
            raise InvalidTypeError(
                f"{where}['content']: expected a str or a list of content blocks, got {type(content).__name__}"
            )
        blocks = [(j, _read(b, f"{where}['content'][{j}]")) for j, b in enumerate(content)]
        if role == "assistant":
            calls = [
                tool_call(str(b.get("id")), str(b.get("name", "")),
                          json.dumps(b.get("input", {}), ensure_ascii=False, default=str))
                for _, b in blocks if b.get("type") == "tool_use"
            ]
            text = _text_parts(blocks)
            message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
            if calls:
                message["tool_calls"] = calls
            units.append(_Unit("assistant", k, [j for j, _ in blocks], message))
            continue
        rest = [(j, b) for j, b in blocks if b.get("type") != "tool_result"]
        for j, b in blocks:
            if b.get("type") == "tool_result":
                tool_use_id = b.get("tool_use_id")
                if not isinstance(tool_use_id, str):
                    raise InvalidInputError(f"{where}['content'][{j}]: a tool_result needs the 'tool_use_id' of its tool_use")
                result = {"role": "tool", "tool_call_id": tool_use_id, "content": _result_text(b.get("content"))}
                units.append(_Unit("tool", k, [j], result))
        if rest:
            units.append(_Unit("user", k, [j for j, _ in rest], {"role": "user", "content": _text_parts(rest)}))
    return units


class _Piece(NamedTuple):
    """One output block: the block, the input position it stands at, and
    whether it is the caller's block verbatim."""

    block: Any
    origin: Position | None
    verbatim: bool
    replaces: tuple[Position, ...] = ()
    whole: str | None = None
    """The message's string content, when the piece is a whole string message."""


def _cache_control(block: Mapping[str, Any]) -> Any:
    cc = block.get("cache_control")
    if cc is None and block.get("type") == "tool_result" and isinstance(block.get("content"), list):
        for inner in block["content"]:
            inner = inner if isinstance(inner, Mapping) else _read(inner, "tool_result content")
            if inner.get("cache_control") is not None:
                cc = inner["cache_control"]
    return cc


class MessageFitter(Fitter):
    """Fits Anthropic messages, keeping the engine and the last result:

        fitter = MessageFitter(budget=8000)
        system, messages = fitter.fit(history, system=SYSTEM)
        print(fitter.last_result.report.to_text())

    `budget` defaults to the engine's `config.budget`; `model=`/`encoding=`
    pick the tokenizer (or pass `engine=`, a `ctxfold.ContextEngine`);
    `query` is what the next answer is about (default: the last user text).
    """

    def __init__(
        self,
        budget: int | None = None,
        *,
        model: str | None = None,
        encoding: str | None = None,
        engine: Any = None,
        query: str | None = None,
    ) -> None:
        super().__init__(budget, model, encoding, engine, query)

    def fit(self, messages: Sequence[Any], system: Any = None) -> tuple[Any, list[dict[str, Any]]]:
        """``(system, messages)`` fitted into the budget (see the module's docstring)."""
        units = _units(messages)
        system_blocks = _system_blocks(system)
        if system_blocks is not None:
            text = "\n\n".join(str(b.get("text", "")) for b in system_blocks)
            if text.strip():
                units.insert(0, _Unit("system", _SYSTEM, [], {"role": "system", "content": text}))
        if not units:
            return system, []
        dicts = [dict(u.message) for u in units]
        assign_ids(dicts, [None] * len(dicts))
        result, fitted = fit_dicts(self.engine, dicts, self.budget, self.query)
        pieces = [p for f in fitted for p in _pieces(f, units, messages)]
        budget = result.report.budget
        opening = self.engine.count([{"role": "user", "content": CONTINUATION}]) - REPLY_PRIMING
        if pieces and pieces[0][0] == "assistant" and result.tokens + opening > budget:
            # The user turn that must open the conversation has to fit too.
            result, fitted = fit_dicts(self.engine, dicts, budget - opening, self.query)
            pieces = [p for f in fitted for p in _pieces(f, units, messages)]
        self.last_result = result
        turns = _turns(pieces)
        system = _relocate(messages, turns, system, system_blocks)
        return system, [_finish(t) for t in turns]


def _system_blocks(system: Any) -> list[Mapping[str, Any]] | None:
    if system is None:
        return None
    if isinstance(system, str):
        return [{"type": "text", "text": system}]
    if isinstance(system, (bytes, Mapping)) or not isinstance(system, Sequence):
        raise InvalidTypeError(f"system: expected a str or a list of text blocks, got {type(system).__name__}")
    blocks = [_read(b, f"system[{j}]") for j, b in enumerate(system)]
    for j, b in enumerate(blocks):
        if b.get("type") != "text":
            raise InvalidInputError(f"system[{j}]: the system prompt takes text blocks, got a {b.get('type')!r} block")
    return blocks


def _pieces(f: Fitted, units: list[_Unit], messages: Sequence[Any]) -> list[tuple[str, _Piece]]:
    """The output blocks of one engine message, each with its turn's side."""
    if f.source is None:
        return _new_pieces(f.message)
    unit = units[f.source]
    if unit.kind == "system":
        return []
    side = "assistant" if unit.kind == "assistant" else "user"
    content = messages[unit.position]["content"]
    if f.status == "kept":
        if isinstance(content, str):
            return [(side, _Piece({"type": "text", "text": content}, (unit.position, 0), True, whole=content))]
        return [(side, _Piece(content[j], (unit.position, j), True)) for j in unit.blocks]
    new = f.message.get("content")
    # Stripped: a final assistant turn may not end in whitespace.
    text = new.strip() if isinstance(new, str) else ""
    replaced = tuple((unit.position, j) for j in unit.blocks)
    at = replaced[-1]
    if unit.kind == "tool":
        original = _read(content[unit.blocks[0]], "tool_result")
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": original["tool_use_id"]}
        if text.strip():
            block["content"] = text
        if original.get("is_error") is not None:
            block["is_error"] = original["is_error"]
        return [("user", _Piece(block, at, False, replaced))]
    out: list[tuple[str, _Piece]] = []
    uses = [] if isinstance(content, str) else [j for j in unit.blocks if _read(content[j], "block").get("type") == "tool_use"]
    if text.strip():
        text_replaces = tuple(p for p in replaced if p[1] not in uses)
        origin = text_replaces[0] if text_replaces else at
        out.append((side, _Piece({"type": "text", "text": text}, origin, False, text_replaces)))
    out += [(side, _Piece(content[j], (unit.position, j), True)) for j in uses]
    return out


def _new_pieces(message: Mapping[str, Any]) -> list[tuple[str, _Piece]]:
    """Blocks for a message the engine wrote (a summary or gap marker, or a
    stand-in result for an unanswered call)."""
    content = message.get("content")
    text = content.strip() if isinstance(content, str) else ""
    role = message.get("role")
    if role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": str(message.get("tool_call_id"))}
        if text.strip():
            block["content"] = text
        return [("user", _Piece(block, None, False))]
    side = "assistant" if role == "assistant" else "user"
    out = [(side, _Piece({"type": "text", "text": text}, None, False))] if text.strip() else []
    for call in message.get("tool_calls") or ():
        name, args = tool_call_arguments(call)
        use = {"type": "tool_use", "id": call.get("id"), "name": name, "input": args}
        out.append(("assistant", _Piece(use, None, False)))
    return out


def _turns(pieces: list[tuple[str, _Piece]]) -> list[dict[str, Any]]:
    """Alternating turns from the pieces in order; tool results first in their user turn."""
    turns: list[dict[str, Any]] = []
    for side, piece in pieces:
        if not turns or turns[-1]["role"] != side:
            turns.append({"role": side, "pieces": []})
        group = turns[-1]["pieces"]
        if _type(piece.block) == "tool_result":
            group.insert(next((i for i, p in enumerate(group) if _type(p.block) != "tool_result"), len(group)), piece)
        else:
            group.append(piece)
    if turns and turns[0]["role"] == "assistant":
        turns.insert(0, {"role": "user", "pieces": [_Piece({"type": "text", "text": CONTINUATION}, None, False)]})
    return turns


def _type(block: Any) -> Any:
    return block.get("type") if isinstance(block, Mapping) else getattr(block, "type", None)


def _relocate(messages: Sequence[Any], turns: list[dict[str, Any]], system: Any, system_blocks: Any) -> Any:
    """Move each `cache_control` of a block that is not in the output
    verbatim to the block that now ends its prefix; returns `system`
    (a new list when a marker moved onto it)."""
    present = {p.origin for t in turns for p in t["pieces"] if p.verbatim}
    marks: list[tuple[Position, Any]] = []
    for k, m in enumerate(messages):
        content = m["content"]
        if isinstance(content, str):
            continue
        for j, block in enumerate(content):
            cc = _cache_control(_read(block, f"messages[{k}]['content'][{j}]"))
            if cc is not None and (k, j) not in present:
                marks.append(((k, j), cc))
    for position, cc in marks:
        host = _replacement(turns, position) or _before(turns, position)
        if host is not None:
            t, i = host
            t["pieces"][i] = _with_cache_control(t["pieces"][i], cc)
        elif isinstance(system, list) and system:
            last = dict(system_blocks[-1])
            last["cache_control"] = cc
            system = [*system[:-1], last]
    return system


def _replacement(turns: list[dict[str, Any]], position: Position) -> tuple[dict[str, Any], int] | None:
    for t in turns:
        for i, p in enumerate(t["pieces"]):
            if position in p.replaces:
                return t, i
    return None


def _before(turns: list[dict[str, Any]], position: Position) -> tuple[dict[str, Any], int] | None:
    """The last output block standing before `position` that can carry a marker."""
    best: tuple[Position, dict[str, Any], int] | None = None
    for t in turns:
        for i, p in enumerate(t["pieces"]):
            if p.origin is None or p.origin >= position or _type(p.block) in _THINKING:
                continue
            if best is None or p.origin >= best[0]:
                best = (p.origin, t, i)
    return (best[1], best[2]) if best else None


def _with_cache_control(piece: _Piece, cc: Any) -> _Piece:
    block = dict(_read(piece.block, "block"))
    block["cache_control"] = cc
    return piece._replace(block=block, verbatim=False, whole=None)


def _finish(turn: dict[str, Any]) -> dict[str, Any]:
    pieces = turn["pieces"]
    if len(pieces) == 1 and pieces[0].whole is not None:
        return {"role": turn["role"], "content": pieces[0].whole}
    return {"role": turn["role"], "content": [p.block for p in pieces]}


def fit_messages(
    messages: Sequence[Any],
    *,
    system: Any = None,
    budget: int | None = None,
    model: str | None = None,
    encoding: str | None = None,
    engine: Any = None,
    query: str | None = None,
) -> tuple[Any, list[dict[str, Any]]]:
    """Anthropic `messages` and `system` fitted into `budget` tokens, as
    ``(system, messages)`` for `client.messages.create` (see the module's
    docstring for what is kept and where `cache_control` goes).

    Example::

        system, messages = fit_messages(history, system="You are terse.", budget=8000)
        client.messages.create(model=MODEL, max_tokens=1024, system=system, messages=messages)

    `MessageFitter` does the same and keeps the engine's last result.
    """
    return MessageFitter(budget, model=model, encoding=encoding, engine=engine, query=query).fit(messages, system)
