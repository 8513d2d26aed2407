"""Turning the caller's messages into validated `Item`s: roles, ids,
timestamps, tool call/result pairs, token costs. Structural problems are
raised with the index of the message and what to change; what the chat API
would reject but can be mended (`ctxfold.engine.repair`) is repaired and reported,
or raised, as `EngineConfig.on_invalid` says. Nothing is dropped silently.

A message without an ``id`` gets one from its content (``m-`` and 12 hex
digits of a hash of its API keys and of how many identical messages come
before it), so it keeps its id when the history grows at the end, loses
messages at the front, or is sent again."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec
import numpy as np

from ctxfold._core import Tokenizer
from ctxfold.adapters import is_anthropic, split_anthropic
from ctxfold.engine.archive import tool_call_names
from ctxfold.engine.cache import EngineCache
from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.engine.repair import Entry, OnInvalid, RepairLog, repair_entries
from ctxfold.text.temporal import (
    note_with_said, said_day, said_note, split_date_note, text_without_said, with_date_note, without_said,
)
from ctxfold.tokens import _collect_message, message_costs
from ctxfold.engine.results import Item, Repair

__all__ = [
    "parse_messages", "parse_with_repairs", "message_text", "with_date_annotations", "latest_time", "said_at", "said_on", "parse_now",
    "said_after_first", "people_in_chat", "tool_groups",
    "current_turn", "hard_protected", "API_KEYS", "ROLES",
]

#: The keys OpenAI's chat API reads; everything else is ctxfold metadata.
API_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")
ROLES = ("system", "developer", "user", "assistant", "tool")
# A speaker's name opening a message ("Emi: ...", "Kate Lee: ", "elise: "): up to three words.
_SPEAKER = re.compile(r"\s*([^\W\d_][\w'.-]*(?: [^\W\d_][\w'.-]*){0,2}):\s")
# Share of a role's messages that must come from its one speaker for the chat to be between people.
PEOPLE_SHARE = 0.9
# Role labels that transcripts put before messages ("Human: ", "AI: "): not people.
ROLE_LABELS = frozenset({"user", "assistant", "human", "ai", "bot", "system", "model", "agent", "tool"})
#: Hex digits of a derived id: collisions stay improbable far beyond 100k messages.
ID_HEX_DIGITS = 12


def parse_messages(
    messages: Any,
    tokenizer: Tokenizer,
    system: str | None = None,
    cache: EngineCache | None = None,
    *,
    on_invalid: OnInvalid = "repair",
) -> list[Item]:
    """Validate `messages` (OpenAI-style dicts, or Anthropic-style content
    blocks) and return one `Item` per message, `system` first when given
    (`parse_with_repairs` without the repairs)."""
    return parse_with_repairs(messages, tokenizer, system, cache, on_invalid=on_invalid)[0]


def parse_with_repairs(
    messages: Any,
    tokenizer: Tokenizer,
    system: str | None = None,
    cache: EngineCache | None = None,
    *,
    on_invalid: OnInvalid = "repair",
) -> tuple[list[Item], list[Repair]]:
    """The `Item`s of `messages` and the repairs made to them (`ctxfold.engine.repair`;
    under ``on_invalid="raise"`` the first problem is an `InvalidInputError`
    instead). With a `cache`, messages counted before are not counted again."""
    if on_invalid not in ("repair", "raise"):
        raise InvalidInputError(f"on_invalid: use 'repair' or 'raise', got {on_invalid!r}")
    entries = _entries(messages, system)
    log = RepairLog()
    ids = _Ids(entries)
    entries = repair_entries(entries, log, ids.derive)
    if on_invalid == "raise":
        log.raise_first()
    costs = _costs(entries, tokenizer, cache)
    items = [_item(e, i, cost) for i, (e, cost) in enumerate(zip(entries, costs))]
    names = tool_call_names(items)
    for it in items:
        if it.role == "tool":
            it.tool_name = names.get(str(it.message.get("tool_call_id")))
    return items, log.repairs()


def with_date_annotations(
    items: Sequence[Item], tokenizer: Tokenizer, cache: EngineCache | None = None, *,
    said: bool = False, now: dt.datetime | None = None, said_once: bool = False,
) -> list[Item]:
    """The items with the dates of the relative references in the text
    content of each timestamped user and assistant message added on a line
    after it (`ctxfold.text.temporal.with_date_note`: ``[dates: yesterday =
    2023-05-07]``, in the timestamp's own time zone; the message's words stay
    as written) and their costs counted again, so the plan prices the text it
    will send. `said`: the line also names the message's day, and how long
    before `now` it was when `now` is given (``[said 2023-06-17, 3 days
    ago]``); `said_once`: only on a message whose day differs from the
    previous such message's. System,
    developer and tool messages, pinned messages, tool call arguments and
    messages without a timestamp stay as given; `Item.text` (what scoring
    reads) and `Item.source` (what `restore` returns) stay the original."""
    out = list(items)
    changed: list[tuple[int, dict[str, Any], dict[str, Any]]] = []
    last_day: dt.date | None = None
    for i, it in enumerate(items):
        content = it.message.get("content")
        if it.pinned or it.role not in ("user", "assistant") or not isinstance(content, str):
            continue
        anchor = said_at(it)
        if anchor is None:
            continue
        annotated = dated = _annotated(content, anchor, cache)
        if said and not (said_once and anchor.date() == last_day) and not split_date_note(content)[1]:
            when = said_note(anchor, now)
            body, note = split_date_note(annotated)
            annotated = f"{body}\n{note_with_said(when, note)}"
        last_day = anchor.date()
        if annotated != content:
            changed.append((i, {**it.message, "content": annotated}, {**it.message, "content": dated}))
    if not changed:
        return out
    messages = [m for _, m, _ in changed] + [m for _, _, m in changed]
    costs = (cache.costs_of(messages, lambda todo: message_costs(todo, tokenizer)) if cache is not None
             else message_costs(messages, tokenizer))
    # note_tokens: what the day said adds, beyond the message with only its dates (which counts as its length).
    for (i, message, _), cost, dated_cost in zip(changed, costs, costs[len(changed):]):
        note = split_date_note(message["content"])[1]
        out[i] = msgspec.structs.replace(items[i], message=message, tokens=cost, date_note=note,
                                         note_tokens=cost - dated_cost + items[i].note_tokens)
    return out


def said_after_first(items: Sequence[Item], sent: Sequence[int], tokenizer: Tokenizer,
                     cache: EngineCache | None = None) -> list[Item] | None:
    """The items with the ``said`` part taken out of the notes of the
    messages that would follow one of their own day among `sent` (the
    indices a plan keeps with their notes): those in `sent` after the first
    of their day, and any other whose nearest kept message before it is of
    its day. Costs are counted again; None when no message of `sent` loses
    its day (the plan then already pays for what it sends).
    A plan made with them prices what rendering sends, where only the first
    message of a day says it."""
    out = list(items)
    changed: list[tuple[int, dict[str, Any], str]] = []
    kept = set(sent)
    last = ""
    for i, it in enumerate(items):
        day = said_day(it.date_note)
        if not day:
            continue
        if day == last:
            content = text_without_said(str(it.message["content"]))
            changed.append((i, {**it.message, "content": content}, without_said(it.date_note)))
        if i in kept:
            last = day
    if not any(i in kept for i, _, _ in changed):
        return None
    messages = [m for _, m, _ in changed]
    costs = (cache.costs_of(messages, lambda todo: message_costs(todo, tokenizer)) if cache is not None
             else message_costs(messages, tokenizer))
    for (i, message, rest), cost in zip(changed, costs):
        if cost <= items[i].tokens:  # a shorter text that counts more would break the price
            out[i] = msgspec.structs.replace(items[i], message=message, tokens=cost, date_note=rest,
                                             note_tokens=cost - items[i].tokens + items[i].note_tokens)
    return out


def latest_time(items: Sequence[Item]) -> dt.datetime | None:
    """The latest timestamp of `items`, in the time zone it was given in (None when none has one)."""
    stamped = [it for it in items if it.timestamp is not None]
    if not stamped:
        return None
    return said_at(max(stamped, key=lambda it: it.timestamp))  # type: ignore[arg-type, return-value]


def said_at(it: Item) -> dt.datetime | None:
    """When `it` was said, in the time zone its timestamp was given in
    (None without a timestamp, or for one outside the calendar)."""
    if it.timestamp is None:
        return None
    try:
        return dt.datetime.fromtimestamp(it.timestamp, dt.timezone(dt.timedelta(seconds=it.utc_offset)))
    except (OverflowError, OSError, ValueError):
        return None


def said_on(it: Item) -> dt.date | None:
    """The calendar day `it` was said, in the time zone its timestamp was
    given in (None without a timestamp, or for one outside the calendar)."""
    when = said_at(it)
    return when.date() if when is not None else None


def parse_now(value: Any) -> dt.datetime | None:
    """`optimize(now=...)` as an aware datetime: ISO 8601 text, a datetime
    (naive: UTC) or epoch seconds, read as message timestamps are; None stays None."""
    seconds, offset = _timestamp(value, "now", label="now")
    if seconds is None:
        return None
    try:
        return dt.datetime.fromtimestamp(seconds, dt.timezone(dt.timedelta(seconds=offset)))
    except (OverflowError, OSError, ValueError):
        raise InvalidInputError(f"now: {value!r} is outside the calendar (years 1 to 9999); pass a date in range") from None


def _annotated(content: str, anchor: dt.datetime, cache: EngineCache | None) -> str:
    """`with_date_note(content, anchor)`, from `cache` when this text was annotated for this day before."""
    if cache is None:
        return with_date_note(content, anchor)
    key = (content, anchor.date())
    found = cache.annotations.get(key)
    if found is None:
        found = with_date_note(content, anchor)
        cache.annotations.put(key, "" if found == content else found)
    return found or content


def _entries(messages: Any, system: str | None) -> list[Entry]:
    """One entry per message (an Anthropic message may give several), each
    with its index in the caller's list."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidTypeError(f"messages: expected a list of message dicts, got {type(messages).__name__}")
    messages = list(messages)
    out: list[Entry] = []
    if system is not None:
        if not isinstance(system, str):
            raise InvalidTypeError(f"system: expected str, got {type(system).__name__}")
        raw = {"role": "system", "content": system, "id": "system", "pinned": True}
        out.append(Entry(raw=raw, source=raw, api=_api_message(raw, "system"), index=-1, original_role="system"))
    anthropic = is_anthropic(messages)
    for k, message in enumerate(messages):
        where = f"messages[{k}]"
        if anthropic:
            _api_message(message, where)
        for raw in split_anthropic([message])[0] if anthropic else (message,):
            api = _api_message(raw, where)
            out.append(Entry(raw=raw, source=message, api=api, index=k, original_role=api["role"]))
    return out


