"""The numeric primitives of the Rust core, for callers who build their own
pipeline: similarity search, BM25, segmentation and clustering, decay
weights and budget allocation. The most used are re-exported from `ctxfold`."""

from __future__ import annotations

from ctxfold._core import (
    Bm25 as Bm25,
    BudgetAllocation as BudgetAllocation,
    cosine_similarity as cosine_similarity,
    decay_weights as decay_weights,
    negotiate_budget as negotiate_budget,
    plan_layers as plan_layers,
    quantize_rows as quantize_rows,
    segment as segment,
    select_options as select_options,
    spectral_clustering as spectral_clustering,
    top_k as top_k,
    top_k_normalized as top_k_normalized,
)

__all__ = [
    "Bm25",
    "BudgetAllocation",
    "cosine_similarity",
    "decay_weights",
    "negotiate_budget",
    "plan_layers",
    "quantize_rows",
    "segment",
    "select_options",
    "spectral_clustering",
    "top_k",
    "top_k_normalized",
]
