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
    "StaticEmbedder": "ctxfold.embed",
    "Summarizer": "ctxfold.summarize",
    "BaseSummarizer": "ctxfold.summarize",
    "CallableSummarizer": "ctxfold.summarize",
    "OnnxSeq2SeqSummarizer": "ctxfold.summarize",
    "ExtractiveSummarizer": "ctxfold.summarize",
    "compress": "ctxfold.summarize",
    "CompressionResult": "ctxfold.summarize",
    "CompressedChunk": "ctxfold.summarize",
    # the context engine
    "ContextEngine": "ctxfold.engine",
    "HeadTailSummarizer": "ctxfold.summarize",
    "EngineConfig": "ctxfold.engine",
    "CacheAwareSession": "ctxfold.engine",
    "CachePricing": "ctxfold.engine",
    "ContextResult": "ctxfold.engine",
    "ItemResult": "ctxfold.engine",
    "Report": "ctxfold.engine",
    "ConversationArc": "ctxfold.text.arc",
    "build_arc": "ctxfold.text.arc",
    "segment_dialogue": "ctxfold.text.dialogue",
    "dialogue_boundary_costs": "ctxfold.text.dialogue",
    "from_anthropic": "ctxfold.adapters",
    "to_anthropic": "ctxfold.adapters",
    "recall_tool": "ctxfold.engine",
    "RecallTool": "ctxfold.engine",
    # text: relative dates
    "resolve_dates": "ctxfold.text.temporal",
    "annotate_dates": "ctxfold.text.temporal",
    "with_date_note": "ctxfold.text.temporal",
    "strip_date_annotations": "ctxfold.text.temporal",
    "DateReference": "ctxfold.text.temporal",
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
    # `X as X`: the explicit re-export form type checkers accept for lazy names.
    from ctxfold.adapters import from_anthropic as from_anthropic, to_anthropic as to_anthropic
    from ctxfold.engine.archive import RecallTool as RecallTool, recall_tool as recall_tool
    from ctxfold.engine.config import EngineConfig as EngineConfig
    from ctxfold.embed.onnx import Embedder as Embedder, EmbeddingCache as EmbeddingCache, MemoryEmbeddingCache as MemoryEmbeddingCache
    from ctxfold.summarize.compress import CompressedChunk as CompressedChunk, CompressionResult as CompressionResult, compress as compress
    from ctxfold.engine.context_engine import ContextEngine as ContextEngine
    from ctxfold.summarize.head_tail import HeadTailSummarizer as HeadTailSummarizer
    from ctxfold.summarize.extractive import ExtractiveSummarizer as ExtractiveSummarizer
    from ctxfold.engine.session import CacheAwareSession as CacheAwareSession, CachePricing as CachePricing
    from ctxfold.memory import ConversationStore as ConversationStore, Memory as Memory, MemoryStore as MemoryStore, PostgresStore as PostgresStore, Scope as Scope, SqliteStore as SqliteStore
    from ctxfold.embed.static import StaticEmbedder as StaticEmbedder
    from ctxfold.summarize.callable import CallableSummarizer as CallableSummarizer
    from ctxfold.summarize.protocol import BaseSummarizer as BaseSummarizer, Summarizer as Summarizer
    from ctxfold.summarize.seq2seq import OnnxSeq2SeqSummarizer as OnnxSeq2SeqSummarizer
    from ctxfold.engine.results import ContextResult as ContextResult, ItemResult as ItemResult, Report as Report
    from ctxfold.text.arc import ConversationArc as ConversationArc, build_arc as build_arc
    from ctxfold.text.dialogue import dialogue_boundary_costs as dialogue_boundary_costs, segment_dialogue as segment_dialogue
    from ctxfold.text.temporal import DateReference as DateReference, annotate_dates as annotate_dates, with_date_note as with_date_note, resolve_dates as resolve_dates, strip_date_annotations as strip_date_annotations
