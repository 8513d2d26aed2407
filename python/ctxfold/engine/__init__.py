"""The context engine, one stage per module, run in this order:

- `messages`: parse the caller's messages into items (ids, roles, tool pairs,
  exact token costs), with `repair` for malformed agent histories;
- `scoring`: what each message is worth for the query (lexical, semantic,
  entity, intent, structure and recency layers);
- `options`: every message's forms with their exact costs and values
  (verbatim, summary, head + tail cut, placeholder, drop; chunk summaries),
  from the texts of `compaction` (placeholders, superseded reads, copies)
  and `chunks`;
- `plan`: the strategy and one form per message, a knapsack that fits the
  budget exactly;
- `render`: the chosen forms assembled into messages, and the report.

`context_engine.ContextEngine` runs them, handing each stage one
`run.RunContext` (tokenizer, config, cache, summarizer, embedder and the
call's budget and query); `session` keeps a stable prefix
across turns; `archive` keeps what was removed; `layers` sizes the memory and
knowledge layers; `cache` holds counts, terms, embeddings and summaries;
`config` and `results` are the settings and what comes back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxfold._lazy import lazy_attributes

_LAZY = {
    "ContextEngine": "ctxfold.engine.context_engine",
    "EngineConfig": "ctxfold.engine.config",
    "CacheAwareSession": "ctxfold.engine.session",
    "CachePricing": "ctxfold.engine.session",
    "ContextResult": "ctxfold.engine.results",
    "ItemResult": "ctxfold.engine.results",
    "Report": "ctxfold.engine.results",
    "recall_tool": "ctxfold.engine.archive",
    "RecallTool": "ctxfold.engine.archive",
}
__all__ = list(_LAZY)
__getattr__, __dir__ = lazy_attributes(globals(), _LAZY)

if TYPE_CHECKING:
    from ctxfold.engine.archive import RecallTool as RecallTool, recall_tool as recall_tool
    from ctxfold.engine.config import EngineConfig as EngineConfig
    from ctxfold.engine.context_engine import ContextEngine as ContextEngine
    from ctxfold.engine.results import ContextResult as ContextResult, ItemResult as ItemResult, Report as Report
    from ctxfold.engine.session import CacheAwareSession as CacheAwareSession, CachePricing as CachePricing
