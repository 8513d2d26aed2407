"""The input policy (`EngineConfig.on_invalid`): messages the chat API would
reject are repaired, each fix recorded as a `Repair`, or, under ``"raise"``,
the first problem becomes an `InvalidInputError` naming the message and the
fix. Both policies find the same problems (one code path); no repair drops
text, except an exact copy of a tool result.

The repairs, in the order they are made:

- ``lone_surrogate``: a lone surrogate code point (which UTF-8 cannot encode)
  becomes U+FFFD; a surrogate pair is joined into its character.
- ``none_content``: ``content`` None or missing where the API needs it (system,
  developer, user and tool messages; an assistant message without tool
  calls) becomes ``""``.
- ``empty_tool_calls``: ``tool_calls: []`` (rejected by the API) is removed.
- ``duplicate_tool_call_id``: a call id already used by an earlier call is
  renamed ``<id>_2`` (``_3``, ...), and the result answering it with it.
- ``misplaced_tool_result``: a result that does not directly follow the
  assistant message of its call (the API wants every result right after it)
  is moved to after that message's other results.
- ``duplicate_tool_result``: a second result for one call is dropped when it
  is an exact copy of the first, and otherwise appended to the first.
- ``orphan_tool_result``: a result whose call is in no earlier assistant
  message becomes a user message (the text came from outside the model, so not
  assistant; a tool message without its call is rejected by the API) that
  starts with a note naming the call id; its kind stays ``tool_result``.
- ``unanswered_tool_call``: a call without any result gets a tool result
  saying that no result was recorded, after the call's other results.

`Item.source` keeps the caller's message, so `restore` returns it unrepaired.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ctxfold.errors import InvalidInputError
from ctxfold.engine.results import Repair

__all__ = ["Entry", "RepairLog", "repair_entries", "NO_RESULT", "OnInvalid"]

OnInvalid = Literal["repair", "raise"]

#: The content of the tool result added for a call that has none.
NO_RESULT = "[no result was recorded for this tool call]"
_MORE_RESULT = "[another result for the same tool call]"
_SURROGATE = re.compile("[\ud800-\udfff]")
# Roles whose message the API rejects without content.
_NEEDS_CONTENT = ("system", "developer", "user", "tool")


@dataclass(eq=False, slots=True)
class Entry:
    """One message on its way to an `Item`."""

    raw: Mapping[str, Any]
    """The message with ctxfold's metadata keys (id, kind, pinned, ...)."""
    source: Any
    """The caller's message (what `restore` returns)."""
    api: dict[str, Any]
    """The API keys only; repairs replace values here, never inside the caller's objects."""
    index: int
    """Index in the caller's list; -1 for the `system=` argument."""
    original_role: str
    id: str = ""
    key: bytes | None = None
    """The API keys as canonical JSON; None when they cannot be encoded (a
    lone surrogate, or a value JSON lacks)."""

    @property
    def where(self) -> str:
        return f"messages[{self.index}]" if self.index >= 0 else "system"


@dataclass
class RepairLog:
    """Every problem found, with the repair made and the error `raise` would give."""

    found: list[tuple[Repair, str]] = field(default_factory=list)

    def add(self, entry: Entry, kind: str, problem: str, action: str, error: str) -> None:
        self.found.append((Repair(index=entry.index, id=entry.id, kind=kind, problem=problem, action=action), error))

    def repairs(self) -> list[Repair]:
        return [r for r, _ in sorted(self.found, key=lambda f: f[0].index)]

    def raise_first(self) -> None:
        """Under ``on_invalid="raise"``: the problem of the earliest message."""
        if not self.found:
            return
        repair, error = min(self.found, key=lambda f: f[0].index)
        more = len(self.found) - 1
        tail = f" ({more} more problem{'s' if more > 1 else ''} in the messages)" if more else ""
        raise InvalidInputError(
            f"{error}{tail}; or pass EngineConfig(on_invalid='repair') to have such messages repaired and "
            "listed in report.repairs"
        )


def repair_entries(entries: list[Entry], log: RepairLog, new_id: Callable[[dict[str, Any]], str]) -> list[Entry]:
    """The entries with every problem repaired (and logged); `new_id` names
    the tool results added for unanswered calls."""
    for entry in entries:
        _fix_surrogates(entry, log)
        _fix_content(entry, log)
    return _fix_tool_pairs(entries, log, new_id)


# -- text ----------------------------------------------------------------------------


