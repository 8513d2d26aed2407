"""The `MemoryStore` protocol: what the engine and agents may rely on from any
backend (`SqliteStore`, `PostgresStore`, or one of your own)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ctxfold.memory.records import Memory
from ctxfold.memory.scope import Scope
from ctxfold.memory.updates import AddResult

__all__ = ["MemoryStore"]


@runtime_checkable
class MemoryStore(Protocol):
    """Typed memories by scope, semantic search, and the engine's caches."""

    # What an add did (added, merged into an existing memory, or superseded one),
    # as the id of the current memory: see `ctxfold.memory.updates.AddResult`.
    def add(self, memory: Memory, *, scope: Scope, embedding: Any = None, merge: bool = True) -> AddResult: ...

    def add_many(
        self, memories: Iterable[Memory], *, scope: Scope, embeddings: Any = None, merge: bool = False
    ) -> list[AddResult]: ...

    def get(self, memory_id: str, *, scope: Scope) -> Memory | None: ...

    def search(
        self,
        query: str | npt.ArrayLike,
        *,
        scope: Scope,
        k: int = 10,
        threshold: float | None = None,
        categories: Sequence[str] | None = None,
    ) -> list[Memory]: ...

    def clear(self, scope: Scope) -> int: ...

    def close(self) -> None: ...

    # the engine's caches (see ctxfold.memory.caches)
    def get_summary(self, content_hash: str, level: int) -> str | None: ...

    def put_summary(self, content_hash: str, level: int, summary: str, tokens: int = 0) -> None: ...

    def get_embeddings(self, hashes: Sequence[str], model: str) -> Mapping[str, npt.NDArray[np.float32]]: ...

    def put_embeddings(self, hashes: Sequence[str], model: str, vectors: npt.ArrayLike) -> None: ...