def _api_message(message: Any, where: str) -> dict[str, Any]:
    if not isinstance(message, Mapping):
        raise InvalidTypeError(f"{where}: expected a dict, got {type(message).__name__}")
    role = message.get("role")
    if role is None:
        raise InvalidInputError(f"{where}: missing 'role'; use one of {', '.join(ROLES)}")
    if role not in ROLES:
        raise InvalidInputError(f"{where}: unknown role {role!r}; use one of {', '.join(ROLES)}")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise InvalidInputError(f"{where}: a tool message needs the 'tool_call_id' of the call it answers")
    calls = message.get("tool_calls")
    if calls is not None:
        if isinstance(calls, (str, bytes)) or not isinstance(calls, Sequence):
            raise InvalidTypeError(f"{where}['tool_calls']: expected a list of tool calls, got {type(calls).__name__}")
        for j, call in enumerate(calls):
            if not isinstance(call, Mapping) or not isinstance(call.get("id"), str):
                raise InvalidInputError(
                    f"{where}['tool_calls'][{j}]: a tool call needs a string 'id' (its result names it in "
                    "'tool_call_id'), e.g. {'id': 'call_1', 'type': 'function', 'function': {'name': ..., "
                    "'arguments': ...}}"
                )
    return {k: message[k] for k in API_KEYS if k in message}


