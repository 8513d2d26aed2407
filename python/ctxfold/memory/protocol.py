"""The `MemoryStore` protocol: what the engine and agents may rely on from any
backend (`SqliteStore`, `PostgresStore`, or one of your own), and
`EngineCaches`, the part of it `ContextEngine(store=...)` uses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ctxfold.memory.records import Memory
from ctxfold.memory.scope import Scope
from ctxfold.memory.updates import AddResult

__all__ = ["EngineCaches", "MemoryStore"]


@runtime_checkable
class EngineCaches(Protocol):
    """Summaries, embeddings and memoised values by key (``store.caches``)."""

    def get_summary(self, content_hash: str, level: int) -> str | None: ...

    def put_summary(self, content_hash: str, level: int, summary: str, tokens: int = 0) -> None: ...

    def get_embeddings(self, hashes: Sequence[str], model: str) -> Mapping[str, npt.NDArray[np.float32]]: ...

    def put_embeddings(self, hashes: Sequence[str], model: str, vectors: npt.ArrayLike) -> None: ...

    def memo_get(self, namespace: str, key: Any, default: Any = None) -> Any: ...

    def memo_set(self, namespace: str, key: Any, value: Any) -> None: ...


@runtime_checkable
class MemoryStore(Protocol):
    """Typed memories by scope, semantic search, and the engine's caches."""

    @property
    def caches(self) -> EngineCaches:
        """The engine's persistent caches on this store (summaries, embeddings, memoisation)."""
        ...

    def add(self, memory: Memory, *, scope: Scope, embedding: Any = None, merge: bool = True) -> AddResult:
        """Store ``memory`` in ``scope``; the id of the current memory, with `.action`:
        added, merged into an existing memory, or superseding one (`ctxfold.memory.updates.AddResult`)."""
        ...

    def get(self, memory_id: str, *, scope: Scope) -> Memory | None:
        """The memory stored under ``memory_id`` in ``scope``, or None."""
        ...

    def search(
        self,
        query: str | npt.ArrayLike,
        *,
        scope: Scope,
        k: int = 10,
        threshold: float | None = None,
        categories: Sequence[str] | None = None,
    ) -> list[Memory]:
        """The ``k`` current memories of ``scope`` closest to ``query`` (a text or a vector), best first, with `.score`."""
        ...

    def clear(self, scope: Scope) -> int:
        """Delete every record of exactly ``scope``; how many rows went."""
        ...

    def close(self) -> None:
        """Release the connection (or pool)."""
        ...
