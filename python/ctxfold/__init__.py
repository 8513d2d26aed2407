"""ctxfold: fit an LLM agent's context into a token budget.

Exact token counting (the OpenAI encodings compiled in, any Hugging Face
tokenizer.json) and the numeric primitives run in the Rust core
(`ctxfold._core`, private); this package is the public API.

The Rust primitives and errors are imported eagerly (they cost nothing until
used); the Python layers (engine, models, summarizers) load on first access,
so `import ctxfold` stays light for a script that only counts tokens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxfold._core import (
    Bm25,
    BudgetAllocation,
    Tokenizer,
    __version__,
    cosine_similarity,
    count_tokens,
    count_until,
    decay_weights,
    encoding_for_model,
    known_models,
    list_encodings,
    negotiate_budget,
    plan_layers,
    segment,
    select_options,
    spectral_clustering,
    top_k,
    top_k_normalized,
    quantize_rows,
    truncate,
)
from ctxfold._lazy import lazy_attributes
from ctxfold.errors import (
    BudgetError,
    CtxFoldError,
    InvalidInputError,
    InvalidTypeError,
    MissingFileError,
    ModelError,
    ModelNotFoundError,
    StoreError,
    UnknownEncodingError,
    UnknownModelError,
)
from ctxfold.tokens import approximate_tokens, count_messages, get_tokenizer

#: Public names of the Python layers and the module each comes from.
_LAZY = {
    # models, embeddings, summarizers
    "Embedder": "ctxfold.embed",
    "EmbeddingCache": "ctxfold.embed",
    "MemoryEmbeddingCache": "ctxfold.embed",
    "StaticEmbedder": "ctxfold.static_embed",
    "Summarizer": "ctxfold.summarize",
    "BaseSummarizer": "ctxfold.summarize",
    "CallableSummarizer": "ctxfold.summarize",
    "OnnxSeq2SeqSummarizer": "ctxfold.summarize",
    "ExtractiveSummarizer": "ctxfold.extractive",
    "compress": "ctxfold.compress",
    "CompressionResult": "ctxfold.compress",
    "CompressedChunk": "ctxfold.compress",
    # the context engine
    "ContextEngine": "ctxfold.engine",
    "HeadTailSummarizer": "ctxfold.engine",
    "EngineConfig": "ctxfold.config",
    "CacheAwareSession": "ctxfold.incremental",
    "CachePricing": "ctxfold.incremental",
    "ContextResult": "ctxfold.types",
    "ItemResult": "ctxfold.types",
    "Report": "ctxfold.types",
    "from_anthropic": "ctxfold.adapters",
    "to_anthropic": "ctxfold.adapters",
    "recall_tool": "ctxfold.archive",
    "RecallTool": "ctxfold.archive",
    # text: relative dates
    "resolve_dates": "ctxfold.temporal",
    "annotate_dates": "ctxfold.temporal",
    "strip_date_annotations": "ctxfold.temporal",
    "DateReference": "ctxfold.temporal",
    # [memory] memory persistence
    "MemoryStore": "ctxfold.memory",
    "SqliteStore": "ctxfold.memory",
    "PostgresStore": "ctxfold.memory",
    "Scope": "ctxfold.memory",
    "Memory": "ctxfold.memory",
    "ConversationStore": "ctxfold.memory",
}

__all__ = [
    "__version__",
    # token counting
    "Tokenizer",
    "count_tokens",
    "count_until",
    "truncate",
    "count_messages",
    "approximate_tokens",
    "get_tokenizer",
    "encoding_for_model",
    "known_models",
    "list_encodings",
    # numeric core
    "cosine_similarity",
    "top_k",
    "top_k_normalized",
    "quantize_rows",
    "Bm25",
    "spectral_clustering",
    "segment",
    "decay_weights",
    "BudgetAllocation",
    "negotiate_budget",
    "plan_layers",
    "select_options",
    # errors
    "CtxFoldError",
    "InvalidInputError",
    "InvalidTypeError",
    "UnknownModelError",
    "UnknownEncodingError",
    "MissingFileError",
    "BudgetError",
    "ModelError",
    "ModelNotFoundError",
    "StoreError",
    # Python layers, loaded on first use
    *_LAZY,
]


__getattr__, __dir__ = lazy_attributes(globals(), _LAZY)


if TYPE_CHECKING:
    from ctxfold.adapters import from_anthropic, to_anthropic
    from ctxfold.archive import RecallTool, recall_tool
    from ctxfold.config import EngineConfig
    from ctxfold.embed import Embedder, EmbeddingCache, MemoryEmbeddingCache
    from ctxfold.compress import CompressedChunk, CompressionResult, compress
    from ctxfold.engine import ContextEngine, HeadTailSummarizer
    from ctxfold.extractive import ExtractiveSummarizer
    from ctxfold.incremental import CacheAwareSession, CachePricing
    from ctxfold.memory import ConversationStore, Memory, MemoryStore, PostgresStore, Scope, SqliteStore
    from ctxfold.static_embed import StaticEmbedder
    from ctxfold.summarize import BaseSummarizer, CallableSummarizer, OnnxSeq2SeqSummarizer, Summarizer
    from ctxfold.temporal import DateReference, annotate_dates, resolve_dates, strip_date_annotations
    from ctxfold.types import ContextResult, ItemResult, Report
