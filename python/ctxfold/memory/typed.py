"""The typed-memory rules (Loa's schema): each category's default TTL and
minimum confidence, the id of a memory, and how a near-duplicate merges.

A memory whose confidence is below its category's minimum is **rejected**:
the add raises `InvalidInputError` naming the minimum (nothing is written;
in ``add_many`` the whole batch is refused before the transaction starts).
"""

from __future__ import annotations

import hashlib
import math
import time
from typing import Any

import msgspec

from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.memory.checks import unit_interval
from ctxfold.memory.records import Memory, Source
from ctxfold.memory.scope import Scope

__all__ = ["CATEGORIES", "CATEGORY_FILES", "DAY", "PERMANENT", "CategoryRule", "memory_id", "merge_into", "prepare"]

DAY = 86_400.0
PERMANENT = math.inf


class CategoryRule(msgspec.Struct, frozen=True):
    """A memory category's defaults: its time to live and the least confidence it accepts."""

    ttl: float
    """Default time to live in seconds (``inf``: permanent)."""
    min_confidence: float


CATEGORIES: dict[str, CategoryRule] = {
    "fact": CategoryRule(PERMANENT, 0.8),
    "decision": CategoryRule(PERMANENT, 0.9),
    "learning": CategoryRule(90 * DAY, 0.7),
    "error": CategoryRule(30 * DAY, 0.6),
    "preference": CategoryRule(PERMANENT, 0.5),
}

#: The YAML file each category is exported to.
CATEGORY_FILES = {
    "fact": "facts.yaml",
    "decision": "decisions.yaml",
    "learning": "learnings.yaml",
    "error": "errors.yaml",
    "preference": "preferences.yaml",
}


def memory_id(category: str, content: str) -> str:
    """The id of a memory with no id of its own: a hash of category and content."""
    raw = f"{category}\x00{content}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(raw, digest_size=16).hexdigest()


def prepare(memory: Any, scope: Scope, now: float | None = None, *, argument: str = "memory") -> Memory:
    """A validated copy of ``memory`` with id, source, timestamps and TTL filled."""
    if not isinstance(memory, Memory):
        raise InvalidTypeError(f"{argument}: expected a ctxfold.memory.Memory, got {type(memory).__name__}")
    rule = CATEGORIES.get(memory.category)
    if rule is None:
        raise InvalidInputError(
            f"{argument}.category: {memory.category!r} is not a memory category; use one of {sorted(CATEGORIES)}"
        )
    if not isinstance(memory.content, str) or not memory.content.strip():
        raise InvalidInputError(f"{argument}.content: must be a non-empty str")
    confidence = unit_interval(memory.confidence, f"{argument}.confidence")
    if confidence < rule.min_confidence:
        raise InvalidInputError(
            f"{argument}.confidence: {confidence} is below the minimum {rule.min_confidence} of category "
            f"{memory.category!r}; the memory is rejected. Fix: raise the confidence once it is better "
            "established, or store it in a category with a lower minimum (e.g. 'learning' 0.7, 'error' 0.6)"
        )
    ttl = rule.ttl if memory.ttl is None else memory.ttl
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or math.isnan(ttl) or ttl <= 0:
        raise InvalidInputError(
            f"{argument}.ttl: must be a positive number of seconds (math.inf = permanent, None = the "
            f"category default), got {memory.ttl!r}"
        )
    if not all(isinstance(t, str) for t in memory.tags):
        raise InvalidInputError(f"{argument}.tags: must be a list of str")
    now = time.time() if now is None else now
    source = Source(
        session=memory.source.session or (scope.session_id or ""),
        agent=memory.source.agent or (scope.agent_id or ""),
        timestamp=now if memory.source.timestamp is None else memory.source.timestamp,
    )
    created = now if memory.created_at is None else memory.created_at
    return msgspec.structs.replace(
        memory,
        id=memory.id or memory_id(memory.category, memory.content),
        confidence=float(confidence),
        ttl=float(ttl),
        source=source,
        tags=list(dict.fromkeys(memory.tags)),
        created_at=created,
        updated_at=created if memory.updated_at is None else memory.updated_at,
        status="active",
        score=0.0,
    )


def merge_into(existing: Memory, new: Memory, now: float) -> Memory:
    """``existing`` after absorbing its near-duplicate ``new``: tags united,
    the higher confidence, a summary if it had none, the metadata completed."""
    metadata = dict(new.metadata)
    metadata.update(existing.metadata)
    return msgspec.structs.replace(
        existing,
        tags=list(dict.fromkeys([*existing.tags, *new.tags])),
        confidence=max(existing.confidence, new.confidence),
        summary=existing.summary or new.summary,
        metadata=metadata,
        merged=existing.merged + 1,
        updated_at=now,
        score=0.0,
    )
