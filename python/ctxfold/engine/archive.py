"""Where the originals of removed messages go, and how a model gets them back.

`Archive`: every message `ContextEngine.optimize` summarises, clears or drops,
kept as the caller passed it, in memory up to a bound in bytes (least
recently archived or restored first out) and, with a `store`, also in the
store's memo table, so `restore` and `recall` work after eviction and in a
later process.

`recall_tool()`: the schema of a `recall` tool for the OpenAI and Anthropic
APIs; a model that meets an omission note calls it with the note's id and
`ContextEngine.recall(call)` answers with the original content."""

from __future__ import annotations

import copy
import dataclasses
import json
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import msgspec

from ctxfold.engine.cache import ENTRY_OVERHEAD, Lru, approx_bytes, check_bytes
from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.engine.results import Item

__all__ = [
    "Archive", "RecallTool", "recall_tool", "answer_recall", "original_text", "tool_call_names",
    "ARCHIVE_NAMESPACE", "DEFAULT_ARCHIVE_BYTES", "RECALL_TOOL_NAME",
]

#: The default bound of the in-memory archive: the originals of tens of
#: thousands of ordinary messages; a store keeps everything past it.
DEFAULT_ARCHIVE_BYTES = 64 << 20
#: The store memo namespace holding archived originals (delete them with
#: ``store.caches.memo_purge(ARCHIVE_NAMESPACE)``).
ARCHIVE_NAMESPACE = "ctxfold.engine.archive"
RECALL_TOOL_NAME = "recall"

_msgpack_encode = msgspec.msgpack.Encoder().encode


class Archive:
    """Originals by item id: an LRU bounded by `max_bytes` (approximate
    bytes, `approx_bytes`), backed by `caches` when given (anything with
    ``memo_get``/``memo_set``, as the ``caches`` of every `ctxfold.memory` store has).

    A message larger than the whole bound is kept in the store only, in
    `scope` when given (one exact `ctxfold.memory.Scope`). The same id
    archived again with other content replaces the earlier one (ids are meant
    to be unique across the conversations an engine sees)."""

    def __init__(self, max_bytes: int = DEFAULT_ARCHIVE_BYTES, caches: Any = None, scope: Any = None) -> None:
        self._memory: Lru[str, Any] = Lru(check_bytes(max_bytes, "archive_bytes"))
        if caches is not None and not (callable(getattr(caches, "memo_get", None)) and callable(getattr(caches, "memo_set", None))):
            warnings.warn(
                f"store: its caches ({type(caches).__name__}) have no memo_get/memo_set, so removed messages are "
                "archived in memory only (restore fails once they are evicted); use a ctxfold.memory store or add "
                "those two methods",
                stacklevel=3,
            )
            caches = None
        self.caches = caches
        # Only a scoped call passes scope=, so duck-typed caches without the keyword keep working.
        self._scoped: dict[str, Any] = {} if scope is None else {"scope": scope}

    @property
    def max_bytes(self) -> int:
        return self._memory.max_bytes

    @property
    def nbytes(self) -> int:
        """Approximate bytes the in-memory originals take (at most `max_bytes`)."""
        return self._memory.nbytes

    def __len__(self) -> int:
        """How many originals are in memory (the store may hold more)."""
        return len(self._memory)

    def __contains__(self, item_id: object) -> bool:
        return isinstance(item_id, str) and self._find(item_id) is not None

    def put(self, item_id: str, message: Any) -> None:
        self.put_many([(item_id, message)])

    def put_many(self, entries: Iterable[tuple[str, Any]]) -> None:
        """Archive a copy of each message (one store transaction for all the
        new ones); an equal copy archived before is only marked as recent."""
        writes: dict[str, Any] = {}
        for item_id, message in entries:
            known = self._memory.get(item_id)
            if known is not None and known == message:
                continue
            stored = None
            if known is None and self.caches is not None:
                stored = self.caches.memo_get(ARCHIVE_NAMESPACE, item_id, **self._scoped)
            kept = copy.deepcopy(message)
            self._memory.put(item_id, kept, approx_bytes(kept) + approx_bytes(item_id) + ENTRY_OVERHEAD)
            if self.caches is not None and stored != message:
                writes[item_id] = kept
        if writes:
            self._persist(writes)

    def get(self, item_id: str) -> Any | None:
        """A deep copy of the original archived under `item_id`, or None."""
        found = self._find(item_id)
        return None if found is None else copy.deepcopy(found)

    def _find(self, item_id: str) -> Any | None:
        found = self._memory.get(item_id)
        if found is None and self.caches is not None:
            found = self.caches.memo_get(ARCHIVE_NAMESPACE, item_id, **self._scoped)
            if found is not None:
                self._memory.put(item_id, found, approx_bytes(found) + approx_bytes(item_id) + ENTRY_OVERHEAD)
        return found

    def _persist(self, writes: dict[str, Any]) -> None:
        storable: dict[str, Any] = {}
        for item_id, message in writes.items():
            try:
                _msgpack_encode(message)
            except (TypeError, msgspec.EncodeError) as e:
                warnings.warn(
                    f"messages: the original of item {item_id!r} cannot be written to the store ({e}), so it is "
                    "archived in memory only; keep message values to str, numbers, lists, dicts and datetimes",
                    stacklevel=4,
                )
                continue
            storable[item_id] = message
        if not storable:
            return
        set_many = getattr(self.caches, "memo_set_many", None)
        if callable(set_many):
            set_many(ARCHIVE_NAMESPACE, storable, **self._scoped)
        else:
            for item_id, message in storable.items():
                self.caches.memo_set(ARCHIVE_NAMESPACE, item_id, message, **self._scoped)


