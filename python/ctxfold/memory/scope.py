"""Scopes: who a record belongs to.

Every record is written into one *exact* scope: four strings (``user_id``,
``agent_id``, ``session_id``, ``conversation_id``), any of which may be empty,
each at most `MAX_KEY_BYTES` (512) bytes of UTF-8 when written, with no NUL
character.
An empty field is a value like any other: ``Scope(user_id="u1")`` is the scope
of user u1 with no agent, session or conversation, and a read in it never sees
u1's records of conversation c1.

Reading across scopes must be asked for explicitly, with a *wide* scope whose
wildcard fields are ``None`` ("any value"):

- ``scope.widen()``: every empty field becomes a wildcard, so
  ``Scope(user_id="u1").widen()`` reads everything of user u1;
- ``scope.widen("conversation_id")``: only the named fields become wildcards
  (u1's records in any conversation, but with no agent and no session);
- ``Scope.any(user_id="u1")``: the same as ``Scope(user_id="u1").widen()``.

A wide scope can be read and cleared (``store.clear(Scope.any(user_id="u1"))``
deletes every record of u1), never written into.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.memory.checks import text

__all__ = ["SCOPE_FIELDS", "Scope"]

SCOPE_FIELDS = ("user_id", "agent_id", "session_id", "conversation_id")


class Scope(msgspec.Struct, frozen=True, kw_only=True):
    """Where a record lives (see the module docstring). ``None`` in a field
    means "any value" and makes the scope wide (read-only)."""

    user_id: str | None = ""
    agent_id: str | None = ""
    session_id: str | None = ""
    conversation_id: str | None = ""

    def __post_init__(self) -> None:
        for name in SCOPE_FIELDS:
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InvalidTypeError(
                    f"Scope.{name}: expected a str (or None for any value), got {type(value).__name__}"
                )
            # No length limit here: a scope longer than a write allows must still read and clear old rows.
            text(value, f"Scope.{name}", column=True, optional=True)

    @classmethod
    def any(cls, **fields: str) -> Scope:
        """A wide scope: the given fields fixed, every other field any value."""
        unknown = set(fields) - set(SCOPE_FIELDS)
        if unknown:
            raise InvalidInputError(f"Scope.any: unknown field(s) {sorted(unknown)}; use {list(SCOPE_FIELDS)}")
        return cls(**{name: fields.get(name) for name in SCOPE_FIELDS})

    def widen(self, *fields: str) -> Scope:
        """This scope with ``fields`` (default: every empty field) read as "any value"."""
        unknown = set(fields) - set(SCOPE_FIELDS)
        if unknown:
            raise InvalidInputError(f"Scope.widen: unknown field(s) {sorted(unknown)}; use {list(SCOPE_FIELDS)}")
        names = fields or tuple(n for n in SCOPE_FIELDS if getattr(self, n) == "")
        return msgspec.structs.replace(self, **{n: None for n in names})

    @property
    def exact(self) -> bool:
        """True when every field is fixed (a scope records can be written into)."""
        return all(getattr(self, n) is not None for n in SCOPE_FIELDS)

    def values(self) -> tuple[str | None, ...]:
        """The scope's fields in `SCOPE_FIELDS` order (None for a wildcard)."""
        return tuple(getattr(self, n) for n in SCOPE_FIELDS)

    def key(self) -> str:
        """A short stable hash of the scope (used in ids and cache keys)."""
        raw = "\x00".join("\x01" if v is None else v for v in self.values())
        return hashlib.blake2b(raw.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()

    def __str__(self) -> str:
        parts = [f"{n}={'*' if getattr(self, n) is None else repr(getattr(self, n))}" for n in SCOPE_FIELDS]
        return "Scope(" + ", ".join(parts) + ")"


def check_scope(scope: Any, *, write: bool, argument: str = "scope") -> Scope:
    """``scope`` as a `Scope`, refusing a wide one for writes."""
    if not isinstance(scope, Scope):
        raise InvalidTypeError(
            f"{argument}: expected a ctxfold.memory.Scope, got {type(scope).__name__}. "
            "Fix: pass scope=Scope(user_id=..., conversation_id=...)"
        )
    if write and not scope.exact:
        raise InvalidInputError(
            f"{argument}: {scope} is a wide scope (a field is None = any value); records are written "
            "into one exact scope. Fix: pass a Scope whose fields are all strings (empty is allowed)"
        )
    if write:
        for name in SCOPE_FIELDS:
            text(getattr(scope, name), f"{argument}.{name}", key=True)
    return scope
