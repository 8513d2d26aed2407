"""Embeddings a store keeps: a vector of the wrong dimension is refused, naming the fix."""

from __future__ import annotations

import pytest
from ctxfold.errors import InvalidInputError, StoreError
from ctxfold.memory import Memory
from memory_stores import U1, unit


def test_wrong_embedding_dimension(store) -> None:
    store.add(Memory(content="a"), scope=U1, embedding=unit(1, 16))
    with pytest.raises(StoreError, match="16-dimensional"):
        store.add(Memory(content="b"), scope=U1, embedding=unit(1, 8))
    with pytest.raises(StoreError, match="16-dimensional"):
        store.search(unit(2, 8), scope=U1)
    with pytest.raises(StoreError, match="embedder"):
        store.search("text embedded with the 256-d default", scope=U1)
    with pytest.raises(InvalidInputError, match="embeddings"):
        store.memories.add_many([Memory(content="c"), Memory(content="d")], scope=U1, embeddings=[unit(3, 16)])
