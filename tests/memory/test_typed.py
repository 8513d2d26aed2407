"""Typed memories: each category's TTL and minimum confidence."""

from __future__ import annotations

import math

import pytest
from ctxfold.errors import InvalidInputError
from ctxfold.memory import Memory
from ctxfold.memory.typed import DAY
from memory_stores import U1


# --- typed memories ----------------------------------------------------------------------
def test_category_defaults_and_min_confidence(store) -> None:
    expected = {"fact": math.inf, "decision": math.inf, "learning": 90 * DAY, "error": 30 * DAY, "preference": math.inf}
    for category, ttl in expected.items():
        mid = store.add(Memory(category=category, content=f"a {category}", confidence=0.95), scope=U1)
        assert store.get(mid, scope=U1).ttl == ttl
    for category, minimum in {"fact": 0.8, "decision": 0.9, "learning": 0.7, "error": 0.6, "preference": 0.5}.items():
        with pytest.raises(InvalidInputError, match=f"minimum {minimum}"):
            store.add(Memory(category=category, content="unsure", confidence=minimum - 0.01), scope=U1)
        store.add(Memory(category=category, content=f"sure {category}", confidence=minimum), scope=U1)
    with pytest.raises(InvalidInputError, match="category"):
        store.add(Memory(category="rumour", content="x"), scope=U1)
    with pytest.raises(InvalidInputError, match="rejected"):  # the whole batch is refused
        store.memories.add_many([Memory(content="ok"), Memory(content="bad", confidence=0.1)], scope=U1)
    assert store.get(store.add(Memory(content="ok"), scope=U1), scope=U1).merged == 0
