"""`ContextEngine`: the pipeline of DESIGN.md, one stage per call.

validate -> score -> plan (knapsack, exact within budget) -> render; whatever
is summarised, cleared or dropped is archived so `restore` can return it."""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Sequence
from typing import Any

from ctxfold._core import Tokenizer
from ctxfold.compaction import Edit, apply_edits, head_tail, structural_pass
from ctxfold.config import EngineConfig
from ctxfold.conversation import parse_messages
from ctxfold.engine_cache import CachingEmbedder, EngineCache
from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.layers import layer_messages
from ctxfold.plan import KEEP, Plan, choose_strategy, hard_protected, plan_items, soft_protected
from ctxfold.render import render
from ctxfold.scoring import score_items
from ctxfold.summarize import BaseSummarizer, Summarizer
from ctxfold.tokens import REPLY_PRIMING, get_tokenizer
from ctxfold.types import ContextResult, Item, Report

__all__ = ["ContextEngine", "HeadTailSummarizer"]


class HeadTailSummarizer(BaseSummarizer):
    """The fallback shortener: the head and tail of a text around an omission
    marker (no model, source wording only)."""

    def _summarize_many(self, texts, targets, query):  # type: ignore[override]
        return [head_tail(t, n, self.tokenizer) for t, n in zip(texts, targets)]