def tool_call_names(items: Sequence[Item]) -> dict[str, str]:
    """The function name of every tool call in `items`, by call id (what a
    tool result's placeholder names)."""
    names: dict[str, str] = {}
    for it in items:
        for call in it.message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping) and call.get("id") is not None and function.get("name"):
                names[str(call["id"])] = str(function["name"])
    return names


# -- the recall tool -----------------------------------------------------------------

_DESCRIPTION = (
    "Get back the full original content of a message that was omitted from this conversation to save context. "
    "Call it when a note such as \"[... omitted to save context: 812 tokens; recall id m-7f3a9c2e10 with the "
    "recall tool]\" hides something you need, passing the id from the note."
)


@dataclasses.dataclass(frozen=True)
class RecallTool:
    """The `recall` tool in each API's format. Each property returns a new
    dict, so adding keys to one (e.g. Anthropic's ``cache_control``) changes
    nothing else.

    ``tools=[recall_tool().openai]`` for OpenAI chat completions,
    ``tools=[recall_tool().anthropic]`` for Anthropic messages; answer the
    calls with `ContextEngine.recall`. The name is fixed (the omission notes
    and `recall` use it); the description may be reworded."""

    name: ClassVar[str] = RECALL_TOOL_NAME
    description: str = _DESCRIPTION

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments: ``{"id": string}``."""
        return {
            "type": "object",
            "properties": {"id": {"type": "string", "description": "The id given in the omission note."}},
            "required": ["id"],
            "additionalProperties": False,
        }

    @property
    def openai(self) -> dict[str, Any]:
        """An OpenAI chat-completions tool (strict: the arguments always match the schema)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters, "strict": True},
        }

    @property
    def anthropic(self) -> dict[str, Any]:
        """An Anthropic messages-API tool."""
        return {"name": self.name, "description": self.description, "input_schema": self.parameters}


_RECALL_TOOL = RecallTool()


def recall_tool() -> RecallTool:
    """The `recall` tool's schemas (`.openai`, `.anthropic`) for a model to
    get back what the engine omitted; `ContextEngine.recall` answers it."""
    return _RECALL_TOOL


def answer_recall(call: Any, find: Any) -> dict[str, Any]:
    """The tool result answering `call` (an OpenAI tool call or an Anthropic
    ``tool_use`` block, as a dict or an SDK object) with `find(id)`, the
    original message or None; in the call's own format."""
    if hasattr(call, "model_dump") and not isinstance(call, Mapping):
        call = call.model_dump()
    if not isinstance(call, Mapping):
        raise InvalidTypeError(
            f"call: expected an OpenAI tool call dict or an Anthropic tool_use block, got {type(call).__name__}"
        )
    if call.get("type") == "tool_use" or "input" in call:
        family, name, arguments, where = "anthropic", call.get("name"), call.get("input"), "call['input']"
    elif isinstance(call.get("function"), Mapping):
        function = call["function"]
        family, name, arguments, where = "openai", function.get("name"), function.get("arguments"), "call['function']['arguments']"
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments)
            except json.JSONDecodeError as e:
                raise InvalidInputError(f"{where}: not valid JSON ({e}); expected a JSON object like {{\"id\": \"m-...\"}}") from None
    else:
        raise InvalidInputError(
            "call: neither an OpenAI tool call (with 'function') nor an Anthropic tool_use block (with 'input'); "
            "pass the tool call exactly as the API returned it"
        )
    if name != RECALL_TOOL_NAME:
        raise InvalidInputError(f"call: calls the tool {name!r}, not {RECALL_TOOL_NAME!r}; pass only recall calls to recall()")
    call_id = call.get("id")
    if not isinstance(call_id, str) or not call_id:
        raise InvalidInputError(f"call['id']: expected the tool call's id (a non-empty str), got {call_id!r}")
    if not isinstance(arguments, Mapping) or "id" not in arguments:
        raise InvalidInputError(f"{where}: expected an object with an 'id' string, got {arguments!r}")
    item_id = arguments["id"]
    if isinstance(item_id, int) and not isinstance(item_id, bool):
        item_id = str(item_id)  # a caller-given numeric id, as the model may send it back
    if not isinstance(item_id, str):
        raise InvalidInputError(f"{where}['id']: expected a str id from an omission note, got {type(item_id).__name__}")
    found = find(item_id) if item_id else None
    if found is None:
        text = f"Nothing is stored under id {item_id!r}: it may be mistyped or no longer kept. Continue without it."
    else:
        text = original_text(found)
    if family == "openai":
        return {"role": "tool", "tool_call_id": call_id, "content": text}
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call_id, "content": text}
    if found is None:
        block["is_error"] = True
    return block


def original_text(message: Any) -> str:
    """A message's content as text: string content as it is; structured
    content by its text parts, other parts (and tool calls) as JSON."""
    if isinstance(message, str):
        return message
    if not isinstance(message, Mapping):
        return _json(message)
    parts = [_content_text(message.get("content"))]
    parts += [_json(call) for call in message.get("tool_calls") or ()]
    return "\n".join(p for p in parts if p)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
        return "\n".join(p for p in map(_block_text, content) if p)
    return _json(content)


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if isinstance(block, Mapping):
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            return str(block["text"])
        if block.get("type") == "tool_result":
            return _content_text(block.get("content"))
    return _json(block)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
