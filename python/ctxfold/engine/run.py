"""`RunContext`: what stays the same through one `optimize` call, handed to
every stage in one piece instead of as loose parameters."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec

from ctxfold._core import Tokenizer
from ctxfold.engine.cache import EngineCache
from ctxfold.engine.config import EngineConfig
from ctxfold.summarize.protocol import Summarizer

__all__ = ["RunContext"]


class RunContext(msgspec.Struct, frozen=True, kw_only=True):
    """The engine's tools and settings, and the facts of the call that no stage changes."""

    tokenizer: Tokenizer
    config: EngineConfig
    cache: EngineCache
    summarizer: Summarizer
    embedder: Any
    """The dense half of the semantic layer (anything with `embed`), or None for BM25 alone."""
    reranker: Any = None
    """What re-scores the first stage's short list (`config.rerank`), or None."""
    rerank_question: Any = None
    """What embeds the question for the short list, in the reranker's space,
    or None for the reranker itself."""
    model_view: Any = None
    """The question's second view, MiniLM's, beside the embedder's vectors
    mapped into its space (`ContextEngine.model_view`), or None."""
    budget: int
    """The token limit of the whole context, reply priming included."""
    query: str
    """What the next answer is about: what scoring ranks the messages for."""
    question_is_current: bool = True
    """The query is the last user message, so its verbatim form outranks any history."""
    protect_recent: bool = True
    """Whether the last `config.protect_last` messages are soft-protected."""
    now: dt.datetime | None = None
    """When the question is asked (`optimize(now=...)`, else the latest
    message's time): what "10 days ago" in it counts from."""
    people: tuple[str, str] | None = None
    """The two people the conversation is between (`people_in_chat` of its
    messages), or None for a chat with an assistant."""
