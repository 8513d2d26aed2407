"""Argument checks shared by both backends.

Every value a store writes or looks up is checked here, before a transaction
starts, so SQLite and PostgreSQL refuse the same input with the same typed
error (`InvalidInputError` / `InvalidTypeError` naming the argument and the
fix) instead of each failing its own way inside the database:

- text must be valid Unicode (no lone surrogates, which neither backend can
  encode as UTF-8); text kept in a column must hold no NUL character
  (PostgreSQL's text type cannot); keys (scope fields, ids, log names, targets)
  are at most `MAX_KEY_BYTES` bytes of UTF-8, so every index row fits
  PostgreSQL's btree limit;
- integers are in [0, `MAX_INT`] (a SQL BIGINT), limits included;
- numpy scalars and arrays are accepted wherever a number, a str or metadata is,
  and converted to the plain Python values both backends store.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import msgspec
import numpy as np

from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.memory.records import Effectiveness, Memory, Source

__all__ = [
    "MAX_INT",
    "MAX_KEY_BYTES",
    "check_memories",
    "integer",
    "metadata",
    "number",
    "positive_seconds",
    "text",
    "text_list",
    "storable",
    "unit_interval",
]

#: The longest key (a scope field, a record id, a log name, a message target),
#: in bytes of UTF-8 (512 ASCII characters, 128 of the widest): four of them,
#: a scope's unique index row, stay within PostgreSQL's 2704-byte btree limit.
MAX_KEY_BYTES = 512
#: The largest integer argument (limits, counts): a SQL BIGINT.
MAX_INT = 2**63 - 1
# msgpack stores integers in [-2**63, 2**64 - 1].
_MSGPACK_INT = (-(2**63), 2**64 - 1)
_MAX_DEPTH = 100
_PLAIN_KEYS = (str, int, float, bool, type(None))
_encode = msgspec.msgpack.Encoder().encode


def _is_number(value: Any) -> bool:
    kind = type(value)
    if kind is float or kind is int:  # the common case, without the slower ABC check
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _is_integer(value: Any) -> bool:
    if type(value) is int:
        return True
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def unit_interval(value: Any, argument: str) -> float:
    """`value` as a float in [0, 1] (priorities, significances, confidences)."""
    if not _is_number(value) or not 0.0 <= value <= 1.0:
        raise InvalidInputError(f"{argument}: must be a number in [0, 1], got {value!r}")
    return float(value)


def positive_seconds(value: Any, argument: str) -> float:
    """`value` as a positive number of seconds (TTLs)."""
    if not _is_number(value) or math.isnan(value) or value <= 0:
        raise InvalidInputError(f"{argument}: must be a positive number of seconds, got {value!r}")
    return float(value)


def number(value: Any, argument: str, *, optional: bool = False) -> Any:
    """`value` as a finite float (``None`` passes when `optional`)."""
    if value is None and optional:
        return None
    if not _is_number(value):
        expected = "a number or None" if optional else "a number"
        raise InvalidTypeError(f"{argument}: expected {expected}, got {type(value).__name__}")
    if not math.isfinite(value):
        raise InvalidInputError(f"{argument}: must be a finite number, got {value!r}")
    return float(value)


def integer(value: Any, argument: str, *, minimum: int = 0, maximum: int = MAX_INT, optional: bool = False) -> Any:
    """`value` as an int in [`minimum`, `maximum`] (``None`` passes when `optional`)."""
    if value is None and optional:
        return None
    none = " or None" if optional else ""
    if not _is_integer(value):
        raise InvalidTypeError(f"{argument}: expected an int{none}, got {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise InvalidInputError(f"{argument}: must be an int in [{minimum}, {maximum}]{none}, got {value!r}")
    return int(value)


def text(value: Any, argument: str, *, column: bool = False, key: bool = False, optional: bool = False) -> Any:
    """`value` as a str both backends store: valid Unicode; with `column` (the
    text is kept in, or compared with, a text column) no NUL character; with
    `key` (an indexed column) also at most `MAX_KEY_BYTES` bytes of UTF-8."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        none = " or None" if optional else ""
        raise InvalidTypeError(f"{argument}: expected a str{none}, got {type(value).__name__}")
    value = str(value)  # a numpy str_ as a plain str
    try:
        size = len(value) if value.isascii() else len(value.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise InvalidInputError(
            f"{argument}: holds a lone surrogate {value[e.start]!r} at index {e.start}, which is not valid "
            "Unicode text and cannot be stored (often bytes decoded with errors='surrogateescape'). "
            "Fix: decode the bytes with errors='replace', or remove the character"
        ) from None
    if (column or key) and "\x00" in value:
        raise InvalidInputError(
            f"{argument}: holds a NUL character (\\x00) at index {value.index(chr(0))}, which a text column "
            "cannot hold (PostgreSQL refuses it). Fix: remove it, e.g. value.replace('\\x00', '')"
        )
    if key and size > MAX_KEY_BYTES:
        raise InvalidInputError(
            f"{argument}: is {size} bytes as UTF-8; keys are at most {MAX_KEY_BYTES} bytes, the most "
            "PostgreSQL can index. Fix: use a shorter value, e.g. a hash of it "
            "(hashlib.sha256(value.encode()).hexdigest())"
        )
    return value


def text_list(value: Any, argument: str) -> list[str]:
    """`value` (a list or tuple of str, not one str) as a list of checked str."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise InvalidTypeError(
            f"{argument}: expected a list of str, got {type(value).__name__}. Fix: wrap a single value: [value]"
        )
    return [text(v, f"{argument}[{i}]") for i, v in enumerate(value)]


def metadata(value: Any, argument: str) -> dict[str, Any]:
    """`value` (a dict with str keys) with every value made storable: numpy
    scalars and arrays become Python numbers and lists, tuples and sets lists.
    Anything msgpack cannot store raises `InvalidTypeError` naming where it is."""
    if not isinstance(value, Mapping):
        raise InvalidTypeError(f"{argument}: expected a dict with str keys, got {type(value).__name__}")
    out: dict[str, Any] = {}
    for k, v in value.items():
        if not isinstance(k, str):
            raise InvalidTypeError(
                f"{argument}: the key {k!r} is a {type(k).__name__}; keys are str. Fix: use str(key)"
            )
        out[text(k, f"{argument} key {k!r}")] = _plain(v, f"{argument}[{k!r}]", 1)
    return out


def storable(value: Any, argument: str) -> Any:
    """`value` made storable as `metadata` makes a dict's values (cached values)."""
    return _plain(value, argument, 1)


def _plain(value: Any, where: str, depth: int) -> Any:
    kind = type(value)
    if kind is str:
        return text(value, where)
    if kind is float or kind is bool or value is None:
        return value
    if depth > _MAX_DEPTH:
        raise InvalidInputError(f"{where}: nested more than {_MAX_DEPTH} levels deep (or it contains itself)")
    if isinstance(value, np.ndarray):
        value = value.tolist()
    elif isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not _MSGPACK_INT[0] <= value <= _MSGPACK_INT[1]:
            raise InvalidInputError(
                f"{where}: the int {value} is outside [-2**63, 2**64 - 1], what can be stored. Fix: store str(value)"
            )
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return text(value, where)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            k = _plain(k, f"{where} key {k!r}", depth + 1)
            if not isinstance(k, _PLAIN_KEYS):
                raise InvalidTypeError(f"{where}: the key {k!r} is a {type(k).__name__}; use str, int or float keys")
            out[k] = _plain(v, f"{where}[{k!r}]", depth + 1)
        return out
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    try:  # other types msgpack stores as they are (datetime, Decimal, UUID, enums, Structs)
        _encode(value)
    except (TypeError, ValueError, OverflowError) as e:
        raise InvalidTypeError(
            f"{where}: a {type(value).__name__} cannot be stored ({e}). Fix: convert it to str, int, float, "
            "bool, None, bytes, a list or a dict first"
        ) from None
    return value


def check_memories(memories: Any, argument: str = "memories") -> list[Memory]:
    """`memories` (an iterable of `Memory`) as a list of checked copies: text,
    numbers and metadata as both backends store them (see the module docstring).
    The category rules (confidence minimum, TTL) are `typed.prepare`'s."""
    if isinstance(memories, (str, bytes, Mapping)) or not hasattr(memories, "__iter__"):
        raise InvalidTypeError(f"{argument}: expected a list of Memory, got {type(memories).__name__}")
    return [check_memory(m, f"{argument}[{i}]") for i, m in enumerate(memories)]


def check_memory(memory: Any, argument: str = "memory") -> Memory:
    """One `Memory` as `check_memories` checks it."""
    if not isinstance(memory, Memory):
        raise InvalidTypeError(f"{argument}: expected a ctxfold.memory.Memory, got {type(memory).__name__}")
    m = memory
    source, effectiveness = m.source, m.effectiveness
    if not isinstance(source, Source):
        raise InvalidTypeError(f"{argument}.source: expected a ctxfold.memory.Source, got {type(source).__name__}")
    if not isinstance(effectiveness, Effectiveness):
        raise InvalidTypeError(
            f"{argument}.effectiveness: expected a ctxfold.memory.Effectiveness, got {type(effectiveness).__name__}"
        )
    checked = {
        "content": text(m.content, f"{argument}.content"),
        "category": text(m.category, f"{argument}.category", key=True),
        "id": text(m.id, f"{argument}.id", key=True),
        "summary": text(m.summary, f"{argument}.summary"),
        "confidence": float(m.confidence) if m.confidence is not None and _is_number(m.confidence) else m.confidence,
        "tags": text_list(m.tags, f"{argument}.tags"),
        "ttl": float(m.ttl) if m.ttl is not None and _is_number(m.ttl) else m.ttl,
        "metadata": metadata(m.metadata, f"{argument}.metadata"),
        "created_at": number(m.created_at, f"{argument}.created_at", optional=True),
        "updated_at": number(m.updated_at, f"{argument}.updated_at", optional=True),
        "merged": integer(m.merged, f"{argument}.merged"),
        "archived_reason": text(m.archived_reason, f"{argument}.archived_reason"),
        "archived_at": number(m.archived_at, f"{argument}.archived_at", optional=True),
        "superseded_by": text(m.superseded_by, f"{argument}.superseded_by"),
        "score": number(m.score, f"{argument}.score"),
    }
    source_fields = {
        "session": text(source.session, f"{argument}.source.session"),
        "agent": text(source.agent, f"{argument}.source.agent"),
        "timestamp": number(source.timestamp, f"{argument}.source.timestamp", optional=True),
    }
    if any(v is not getattr(source, k) for k, v in source_fields.items()):
        checked["source"] = Source(**source_fields)
    where = f"{argument}.effectiveness"
    effectiveness_fields = {
        "applications": integer(effectiveness.applications, f"{where}.applications"),
        "successes": integer(effectiveness.successes, f"{where}.successes"),
        "score": number(effectiveness.score, f"{where}.score"),
        "last_applied": number(effectiveness.last_applied, f"{where}.last_applied", optional=True),
    }
    if any(v is not getattr(effectiveness, k) for k, v in effectiveness_fields.items()):
        checked["effectiveness"] = Effectiveness(**effectiveness_fields)
    changed = {k: v for k, v in checked.items() if v is not getattr(m, k)}
    return msgspec.structs.replace(m, **changed) if changed else m
