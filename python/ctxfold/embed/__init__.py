"""Sentence embedders: anything with ``embed(list[str]) -> (n, dim)`` unit
rows. `onnx.Embedder` runs all-MiniLM-L6-v2 with onnxruntime; `static.StaticEmbedder`
is its distilled token table (no model run, the engine's default);
`projected.ProjectedEmbedder` maps the table's vectors into MiniLM's space,
and `projected.ModelView` sets them beside a question MiniLM read (the
engine's second view of it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxfold._lazy import lazy_attributes

_LAZY = {
    "Embedder": "ctxfold.embed.onnx",
    "EmbeddingCache": "ctxfold.embed.onnx",
    "MemoryEmbeddingCache": "ctxfold.embed.onnx",
    "StaticEmbedder": "ctxfold.embed.static",
    "ModelView": "ctxfold.embed.projected",
    "ProjectedEmbedder": "ctxfold.embed.projected",
    "SharedEncoder": "ctxfold.embed.projected",
}
__all__ = list(_LAZY)
__getattr__, __dir__ = lazy_attributes(globals(), _LAZY)

if TYPE_CHECKING:
    from ctxfold.embed.onnx import (
        Embedder as Embedder,
        EmbeddingCache as EmbeddingCache,
        MemoryEmbeddingCache as MemoryEmbeddingCache,
    )
    from ctxfold.embed.projected import (
        ModelView as ModelView,
        ProjectedEmbedder as ProjectedEmbedder,
        SharedEncoder as SharedEncoder,
    )
    from ctxfold.embed.static import StaticEmbedder as StaticEmbedder