class _Ids:
    """Item ids: the caller's id where one is given (unique), otherwise
    derived from the message's API keys and its number among identical
    messages, so an id does not depend on the message's position."""

    def __init__(self, entries: list[Entry]) -> None:
        self.used: set[str] = set()
        self.copies: dict[bytes, int] = {}
        for entry in entries:
            # Also tells the repairs which messages need no surrogate search.
            entry.key = _key(entry.api)
        given = [(e, str(e.raw["id"])) for e in entries if e.raw.get("id") is not None]
        for entry, item_id in given:
            if item_id in self.used:
                raise InvalidInputError(f"{entry.where}: id {item_id!r} is used twice; ids must be unique")
            self.used.add(item_id)
            entry.id = item_id
        for entry in entries:
            if not entry.id:
                entry.id = self.derive(entry.api, entry.key)

    def derive(self, api: dict[str, Any], key: bytes | None = None) -> str:
        if key is None:
            key = _key(api) or _canonical_fallback(api)
        copy = self.copies.get(key, 0)
        self.copies[key] = copy + 1
        digest = hashlib.blake2b(key + b"\x00%d" % copy, digest_size=16).hexdigest()
        # A prefix taken by another message (or a caller's id): the full
        # digest, then a counter, so the choice depends on the list alone.
        for candidate in (f"m-{digest[:ID_HEX_DIGITS]}", f"m-{digest}"):
            if candidate not in self.used:
                break
        else:
            n = 2
            while f"m-{digest}-{n}" in self.used:
                n += 1
            candidate = f"m-{digest}-{n}"
        self.used.add(candidate)
        return candidate


