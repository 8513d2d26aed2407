"""Sentence embedders: anything with ``embed(list[str]) -> (n, dim)`` unit
rows. `onnx.Embedder` runs all-MiniLM-L6-v2 with onnxruntime; `static.StaticEmbedder`
is its distilled token table (no model run, the engine's default)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxfold._lazy import lazy_attributes

_LAZY = {
    "Embedder": "ctxfold.embed.onnx",
    "EmbeddingCache": "ctxfold.embed.onnx",
    "MemoryEmbeddingCache": "ctxfold.embed.onnx",
    "StaticEmbedder": "ctxfold.embed.static",
}
__all__ = list(_LAZY)
__getattr__, __dir__ = lazy_attributes(globals(), _LAZY)

if TYPE_CHECKING:
    from ctxfold.embed.onnx import (
        Embedder as Embedder,
        EmbeddingCache as EmbeddingCache,
        MemoryEmbeddingCache as MemoryEmbeddingCache,
    )
    from ctxfold.embed.static import StaticEmbedder as StaticEmbedder
