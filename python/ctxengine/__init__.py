"""ctxengine: fit an LLM agent's context into a token budget.

Exact token counting (the OpenAI encodings compiled in, any Hugging Face
tokenizer.json) and the numeric primitives run in the Rust core
(`ctxengine._core`, private); this package is the public API.

The Rust primitives and errors are imported eagerly (they cost nothing until
used); the Python layers (engine, models, summarizers) load on first access,
so `import ctxengine` stays light for a script that only counts tokens.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxengine._core import (
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
from ctxengine._lazy import lazy_attributes
from ctxengine.errors import (
    BudgetError,
    CtxEngineError,
    InvalidInputError,
    InvalidTypeError,
    MissingFileError,
    ModelError,
    ModelNotFoundError,
    StoreError,
    UnknownEncodingError,
    UnknownModelError,
)
from ctxengine.tokens import approximate_tokens, count_messages, get_tokenizer

#: Public names of the Python layers and the module each comes from.
_LAZY = {
    # models, embeddings, summarizers (issue 4)
    "Embedder": "ctxengine.embed",
    "EmbeddingCache": "ctxengine.embed",
    "MemoryEmbeddingCache": "ctxengine.embed",
    "StaticEmbedder": "ctxengine.static_embed",
    "Summarizer": "ctxengine.summarize",
    "BaseSummarizer": "ctxengine.summarize",
    "CallableSummarizer": "ctxengine.summarize",
    "OnnxSeq2SeqSummarizer": "ctxengine.summarize",
    "ExtractiveSummarizer": "ctxengine.extractive",
    "compress": "ctxengine.compress",
    "CompressionResult": "ctxengine.compress",
    "CompressedChunk": "ctxengine.compress",
    # the context engine (issue 5)
    "ContextEngine": "ctxengine.engine",
    "HeadTailSummarizer": "ctxengine.engine",
    "EngineConfig": "ctxengine.config",
    "ContextResult": "ctxengine.types",
    "ItemResult": "ctxengine.types",
    "Report": "ctxengine.types",
    "from_anthropic": "ctxengine.adapters",
    "to_anthropic": "ctxengine.adapters",
    # [memory] memory persistence (issue 6)
    "MemoryStore": "ctxengine.memory",
    "SqliteStore": "ctxengine.memory",
    "PostgresStore": "ctxengine.memory",
    "Scope": "ctxengine.memory",
    "Memory": "ctxengine.memory",
    "ConversationStore": "ctxengine.memory",
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
    "CtxEngineError",
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
    from ctxengine.adapters import from_anthropic, to_anthropic
    from ctxengine.config import EngineConfig
    from ctxengine.embed import Embedder, EmbeddingCache, MemoryEmbeddingCache
    from ctxengine.compress import CompressedChunk, CompressionResult, compress
    from ctxengine.engine import ContextEngine, HeadTailSummarizer
    from ctxengine.extractive import ExtractiveSummarizer
    from ctxengine.memory import ConversationStore, Memory, MemoryStore, PostgresStore, Scope, SqliteStore
    from ctxengine.static_embed import StaticEmbedder
    from ctxengine.summarize import BaseSummarizer, CallableSummarizer, OnnxSeq2SeqSummarizer, Summarizer
    from ctxengine.types import ContextResult, ItemResult, Report