def clean_text(text: str) -> str:
    """`text` with surrogate pairs joined and lone surrogates as U+FFFD."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def surrogate_at(text: str) -> re.Match[str] | None:
    return None if text.isascii() else _SURROGATE.search(text)


def _cleaned(value: Any, path: str, found: list[tuple[str, re.Match[str]]]) -> Any:
    """`value` with every string cleaned (containers copied only where something
    changed); `found` gets the path and first surrogate of each string fixed."""
    if isinstance(value, str):
        match = surrogate_at(value)
        if match is None:
            return value
        found.append((path, match))
        return clean_text(value)
    if isinstance(value, Mapping):
        out: dict[Any, Any] | None = None
        for key, item in value.items():
            new = _cleaned(item, f"{path}[{key!r}]", found)
            if new is not item:
                out = dict(value) if out is None else out
                out[key] = new
        return value if out is None else out
    if isinstance(value, (list, tuple)):
        items: list[Any] | None = None
        for k, item in enumerate(value):
            new = _cleaned(item, f"{path}[{k}]", found)
            if new is not item:
                items = list(value) if items is None else items
                items[k] = new
        return value if items is None else items
    return value


def _fix_surrogates(entry: Entry, log: RepairLog) -> None:
    found: list[tuple[str, re.Match[str]]] = []
    if entry.key is None:  # encoded, so no surrogate anywhere: the common case costs no walk
        for key in list(entry.api):
            entry.api[key] = _cleaned(entry.api[key], f"[{key!r}]", found)
    match = surrogate_at(entry.id)
    if match is not None:
        found.append(("['id']", match))
        entry.id = clean_text(entry.id)
    for path, match in found:
        log.add(
            entry, "lone_surrogate",
            f"{path} has the lone surrogate {match.group()!r} at position {match.start()}, which UTF-8 cannot encode",
            "replaced by U+FFFD (a surrogate pair is joined into its character)",
            f"{entry.where}{path}: lone surrogate {match.group()!r} at position {match.start()} cannot be encoded as "
            "UTF-8; decode the text with errors='replace' or join the surrogate pair",
        )


# -- content -------------------------------------------------------------------------


def _fix_content(entry: Entry, log: RepairLog) -> None:
    api = entry.api
    role = api["role"]
    if role == "assistant" and isinstance(api.get("tool_calls"), (list, tuple)) and not api["tool_calls"]:
        del api["tool_calls"]
        log.add(
            entry, "empty_tool_calls", "'tool_calls' is an empty list, which the chat API rejects", "removed the key",
            f"{entry.where}['tool_calls']: an empty list is rejected by the chat API; leave the key out",
        )
    if api.get("content") is not None or (role == "assistant" and api.get("tool_calls")):
        return
    missing = "content" not in api
    api["content"] = ""
    what = "'content' is missing" if missing else "'content' is None"
    needs = f"a {role} message" if role in _NEEDS_CONTENT else "an assistant message without tool calls"
    log.add(
        entry, "none_content", f"{what}; the chat API needs content in {needs}", "content set to ''",
        f"{entry.where}['content']: {needs} needs content, got {'nothing' if missing else 'None'}; pass a string "
        "('' when empty)",
    )


# -- tool calls and results ----------------------------------------------------------


@dataclass(eq=False, slots=True)
class _Call:
    owner: int
    """Position of the assistant message making the call."""
    position: int
    """Index of the call in that message's tool_calls."""
    call_id: str
    """The id as given."""
    final_id: str
    """The id after renaming a duplicate."""
    answer: int | None = None
    """Position of the result answering the call."""


def _fix_tool_pairs(entries: list[Entry], log: RepairLog, new_id: Callable[[dict[str, Any]], str]) -> list[Entry]:
    """Pair every result with one call, then lay each assistant message out
    followed directly by the results of all its calls."""
    given = _Given(entries)
    used: dict[str, Entry] = {}
    by_id: dict[str, list[_Call]] = {}
    calls_of: dict[int, list[_Call]] = {}
    answered: dict[int, _Call] = {}
    gone: set[int] = set()
    block: int | None = None  # the assistant message whose results may come next
    for p, entry in enumerate(entries):
        if entry.api["role"] != "tool":
            block = p if _calls(entry) else None
            if block is not None:
                calls_of[p] = _register_calls(entry, p, given, used, by_id, log)
            continue
        call_id = entry.api["tool_call_id"]
        candidates = by_id.get(call_id, [])
        here = [c for c in candidates if c.owner == block]
        call = next((c for c in here if c.answer is None), None) or next(
            (c for c in reversed(candidates) if c.answer is None), None
        )
        if call is not None:
            call.answer = p
            answered[p] = call
            if call.final_id != call_id:
                entry.api["tool_call_id"] = call.final_id
            if call.owner != block:
                owner = entries[call.owner]
                log.add(
                    entry, "misplaced_tool_result",
                    f"the result for {call_id!r} does not directly follow {owner.where}, the message making the call",
                    f"moved to after {owner.where} ({owner.id}) and its other results",
                    f"{entry.where}: the tool result for {call_id!r} must come right after {owner.where}, the "
                    "assistant message making the call (with its other results); move it there",
                )
        elif candidates:
            call = (here or candidates)[-1]
            _merge_duplicate(entry, entries[call.answer], call, log)  # type: ignore[index]
            gone.add(p)
        else:
            _make_orphan_note(entry, call_id, entries[block] if block is not None else None, log)
    out: list[Entry] = []
    for p, entry in enumerate(entries):
        if p in answered or p in gone:
            continue
        out.append(entry)
        calls = calls_of.get(p, [])
        out.extend(entries[q] for q in sorted(c.answer for c in calls if c.answer is not None))
        out.extend(_no_result(entry, c, new_id, log) for c in calls if c.answer is None)
    return out