_encode = msgspec.json.Encoder(order="deterministic").encode


def _key(api: Mapping[str, Any]) -> bytes | None:
    """The message's API keys as canonical JSON (sorted keys), or None for a
    lone surrogate (repaired later) or a value JSON lacks (rejected later)."""
    try:
        return _encode(api)
    except (TypeError, ValueError, msgspec.EncodeError):
        return None


def _canonical_fallback(api: Mapping[str, Any]) -> bytes:
    return json.dumps(api, sort_keys=True, ensure_ascii=True, default=repr).encode("ascii")


def _costs(entries: list[Entry], tokenizer: Tokenizer, cache: EngineCache | None) -> list[int]:
    """Each message's token cost; a message not counted before is validated
    first, so an error names its place in the caller's list."""

    def compute(todo: list[dict[str, Any]]) -> list[int]:
        entry_of = {id(e.api): e for e in entries}
        for k, api in enumerate(todo):
            entry = entry_of.get(id(api))
            _collect_message(api, entry.where if entry else f"messages[{k}]", [], 1)
        return message_costs(todo, tokenizer)

    api_messages = [e.api for e in entries]
    if cache is None:
        return compute(api_messages)
    try:
        return cache.costs_of(api_messages, compute)
    except (InvalidInputError, InvalidTypeError):
        raise
    except (TypeError, ValueError, msgspec.EncodeError):
        # The cache key could not be made: name the message.
        for e in entries:
            _collect_message(e.api, e.where, [], 1)
            if _key(e.api) is None:
                raise InvalidTypeError(
                    f"{e.where}: holds a value that is not JSON (str, number, bool, None, list, dict); "
                    "the chat API takes JSON"
                ) from None
        raise


def _item(e: Entry, i: int, cost: int) -> Item:
    raw, api, where = e.raw, e.api, e.where
    calls = api.get("tool_calls") or ()
    call_ids = tuple(str(c.get("id")) for c in calls if isinstance(c, Mapping) and c.get("id") is not None)
    pinned = raw.get("pinned", False)
    if not isinstance(pinned, bool):
        raise InvalidTypeError(f"{where}['pinned']: expected bool, got {type(pinned).__name__}")
    kind = raw.get("kind")
    if kind is not None and not isinstance(kind, str):
        raise InvalidTypeError(f"{where}['kind']: expected str, got {type(kind).__name__}")
    if kind is None and e.original_role == "tool":
        kind = "tool_result"
    timestamp, utc_offset = _timestamp(raw.get("timestamp"), where)
    text = message_text(api)
    return Item(
        id=e.id,
        index=i,
        role=api["role"],
        message=api,
        text=text,
        tokens=cost,
        kind=kind,
        timestamp=timestamp,
        utc_offset=utc_offset,
        importance=_importance(raw.get("importance"), where),
        pinned=pinned,
        tool_call_ids=call_ids,
        speaker=_speaker(api, text),
        source=e.source,
    )