class ContextEngine:
    """Fits an agent's messages into a token budget.

    `model=` or `encoding=` picks the exact counter (default o200k_base);
    `summarizer=` shortens messages (default: `ExtractiveSummarizer`, source
    sentences only, names, numbers and dates kept verbatim; `HeadTailSummarizer`
    is the model-free cut);
    `embedder=` is the dense half of the semantic layer (default: the static
    MiniLM table; None for BM25 alone); `store=` (a `ctxfold.memory` store,
    e.g. `SqliteStore("agent.db")`) keeps summaries and embeddings across
    processes, so a restarted agent does not recompute them.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        encoding: str | None = None,
        tokenizer: Tokenizer | None = None,
        config: EngineConfig | None = None,
        summarizer: Summarizer | None = None,
        embedder: Any = "static",
        store: Any = None,
    ) -> None:
        self.tokenizer = tokenizer if tokenizer is not None else get_tokenizer(model, encoding)
        self.config = config if config is not None else EngineConfig()
        self.summarizer = summarizer if summarizer is not None else _default_summarizer(self.tokenizer)
        self._archive: dict[str, dict[str, Any]] = {}
        self._embedder_spec = embedder
        self._embedder: Any = None
        self.store = store
        self.cache = EngineCache(store=store)

    def optimize(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        query: str | None = None,
        system: str | None = None,
        budget: int | None = None,
        layers: dict[str, Any] | None = None,
    ) -> ContextResult:
        """Fit `messages` into `budget` tokens (default `config.budget`).

        `query` is what the next answer is about (default: the last user
        message); `system` is prepended as a protected system prompt; `layers`
        adds memory and knowledge (`identity`, `preferences`, `topic`,
        `entity`, `conversation_arc`, `retrieval`/`knowledge`) sized by
        `plan_layers` and placed after the system prompt, before the history.
        """
        timings: dict[str, float] = {}
        clock = time.perf_counter()

        def lap(stage: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            timings[stage] = (now - clock) * 1e3
            clock = now

        budget = self._budget(budget)
        items = parse_messages(messages, self.tokenizer, system=system, cache=self.cache)
        allocation: dict[str, int] = {}
        if layers:
            items, allocation = self._with_layers(messages, system, items, layers, budget)
        query = self._query(items, query)
        lap("parse")
        tokens_in = sum(it.tokens for it in items) + 3
        scores, layers = score_items(
            items, query, self.config.weights, self.config.half_life_turns, self.embedder, self.cache
        )
        lap("score")
        strategy = self.config.strategy
        if strategy == "auto" or tokens_in <= budget:
            strategy = choose_strategy(tokens_in, budget)
        edits: dict[int, Edit] = {}
        if strategy == "full" and tokens_in <= budget:
            plan = Plan(strategy="full", choices=[KEEP] * len(items), summary_targets={}, values=[0.0] * len(items))
        else:
            edits = self._structural(items, budget)
            compacted = apply_edits(items, edits, self.tokenizer)
            plan = plan_items(
                compacted, scores, budget, self.config, self.tokenizer, "optimal" if strategy == "full" else strategy,
                self.cache,
            )
            strategy = plan.strategy
            items = compacted
        lap("plan")
        out, tokens, results = render(
            items, plan, scores, layers, budget, self.tokenizer, self.summarizer, self.cache, edits
        )
        lap("render")
        self._archive_changed(items, results)
        counts = {s: sum(r.status == s for r in results) for s in ("kept", "summarized", "cleared", "dropped")}
        report = Report(
            strategy=strategy, budget=budget, tokens_in=tokens_in, tokens_out=tokens, counts=counts,
            timings_ms=timings, warnings=self._warnings(items), optimality_gap=plan.gap, layers=allocation,
        )
        return ContextResult(messages=out, tokens=tokens, items=results, report=report)

    async def aoptimize(self, messages: Sequence[dict[str, Any]], **kwargs: Any) -> ContextResult:
        """`optimize` in a worker thread (the Rust stages release the GIL)."""
        return await asyncio.to_thread(self.optimize, messages, **kwargs)

    def restore(self, item_id: str) -> dict[str, Any]:
        """The original message of anything summarised, cleared or dropped, exactly as it was passed."""
        if item_id not in self._archive:
            raise InvalidInputError(f"item_id: nothing was removed under id {item_id!r} by this engine")
        return copy.deepcopy(self._archive[item_id])

    def count(self, messages: Sequence[dict[str, Any]]) -> int:
        """`count_messages(messages)` with the engine's tokenizer (per-message
        costs add up, and messages counted before come from the cache)."""
        return REPLY_PRIMING + sum(it.tokens for it in parse_messages(messages, self.tokenizer, cache=self.cache))

    def should_compact(self, messages: Sequence[dict[str, Any]]) -> bool:
        """True once the messages take more than `compact_threshold` of the model's window."""
        return self.count(messages) > self.config.compact_threshold * self.config.context_window

    @property
    def embedder(self) -> Any:
        """The dense half of the semantic layer: by default the static MiniLM
        table with its frequency weights (the better ranker on its own, which
        is how the semantic layer uses it: the larger of the BM25 and cosine
        scores; with the plain mean, LongMemEval-S evidence recall at 2,000
        tokens was 0.933 instead of 0.956, benches/eval_longmemeval.py),
        loaded on first use; `embedder=None` keeps scoring lexical, any object
        with `encode` works."""
        if self._embedder is None and self._embedder_spec is not None:
            if self._embedder_spec == "static":
                from ctxfold.static_embed import StaticEmbedder

                embedder = StaticEmbedder(weighted=True)
            else:
                embedder = self._embedder_spec
            self._embedder = CachingEmbedder(embedder, self.cache.embeddings, _model_id(embedder), self.store)
        return self._embedder

    # -- helpers ---------------------------------------------------------------------

    def _with_layers(self, messages, system, items, layers, budget):
        """The items again with one pinned system message per layer inserted
        after the leading system messages (system -> memory -> knowledge -> history)."""
        last_user = next((it for it in reversed(items) if it.role == "user"), None)
        extra, alloc = layer_messages(
            layers, budget, self.tokenizer, message_count=len(items),
            conversation_tokens=sum(it.tokens for it in items),
            user_message_tokens=last_user.tokens if last_user else 0,
        )
        raw = list(messages) if system is None else [{"role": "system", "content": system, "id": "system", "pinned": True}, *messages]
        head = next((i for i, m in enumerate(raw) if m.get("role") not in ("system", "developer")), len(raw))
        merged = [*raw[:head], *extra, *raw[head:]]
        allocation = {str(k): int(v) for k, v in alloc.to_dict().items()}
        return parse_messages(merged, self.tokenizer, cache=self.cache), allocation

    def _structural(self, items: list[Item], budget: int) -> dict[int, Edit]:
        """Structural compaction first: the cheap, reversible steps, until the
        messages fit (protected and soft-protected messages untouched)."""
        keep = [hard_protected(it) for it in items] | soft_protected(items, self.config)
        return structural_pass(items, budget - REPLY_PRIMING, list(keep), self.tokenizer, self.config.max_tool_output_tokens)

    def _budget(self, budget: int | None) -> int:
        budget = self.config.budget if budget is None else budget
        if isinstance(budget, bool) or not isinstance(budget, int):
            raise InvalidTypeError(f"budget: expected int, got {type(budget).__name__}")
        if budget <= 3:
            raise InvalidInputError(f"budget: must be > 3 (the reply priming alone costs 3 tokens), got {budget}")
        return budget

    @staticmethod
    def _query(items: Sequence[Item], query: str | None) -> str:
        if query is not None:
            if not isinstance(query, str):
                raise InvalidTypeError(f"query: expected str, got {type(query).__name__}")
            return query
        return next((it.text for it in reversed(items) if it.role == "user"), "")

    def _archive_changed(self, items: Sequence[Item], results) -> None:
        for it, res in zip(items, results):
            # A copy, so later edits of the caller's dict cannot change what
            # `restore` returns; an equal copy archived before is kept as is.
            if res.status != "kept" and self._archive.get(it.id) != it.source:
                self._archive[it.id] = copy.deepcopy(it.source)

    def _warnings(self, items: Sequence[Item]) -> list[str]:
        tool = [it for it in items if it.role == "tool"]
        warnings = [
            f"tool result {it.id} is {it.tokens} tokens (over {self.config.tool_output_warning_tokens})"
            for it in tool if it.tokens > self.config.tool_output_warning_tokens
        ]
        total = sum(it.tokens for it in tool)
        if total > self.config.total_tool_output_warning_tokens:
            warnings.append(f"tool output totals {total} tokens (over {self.config.total_tool_output_warning_tokens})")
        return warnings


def _default_summarizer(tokenizer: Tokenizer) -> Summarizer:
    """The extractive summarizer counting with the engine's own tokenizer (no
    progress bar: the engine is a library call)."""
    from ctxfold.extractive import ExtractiveSummarizer

    return ExtractiveSummarizer(tokenizer=tokenizer, progress=False)


def _model_id(embedder: Any) -> str:
    """What identifies an embedder's vectors in a persistent cache."""
    return str(getattr(embedder, "model_id", None) or repr(embedder))