def _calls(entry: Entry) -> Sequence[Mapping[str, Any]]:
    """The tool calls of an assistant message (each a dict with a str id:
    parsing checked that)."""
    calls = entry.api.get("tool_calls")
    return calls if calls and entry.api["role"] == "assistant" else ()


class _Given:
    """Every call id and result id in the messages (what a renamed id must
    avoid), collected only when an id needs renaming."""

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries
        self.ids: set[str] | None = None

    def fresh(self, call_id: str) -> str:
        if self.ids is None:
            self.ids = {c["id"] for e in self.entries for c in _calls(e)}
            self.ids |= {e.api["tool_call_id"] for e in self.entries if e.api["role"] == "tool"}
        n = 2
        while f"{call_id}_{n}" in self.ids:
            n += 1
        self.ids.add(f"{call_id}_{n}")
        return f"{call_id}_{n}"


def _register_calls(
    entry: Entry, p: int, given: _Given, used: dict[str, Entry], by_id: dict[str, list[_Call]], log: RepairLog
) -> list[_Call]:
    calls = list(entry.api["tool_calls"])
    made: list[_Call] = []
    renamed = False
    for j, call in enumerate(calls):
        call_id = final = call["id"]
        if call_id in used:
            final = given.fresh(call_id)
            calls[j] = {**call, "id": final}
            renamed = True
            first = used[call_id]
            log.add(
                entry, "duplicate_tool_call_id",
                f"tool call id {call_id!r} is already used by {'this message' if first is entry else first.where}",
                f"this call renamed {final!r}, with the result answering it",
                f"{entry.where}['tool_calls'][{j}]: tool call id {call_id!r} is already used by "
                f"{'an earlier call in this message' if first is entry else first.where}; give every call its own id",
            )
        used.setdefault(call_id, entry)
        used.setdefault(final, entry)
        made.append(_Call(owner=p, position=j, call_id=call_id, final_id=final))
        by_id.setdefault(call_id, []).append(made[-1])
    if renamed:
        entry.api["tool_calls"] = calls
    return made


def _as_parts(content: Any) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if isinstance(content, (list, tuple)) else []


def _merge_duplicate(entry: Entry, first: Entry, call: _Call, log: RepairLog) -> None:
    extra, kept = entry.api.get("content"), first.api.get("content")
    identical = extra == kept and entry.api.get("name") == first.api.get("name")
    if not identical:
        if isinstance(kept, str) and isinstance(extra, str):
            first.api["content"] = f"{kept}\n\n{_MORE_RESULT}\n{extra}" if kept else f"{_MORE_RESULT}\n{extra}"
        else:
            first.api["content"] = [*_as_parts(kept), {"type": "text", "text": _MORE_RESULT}, *_as_parts(extra)]
    log.add(
        entry, "duplicate_tool_result",
        f"a second tool result for call {call.call_id!r} (the first is {first.where})",
        f"dropped (an exact copy of {first.id})" if identical else f"its content appended to {first.id}",
        f"{entry.where}: a second tool result for call {call.call_id!r} (the first is {first.where}); send one "
        "result per call",
    )


def _make_orphan_note(entry: Entry, call_id: str, inside: Entry | None, log: RepairLog) -> None:
    name = entry.api.get("name")
    what = f"result of tool {name!r}" if isinstance(name, str) and name else "tool result"
    note = f"[{what} for call {call_id!r}, whose tool call is not in the conversation]"
    content = entry.api.get("content")
    if isinstance(content, str):
        content = f"{note}\n{content}" if content else note
    else:
        content = [{"type": "text", "text": note}, *_as_parts(content)]
    entry.api = {"role": "user", "content": content}
    placed = f", placed after the results of {inside.where}" if inside is not None else ""
    log.add(
        entry, "orphan_tool_result",
        f"tool result for {call_id!r} has no matching tool call in an earlier assistant message",
        f"converted to a user message starting with a note naming the call{placed}",
        f"{entry.where}: tool result for {call_id!r} has no matching tool call in an earlier assistant message; "
        "include the assistant message with that tool_calls id, or remove this message",
    )


def _no_result(owner: Entry, call: _Call, new_id: Callable[[dict[str, Any]], str], log: RepairLog) -> Entry:
    api = {"role": "tool", "tool_call_id": call.final_id, "content": NO_RESULT}
    added = Entry(raw={}, source=dict(api), api=api, index=owner.index, original_role="tool")
    added.id = new_id(api)
    log.add(
        owner, "unanswered_tool_call",
        f"tool call {call.call_id!r} has no tool result",
        f"added the tool result {added.id!r} saying that no result was recorded",
        f"{owner.where}['tool_calls'][{call.position}]: tool call {call.call_id!r} has no tool result; add "
        f"{{'role': 'tool', 'tool_call_id': {call.call_id!r}, 'content': ...}} right after this message, or remove "
        "the call",
    )
    return added

