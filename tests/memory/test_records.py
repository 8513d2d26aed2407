"""Memory records: effectiveness tracking."""

from __future__ import annotations

import pytest
from ctxfold.errors import StoreError
from ctxfold.memory import Memory
from memory_stores import U1


def test_effectiveness_tracking(store) -> None:
    mid = store.add(Memory(category="learning", content="Use the staging key"), scope=U1)
    store.memories.record_application(mid, scope=U1, success=True)
    m = store.memories.record_application(mid, scope=U1, success=False)
    assert (m.effectiveness.applications, m.effectiveness.successes) == (2, 1)
    assert m.effectiveness.score == pytest.approx(0.5) and m.effectiveness.last_applied is not None
    assert store.get(mid, scope=U1).effectiveness == m.effectiveness
    with pytest.raises(StoreError, match="no memory"):
        store.memories.record_application("nope", scope=U1, success=True)
