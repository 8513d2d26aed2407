"""The memory record (a msgspec Struct, stored msgpack-encoded) and its parts.

A `Memory` is one long-term, typed memory (Loa's schema): a category with a
default TTL and a minimum confidence (see `ctxfold.memory.typed`), the
content and an optional summary, where it came from (`Source`), tags, and how
well it has worked when applied (`Effectiveness`). The store fills ``id``,
``source.timestamp``, ``created_at``/``updated_at`` and ``ttl`` on add; a
search fills ``score`` (cosine similarity to the query).
"""

from __future__ import annotations

import math
import time
from typing import Any, Literal

import msgspec

__all__ = ["Effectiveness", "Memory", "MemoryStatus", "Source", "decoder", "encode"]

MemoryStatus = Literal["active", "archived"]


class Source(msgspec.Struct, kw_only=True):
    """Where a memory came from. Empty fields are filled from the scope it is
    added in (``session``, ``agent``) and the time of the add (``timestamp``)."""

    session: str = ""
    agent: str = ""
    timestamp: float | None = None


class Effectiveness(msgspec.Struct, kw_only=True):
    """How a memory fared when applied: ``score`` is the Laplace-smoothed
    success rate ``(successes + 1) / (applications + 2)`` (0.5 before any use)."""

    applications: int = 0
    successes: int = 0
    score: float = 0.5
    last_applied: float | None = None

    def record(self, success: bool, when: float | None = None) -> None:
        self.applications += 1
        self.successes += int(bool(success))
        self.score = (self.successes + 1) / (self.applications + 2)
        self.last_applied = time.time() if when is None else when


class Memory(msgspec.Struct, kw_only=True):
    """One typed memory.

    - ``category``: ``fact``, ``decision``, ``learning``, ``error`` or ``preference``;
    - ``content``: the memory itself (what is embedded and searched);
    - ``confidence``: 0..1, at least the category's minimum (else the add raises);
    - ``ttl``: seconds to live; ``None`` takes the category's default,
      ``math.inf`` is permanent; the stored record holds the resolved value;
    - ``id``: empty to let the store derive it from the category and content
      (so adding the same memory twice gives the same id and one record).
    """

    content: str
    category: str = "fact"
    id: str = ""
    summary: str = ""
    confidence: float = 1.0
    source: Source = msgspec.field(default_factory=Source)
    tags: list[str] = msgspec.field(default_factory=list)
    ttl: float | None = None
    effectiveness: Effectiveness = msgspec.field(default_factory=Effectiveness)
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    created_at: float | None = None
    updated_at: float | None = None
    merged: int = 0
    """How many near-duplicates were merged into this memory."""
    status: MemoryStatus = "active"
    archived_reason: str = ""
    """Why it left the active set: ``expired``, ``superseded`` or ``archived``."""
    archived_at: float | None = None
    superseded_by: str = ""
    """The id of the memory that replaced this one (set when it is archived as ``superseded``)."""
    supersedes: str = ""
    """The id of the memory this one replaced (now archived); see `Memories.history`."""
    score: float = 0.0
    """Cosine similarity to the query of the search that returned it."""

    @property
    def expires_at(self) -> float | None:
        """When the memory expires (``None``: never)."""
        if self.ttl is None or math.isinf(self.ttl) or self.created_at is None:
            return None
        return self.created_at + self.ttl

    def expired(self, now: float | None = None) -> bool:
        """Whether the TTL has run out at ``now`` (default: the current time)."""
        at = self.expires_at
        return at is not None and at <= (time.time() if now is None else now)


def _enc_hook(value: Any) -> Any:
    # A str subclass (an `AddResult` id kept in a record) is stored as the plain str.
    if isinstance(value, str):
        return str(value)
    raise TypeError(f"Encoding objects of type {type(value).__name__} is unsupported")


_encoder = msgspec.msgpack.Encoder(enc_hook=_enc_hook)
encode = _encoder.encode
decoder = msgspec.msgpack.Decoder(Memory)
