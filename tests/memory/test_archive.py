"""`store.archive`: expired and superseded memories move there."""

from __future__ import annotations

import time

from ctxfold.memory import Memory
from ctxfold.memory.typed import DAY
from memory_stores import U1, U2


def test_expired_memories_move_to_the_archive(store) -> None:
    old = time.time() - 31 * DAY
    keep = store.add(Memory(category="learning", content="retry with backoff", created_at=old), scope=U1)
    mid = store.add(Memory(category="error", content="timeout on the staging API", created_at=old), scope=U1)
    assert store.get(mid, scope=U1) is None
    assert [h.id for h in store.search("timeout staging", scope=U1)] == [keep]
    assert store.archive.expire(scope=U1) == 1
    archived = store.archive.all(scope=U1)
    assert [(m.id, m.status, m.archived_reason) for m in archived] == [(mid, "archived", "expired")]
    assert store.archive.get(mid, scope=U1).content == "timeout on the staging API"
    assert store.archive.all(scope=U2) == []
    # the next write in the scope archives what expired on the way
    gone = store.add(Memory(category="error", content="disk full", created_at=old), scope=U1)
    store.add(Memory(content="a fact"), scope=U1)
    assert store.archive.get(gone, scope=U1).archived_reason == "expired"


def test_supersede_and_archive(store) -> None:
    old = store.add(Memory(category="decision", content="Deploy on Fridays"), scope=U1)
    new = store.memories.supersede(old, Memory(category="decision", content="Never deploy on Fridays"), scope=U1)
    assert store.get(old, scope=U1) is None and store.get(new, scope=U1) is not None
    gone = store.archive.get(old, scope=U1)
    assert gone.archived_reason == "superseded" and gone.superseded_by == new
    assert store.archive.move(new, scope=U1) and not store.archive.move(new, scope=U1)
    assert store.memories.delete(store.add(Memory(content="tmp"), scope=U1), scope=U1)
