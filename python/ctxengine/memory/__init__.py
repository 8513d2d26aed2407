"""Memory persistence: typed memories, memory tiers, caches, iteration records
and agent messages in SQLite (the embedded default) or PostgreSQL (many agents
on many machines sharing one memory), behind one `MemoryStore` protocol.

```python
from ctxengine.memory import SqliteStore, PostgresStore, Scope, Memory
store = SqliteStore("agent.db")                  # or PostgresStore("postgresql://...")
scope = Scope(user_id="u1", conversation_id="c1")
mid = store.add(Memory(category="fact", content="Berlin office opens at 9"), scope=scope)
hits = store.search("when does the office open", scope=scope, k=10)   # Memory with .score
store.get(mid, scope=scope); store.clear(scope); store.close()
```

Reads never cross scopes unless asked with a wide scope (``scope.widen()``,
``Scope.any(user_id=...)``; see `ctxengine.memory.scope`). `PostgresStore`
needs the ``postgres`` extra (psycopg 3, psycopg_pool), imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxengine._lazy import lazy_attributes

from ctxengine.errors import StoreError
from ctxengine.memory.protocol import MemoryStore
from ctxengine.memory.records import Effectiveness, Memory, Source
from ctxengine.memory.scope import Scope
from ctxengine.memory.sqlite import SqliteStore
from ctxengine.memory.typed import CATEGORIES, CATEGORY_FILES, CategoryRule

_LAZY = {
    "PostgresStore": "ctxengine.memory.postgres",
    "mask_dsn": "ctxengine.memory.postgres",
    "ConversationStore": "ctxengine.memory.conversation",
    "ConversationStats": "ctxengine.memory.conversation",
    "MemoryTiers": "ctxengine.memory.tiers",
    "ChatMessage": "ctxengine.memory.tiers",
    "WorkingMemory": "ctxengine.memory.tiers",
    "Episode": "ctxengine.memory.tiers",
    "IterationLog": "ctxengine.memory.iterations",
    "ToolCallRecord": "ctxengine.memory.iterations",
    "IterationSynthesis": "ctxengine.memory.iterations",
    "AgentMessage": "ctxengine.memory.messages",
    "CompactionSummary": "ctxengine.memory.caches",
    "export_yaml": "ctxengine.memory.export",
    "import_yaml": "ctxengine.memory.export",
}

__all__ = [
    "MemoryStore",
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
    from ctxengine.memory.caches import CompactionSummary
    from ctxengine.memory.conversation import ConversationStats, ConversationStore
    from ctxengine.memory.export import export_yaml, import_yaml
    from ctxengine.memory.iterations import (
        IterationLog,
        IterationSynthesis,
        ToolCallRecord,
    )
    from ctxengine.memory.messages import AgentMessage
    from ctxengine.memory.postgres import PostgresStore, mask_dsn
    from ctxengine.memory.tiers import ChatMessage, Episode, MemoryTiers, WorkingMemory
