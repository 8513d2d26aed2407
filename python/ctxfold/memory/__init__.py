"""Memory persistence: typed memories, memory tiers, caches, iteration records
and agent messages in SQLite (the embedded default) or PostgreSQL (many agents
on many machines sharing one memory), behind one `MemoryStore` protocol.
A store holds one store per concern over one connection: ``store.memories``,
``store.archive``, ``store.caches``, ``store.chat``, ``store.working``,
``store.episodes``, ``store.agent_messages``, ``store.iterations``.

```python
from ctxfold.memory import SqliteStore, PostgresStore, Scope, Memory
store = SqliteStore("agent.db")                  # or PostgresStore("postgresql://...")
scope = Scope(user_id="u1", conversation_id="c1")
mid = store.add(Memory(category="fact", content="Berlin office opens at 9"), scope=scope)
hits = store.search("when does the office open", scope=scope, k=10)   # Memory with .score
store.get(mid, scope=scope); store.clear(scope); store.close()
```

Reads never cross scopes unless asked with a wide scope (``scope.widen()``,
``Scope.any(user_id=...)``; see `ctxfold.memory.scope`). `PostgresStore`
needs the ``postgres`` extra (psycopg 3, psycopg_pool), imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxfold._lazy import lazy_attributes

from ctxfold.errors import StoreError
from ctxfold.memory.protocol import EngineCaches, MemoryStore
from ctxfold.memory.records import Effectiveness, Memory, Source
from ctxfold.memory.scope import Scope
from ctxfold.memory.sqlite import SqliteStore
from ctxfold.memory.typed import CATEGORIES, CATEGORY_FILES, CategoryRule

_LAZY = {
    "PostgresStore": "ctxfold.memory.postgres",
    "mask_dsn": "ctxfold.memory.postgres",
    "ConversationStore": "ctxfold.memory.conversation",
    "ConversationStats": "ctxfold.memory.conversation",
    "MemoryTiers": "ctxfold.memory.tiers",
    "ChatMessage": "ctxfold.memory.tiers",
    "WorkingMemory": "ctxfold.memory.tiers",
    "Episode": "ctxfold.memory.tiers",
    "IterationLog": "ctxfold.memory.iterations",
    "ToolCallRecord": "ctxfold.memory.iterations",
    "IterationSynthesis": "ctxfold.memory.iterations",
    "AgentMessage": "ctxfold.memory.messages",
    "CompactionSummary": "ctxfold.memory.caches",
    "export_yaml": "ctxfold.memory.export",
    "import_yaml": "ctxfold.memory.export",
}

__all__ = [
    "MemoryStore",
    "EngineCaches",
    "SqliteStore",
    "Scope",
    "Memory",
    "Source",
    "Effectiveness",
    "CategoryRule",
    "CATEGORIES",
    "CATEGORY_FILES",
    "StoreError",
    *_LAZY,
]


__getattr__, __dir__ = lazy_attributes(globals(), _LAZY)


if TYPE_CHECKING:
    from ctxfold.memory.caches import CompactionSummary as CompactionSummary
    from ctxfold.memory.conversation import ConversationStats as ConversationStats, ConversationStore as ConversationStore
    from ctxfold.memory.export import export_yaml as export_yaml, import_yaml as import_yaml
    from ctxfold.memory.iterations import (
        IterationLog as IterationLog,
        IterationSynthesis as IterationSynthesis,
        ToolCallRecord as ToolCallRecord,
    )
    from ctxfold.memory.messages import AgentMessage as AgentMessage
    from ctxfold.memory.postgres import PostgresStore as PostgresStore, mask_dsn as mask_dsn
    from ctxfold.memory.tiers import ChatMessage as ChatMessage, Episode as Episode, MemoryTiers as MemoryTiers, WorkingMemory as WorkingMemory
