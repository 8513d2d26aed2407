"""`SqlStore`: one database's stores, one per concern, over one shared
`Backend` (its connection and transactions; see `ctxfold.memory.backend`).

- ``store.memories``: typed memories, knowledge updates, search, YAML export;
- ``store.archive``: expired and superseded memories;
- ``store.caches``: the engine's caches (summaries, embeddings, memo values);
- ``store.chat``, ``store.working``, ``store.episodes``: the memory tiers;
- ``store.agent_messages``: direct messages between agents;
- ``store.iterations``: the iteration logs of an agent's loop.

``add``, ``get``, ``search`` and ``history`` are ``store.memories``' own,
for the common case; ``clear`` and ``close`` concern the whole store. Every
public write is one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy.typing as npt

from ctxfold.memory.archive import MemoryArchive
from ctxfold.memory.backend import Backend, Part
from ctxfold.memory.caches import Caches
from ctxfold.memory.iterations import Iterations
from ctxfold.memory.memories import Memories
from ctxfold.memory.messages import AgentMessages
from ctxfold.memory.records import Memory
from ctxfold.memory.schema import SCOPED_TABLES
from ctxfold.memory.scope import Scope, check_scope
from ctxfold.memory.tiers import ChatHistory, Episodes, WorkingMemories
from ctxfold.memory.updates import MERGE_THRESHOLD, SUPERSEDE_THRESHOLD, AddResult

__all__ = ["SqlStore"]


class SqlStore(Part):
    """The `MemoryStore` implementation over a SQL database (see `SqliteStore`
    and `PostgresStore` for the constructors)."""

    idempotent = frozenset({"add"})

    def __init__(
        self,
        backend: Backend,
        *,
        merge_threshold: float | None = MERGE_THRESHOLD,
        supersede_threshold: float | None = SUPERSEDE_THRESHOLD,
        matrix_cache_bytes: int = 1 << 30,
    ) -> None:
        super().__init__(backend)
        self.archive = MemoryArchive(backend)
        self.memories = Memories(
            backend, self.archive, merge_threshold=merge_threshold, supersede_threshold=supersede_threshold,
            matrix_cache_bytes=matrix_cache_bytes,
        )
        self.caches = Caches(backend)
        self.chat = ChatHistory(backend)
        self.working = WorkingMemories(backend)
        self.episodes = Episodes(backend)
        self.agent_messages = AgentMessages(backend)
        self.iterations = Iterations(backend)

    @property
    def location(self) -> str:
        """The path or the DSN (password masked), for messages."""
        return self.backend.location

    @property
    def embedder(self) -> Any:
        """The embedder texts are searched with (the shared `StaticEmbedder` by default)."""
        return self.backend.embedder

    def close(self) -> None:
        """Close the connection or pool (idempotent)."""
        self.backend.close()
        self.memories._index.clear()

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the memories' common calls ---------------------------------------------------------

    def add(self, memory: Memory, *, scope: Scope, embedding: Any = None, merge: bool = True) -> AddResult:
        """``store.memories.add``: store ``memory`` in ``scope``; the id, with ``.action``."""
        return self.memories.add(memory, scope=scope, embedding=embedding, merge=merge)

    def get(self, memory_id: str, *, scope: Scope) -> Memory | None:
        """``store.memories.get``: the active memory ``memory_id`` in ``scope``, or None."""
        return self.memories.get(memory_id, scope=scope)

    def search(
        self,
        query: str | npt.ArrayLike,
        *,
        scope: Scope,
        k: int = 10,
        threshold: float | None = None,
        categories: Sequence[str] | None = None,
    ) -> list[Memory]:
        """``store.memories.search``: the ``k`` memories of ``scope`` most similar to ``query``."""
        return self.memories.search(query, scope=scope, k=k, threshold=threshold, categories=categories)

    def history(self, memory_id: str, *, scope: Scope) -> list[Memory]:
        """``store.memories.history``: the knowledge updates ``memory_id`` belongs to, oldest first."""
        return self.memories.history(memory_id, scope=scope)

    # --- the whole store -------------------------------------------------------------------------

    def clear(self, scope: Scope) -> int:
        """Delete every record of ``scope`` (memories, archive, messages, working
        memory, episodes, iteration records, agent messages, compaction
        summaries, memo values: every table in `SCOPED_TABLES`) and nothing
        else; how many rows went. A wide scope clears every scope it covers."""
        check_scope(scope, write=False)
        db = self.backend
        with db.write() as cur:
            sids = db.scope_ids_of(cur, scope)
            removed = 0
            for sid in sids:
                for table in SCOPED_TABLES:
                    removed += len(db.execute(cur, f"DELETE FROM {table} WHERE scope_id = ? RETURNING scope_id", (sid,)).fetchall())
                db.bump(cur, sid)
        return removed