def _speaker(api: Mapping[str, Any], text: str) -> str | None:
    name = api.get("name")
    if isinstance(name, str) and name.strip():
        return name.strip()
    found = _SPEAKER.match(text)
    return found.group(1) if found else None


def people_in_chat(items: Sequence[Item]) -> tuple[str, str] | None:
    """The two people a conversation is between, when it is one: nearly all
    user messages come from one named speaker, nearly all assistant messages
    from another (each message's `name`, or its text opening with ``Name:``).
    None for a chat with an assistant."""
    found: list[str] = []
    for role in ("user", "assistant"):
        names = [it.speaker for it in items if it.role == role]
        if not names:
            return None
        top, count = Counter(names).most_common(1)[0]
        if top is None or top.lower() in ROLE_LABELS or count < PEOPLE_SHARE * len(names):
            return None
        found.append(top)
    return (found[0], found[1]) if found[0] != found[1] else None


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


def _timestamp(value: Any, where: str, label: str | None = None) -> tuple[float | None, float]:
    """ISO 8601 text, a datetime, or epoch seconds, as epoch seconds and the
    offset from UTC it was given in (naive datetimes are taken as UTC);
    errors name `label` (default: the message's ``timestamp`` key)."""
    name = label or f"{where}['timestamp']"
    if value is None:
        return None, 0.0
    if isinstance(value, dt.datetime):
        stamp = value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
        offset = stamp.utcoffset()
        return stamp.timestamp(), offset.total_seconds() if offset is not None else 0.0
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise InvalidInputError(f"{name}: must be finite, got {value}")
        return float(value), 0.0
    if isinstance(value, str):
        try:
            return _iso_seconds(value)
        except ValueError:
            raise InvalidInputError(
                f"{name}: {value!r} is not ISO 8601; use e.g. '2024-05-01T12:00:00Z', "
                "a datetime, or epoch seconds"
            ) from None
    raise InvalidTypeError(f"{name}: expected ISO 8601 str, datetime or number, got {type(value).__name__}")


@functools.lru_cache(maxsize=65536)
def _iso_seconds(value: str) -> tuple[float, float]:
    """Epoch seconds of an ISO 8601 text (naive: UTC) and its offset from
    UTC in seconds; cached, as a conversation repeats its session dates."""
    stamp = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    stamp = stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.timezone.utc)
    offset = stamp.utcoffset()
    return stamp.timestamp(), offset.total_seconds() if offset is not None else 0.0


def dumps_arguments(arguments: Any) -> str:
    """Tool call arguments as the JSON string the chat API expects."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def tool_groups(items: Sequence[Item]) -> np.ndarray:
    """Group id per item: an assistant message with tool calls and every
    result of those calls share the id of the assistant message; -1 alone."""
    groups = np.full(len(items), -1, dtype=np.int64)
    owner: dict[str, int] = {}
    for i, it in enumerate(items):
        for call_id in it.tool_call_ids:
            owner[call_id] = i
            groups[i] = i
        call = it.message.get("tool_call_id")
        if call in owner:
            groups[i] = owner[call]
    return groups


def current_turn(items: Sequence[Item]) -> list[int]:
    """The messages the next answer is for: the last user message and, when
    the input ends with tool results, the assistant message that made those
    calls with all of its results."""
    current = set()
    last_user = max((i for i, it in enumerate(items) if it.role == "user"), default=None)
    if last_user is not None:
        current.add(last_user)
    if items and items[-1].role == "tool":
        groups = tool_groups(items)
        if groups[-1] >= 0:
            current.update(i for i in range(len(items)) if groups[i] == groups[-1])
    return sorted(current)


def hard_protected(it: Item) -> bool:
    """System and developer messages and pinned ones: kept verbatim, always."""
    return it.pinned or it.role in ("system", "developer")
