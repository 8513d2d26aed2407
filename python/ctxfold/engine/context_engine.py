"""`ContextEngine`: the pipeline, one stage per call.

validate -> score -> plan (knapsack, exact within budget) -> render; whatever
is summarised, cleared or dropped is archived so `restore` can return it."""

from __future__ import annotations

import asyncio
import datetime as dt
import numbers
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ctxfold._core import Tokenizer
from ctxfold.engine.archive import DEFAULT_ARCHIVE_BYTES, Archive, answer_recall
from ctxfold.engine.config import EngineConfig
from ctxfold.engine.messages import (
    current_turn, hard_protected, latest_time, parse_messages, parse_now, parse_with_repairs, people_in_chat, said_after_first,
    tool_groups, with_date_annotations,
)
from ctxfold.engine.cache import DEFAULT_CACHE_BYTES, CachingEmbedder, EngineCache, check_bytes
from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.engine.layers import layer_messages
from ctxfold.engine.options import KEEP
from ctxfold.engine.plan import Plan, plan_context
from ctxfold.engine.render import render
from ctxfold.engine.run import RunContext
from ctxfold.engine.scoring import recency_applies, score_items
from ctxfold.summarize.protocol import Summarizer
from ctxfold.text.arc import ConversationArc, MessageFacts, arc_of, message_facts
from ctxfold.text.entity_repository import EntityRepository
from ctxfold.tokens import REPLY_PRIMING, get_tokenizer
from ctxfold.engine.results import ContextResult, Item, ItemResult, Report

__all__ = ["ContextEngine"]

# The arc layer's framing (a system message and its heading), and the least arc worth sending.
_ARC_OVERHEAD = 12
_ARC_MIN_TOKENS = 24


def _store_scope(store: Any, scope: Any) -> Any:
    """`scope` checked: one exact `Scope`, and only with a store to keep it in."""
    if scope is None:
        return None
    from ctxfold.memory.scope import Scope, check_scope

    if not isinstance(scope, Scope):
        raise InvalidTypeError(f"scope: expected a ctxfold.memory.Scope, got {type(scope).__name__}")
    if store is None:
        raise InvalidInputError("scope: given without store=, so there is nothing to scope. Fix: pass store= too")
    return check_scope(scope, write=True)


def _store_caches(store: Any) -> Any:
    """The caches of ``store`` the engine keeps summaries, embeddings and originals in (None without a store)."""
    if store is None:
        return None
    caches = getattr(store, "caches", None)
    if caches is None:
        raise InvalidTypeError(
            f"store: {type(store).__name__} has no caches. Fix: pass a ctxfold.memory store "
            "(SqliteStore, PostgresStore), or an object whose .caches has their get_summary/put_summary, "
            "get_embeddings/put_embeddings and memo_get/memo_set"
        )
    return caches


class ContextEngine:
    """Fits an agent's messages into a token budget.

    `model=` or `encoding=` picks the exact counter (default o200k_base);
    `summarizer=` shortens messages (default: `ExtractiveSummarizer`, source
    sentences only, names, numbers and dates kept verbatim; `HeadTailSummarizer`
    is the model-free cut);
    `embedder=` is the dense half of the semantic layer (default: the static
    MiniLM table, with the question also read by MiniLM and the table's
    vectors mapped into its space, `model_view`;
    None for BM25 alone, with no model run unless `reranker=` is given);
    `reranker=` re-scores the first stage's short list of `config.rerank`
    messages (default: the shipped MiniLM, the session that reads the
    question, reading `config.rerank_tokens` of each message); `store=` (a `ctxfold.memory` store,
    e.g. `SqliteStore("agent.db")`) keeps summaries and embeddings across
    processes, so a restarted agent does not recompute them, and keeps the
    originals of removed messages, so `restore` and `recall` work in a later
    process. `scope=` (a `ctxfold.memory.Scope`, every field given) is where
    in the store the originals and summaries are kept: engines of different
    users sharing one store pass each user's scope and never see each other's
    (default ``Scope()``, shared by every engine that passes none).

    `archive_bytes` bounds the originals kept in memory (default 64 MiB;
    least recently archived first out, still found in the store when there
    is one); `cache_bytes` bounds the token-count, term, embedding and
    summary caches together (default 128 MiB). Both are approximate bytes.
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
        reranker: Any = "minilm",
        store: Any = None,
        scope: Any = None,
        archive_bytes: int = DEFAULT_ARCHIVE_BYTES,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        scope = _store_scope(store, scope)
        caches = _store_caches(store)
        self.tokenizer = tokenizer if tokenizer is not None else get_tokenizer(model, encoding)
        self.config = config if config is not None else EngineConfig()
        self.summarizer = summarizer if summarizer is not None else _default_summarizer(self.tokenizer)
        self.archive = Archive(archive_bytes, caches=caches, scope=scope)
        if not (embedder is None or (isinstance(embedder, str) and embedder == "static") or callable(getattr(embedder, "embed", None))):
            raise InvalidTypeError(
                f"embedder: {type(embedder).__name__} has no embed() method. Fix: pass an object with "
                "embed(list[str]) -> (n, d) array (e.g. ctxfold.Embedder()), 'static', or None"
            )
        self._embedder_spec = embedder
        self._embedder: Any = None
        if not (isinstance(reranker, str) and reranker == "minilm" or callable(getattr(reranker, "embed", None))):
            raise InvalidTypeError(f"reranker: {type(reranker).__name__} has no embed() method. Fix: pass an object "
                                   "with embed(list[str]) -> (n, d) array (e.g. ctxfold.Embedder()) or 'minilm'")
        self._reranker_spec = reranker
        self._reranker: Any = None
        self._model_view: Any = None
        self._question_reader: Any = None
        self.store = store
        self.scope = scope
        self.cache = EngineCache(check_bytes(cache_bytes, "cache_bytes"), caches=caches, scope=scope)

    def optimize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        query: str | None = None,
        system: str | None = None,
        budget: int | None = None,
        layers: dict[str, Any] | None = None,
        now: Any = None,
    ) -> ContextResult:
        """Fit `messages` into `budget` tokens (default `config.budget`).

        `query` is what the next answer is about (default: the last user
        message); `system` is prepended as a protected system prompt; `layers`
        adds memory and knowledge (`identity`, `preferences`, `topic`,
        `entity`, `conversation_arc`, `retrieval`/`knowledge`) sized by
        `plan_layers` and placed after the system prompt, before the history.
        `now` (a datetime, ISO 8601 text or epoch seconds, read as message
        timestamps are; default: the latest message timestamp) is the time
        the date notes count from: a kept timestamped message, the first of
        its day among those kept, says when it was said, ``[said 2023-06-17,
        3 days ago]`` (with ``EngineConfig(annotate_dates=True)``).
        """
        return self._optimize(messages, query=query, system=system, budget=budget, layers=layers,
                              now=parse_now(now), relative=True)

    def _optimize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        query: str | None,
        system: str | None,
        budget: int | None,
        layers: dict[str, Any] | None,
        now: dt.datetime | None,
        relative: bool,
        protect_recent: bool | None = None,
    ) -> ContextResult:
        """`optimize`; `relative`: the notes say how long before `now` (else only the day, which never
        goes stale: a cache-aware session sends a note again long after it was written); `protect_recent`:
        whether the latest messages are protected (default: unless a separate query asks about the past)."""
        timings: dict[str, float] = {}
        clock = time.perf_counter()

        def lap(stage: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            timings[stage] = (now - clock) * 1e3
            clock = now

        budget = self._budget(budget)
        items, repairs = parse_with_repairs(
            messages, self.tokenizer, system=system, cache=self.cache, on_invalid=self.config.on_invalid
        )
        parsed = items
        arc: Any = lambda: self._arc(parsed)  # noqa: E731 - built when the report's arc is first read
        if self.config.conversation_arc:
            arc = self._arc(items)
            lap("arc")
            layers = dict(layers or {})
            text = self._arc_text(arc, items, budget)
            if text:
                given = layers.pop("conversation_arc", None) or layers.pop("arc", None) or []
                layers["conversation_arc"] = [*([given] if isinstance(given, str) else given), text]
        allocation: dict[str, int] = {}
        if layers:
            items, allocation = self._with_layers(messages, system, items, layers, budget)
        # The caller's sizes, for the report; the plan prices the annotated texts.
        sizes = [it.tokens for it in items]
        asked_at = now or latest_time(items)
        if self.config.annotate_dates:
            items = with_date_annotations(items, self.tokenizer, self.cache, said=True, now=asked_at if relative else None)
        last_user = next((it.text for it in reversed(items) if it.role == "user"), None)
        query = self._query(items, query)
        question_is_current = last_user is None or query == last_user
        lap("parse")
        tokens_in = sum(sizes) + REPLY_PRIMING
        run = self._run(
            items, budget, query, question_is_current=question_is_current, now=asked_at,
            # A separate query about the past is answered wherever its evidence is: the
            # latest turns then get no protection beyond the current one's.
            protect_recent=(question_is_current or recency_applies(query)) if protect_recent is None else protect_recent,
        )
        scores, layers = score_items(items, run)
        lap("score")
        plan = plan_context(items, scores, run)
        if self.config.annotate_dates:
            # Each message was priced with its day; only the first kept of a day says it: plan again at that price.
            sent = [i for i, c in enumerate(plan.choices) if c == KEEP and i not in plan.plain]
            repriced = said_after_first(items, sent, self.tokenizer, self.cache)
            if repriced is not None:
                items = repriced
                plan = plan_context(items, scores, run)
        strategy = plan.strategy
        lap("plan")
        out, tokens, results = render(items, plan, scores, layers, run, sizes)
        lap("render")
        self._archive_changed(items, results)
        counts = {s: sum(r.status == s for r in results) for s in ("kept", "summarized", "cleared", "dropped")}
        report = Report(
            strategy=strategy, budget=budget, tokens_in=tokens_in, tokens_out=tokens, counts=counts,
            timings_ms=timings, warnings=self._warnings(items, sizes, plan, results), optimality_gap=plan.gap,
            highlights=_highlights(plan, results),
            layers=allocation, repairs=repairs,
        ).with_arc(arc).with_entities(lambda: EntityRepository.from_messages(
            {"role": it.role, "content": it.text} for it in parsed
        ))
        return ContextResult(messages=out, tokens=tokens, items=results, report=report)

    def session(self, *, pricing: Any = None, reserve: float = 0.15, recall_top: int = 16,
                quote_share: float = 0.25) -> Any:
        """A `CacheAwareSession` over this engine: for an agent that calls the
        model every turn with a growing conversation, a context whose prefix
        stays the same from turn to turn so the provider's prompt cache serves
        it. `pricing`: a `CachePricing` (default Anthropic's); `reserve`: the
        share of the budget a compaction leaves free for the turns after it;
        `recall_top`: how many of the messages the engine values most for the
        question are looked at for one that stands out, which makes the turn
        quote what the prefix lost before the current turn (0: never);
        `quote_share`: the most of the budget one turn's quote may take
        (the part beyond the compaction target is the recall tail, sent for
        that turn only)."""
        from ctxfold.engine.session import CacheAwareSession

        return CacheAwareSession(self, pricing=pricing, reserve=reserve, recall_top=recall_top,
                                 quote_share=quote_share)

    async def aoptimize(self, messages: Sequence[Mapping[str, Any]], **kwargs: Any) -> ContextResult:
        """`optimize` in a worker thread (the Rust stages release the GIL)."""
        return await asyncio.to_thread(self.optimize, messages, **kwargs)

    def restore(self, item_id: str) -> dict[str, Any]:
        """The original message of anything summarised, cleared or dropped,
        exactly as it was passed (a copy; from the store once evicted from
        memory or after a restart, as msgpack gives it back)."""
        if not isinstance(item_id, str):
            raise InvalidTypeError(f"item_id: expected str, got {type(item_id).__name__}")
        found = self.archive.get(item_id)
        if found is None:
            fix = (
                "it is not in the store either" if self.archive.caches is not None
                else f"pass store= to keep originals past archive_bytes={self.archive.max_bytes}"
            )
            raise InvalidInputError(
                f"item_id: nothing removed under id {item_id!r} is kept by this engine (never removed, or evicted: {fix})"
            )
        return found  # type: ignore[no-any-return]

    def recall(self, call: Any) -> dict[str, Any]:
        """The answer to a model's call of the `recall` tool (`ctxfold.recall_tool()`):
        for an OpenAI tool call, the ``{"role": "tool", ...}`` message; for
        an Anthropic ``tool_use`` block, the ``tool_result`` block (to send in
        a user message). The content is the original as text; an unknown id
        gets an answer saying so (``is_error`` for Anthropic), not an
        exception. A call that is not a well-formed recall call raises
        `InvalidInputError`."""
        return answer_recall(call, self.archive.get)

    def count(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """`count_messages(messages)` with the engine's tokenizer (per-message
        costs add up, and messages counted before come from the cache)."""
        return REPLY_PRIMING + sum(
            it.tokens
            for it in parse_messages(messages, self.tokenizer, cache=self.cache, on_invalid=self.config.on_invalid)
        )

    def should_compact(self, messages: Sequence[Mapping[str, Any]]) -> bool:
        """True once the messages take more than `compact_threshold` of the model's window."""
        return self.count(messages) > self.config.compact_threshold * self.config.context_window

    @property
    def embedder(self) -> Any:
        """The dense half of the semantic layer: by default the static MiniLM
        table with its frequency weights (the better ranker on its own, which
        is how the semantic layer uses it, beside BM25), loaded on first use;
        `embedder=None` keeps scoring lexical; any object with
        `embed(list[str]) -> (n, d) array` works."""
        if self._embedder is None and self._embedder_spec is not None:
            if self._embedder_spec == "static":
                from ctxfold.embed.static import StaticEmbedder

                embedder = StaticEmbedder(weighted=True)
            else:
                embedder = self._embedder_spec
            self._embedder = CachingEmbedder(embedder, self.cache.embeddings, _model_id(embedder), self.cache.caches)
        return self._embedder

    @property
    def reranker(self) -> Any:
        """What re-scores the short list when `config.rerank` is on: the shipped
        MiniLM by default (loaded on first use), cached like the embedder;
        None with `embedder=None` and no `reranker=` given (lexical scoring
        runs no model)."""
        if self._reranker is None and self.config.rerank:
            spec = self._reranker_spec
            if spec == "minilm" and self._embedder_spec is None:
                return None
            if spec == "minilm":
                from ctxfold.embed.projected import SharedEncoder

                spec = SharedEncoder(self.config.rerank_tokens)
            self._reranker = CachingEmbedder(spec, self.cache.rerank_embeddings, _model_id(spec), self.cache.caches)
        return self._reranker

    @property
    def model_view(self) -> Any:
        """The question's second view (`config.embed_query`, default embedder
        only), a `ctxfold.embed.ModelView`: MiniLM's embedding of the question
        (`ctxfold.embed.SharedEncoder`, the model shared by the process's
        engines, cached by text) beside the static table's vectors mapped
        into MiniLM's space; None otherwise."""
        if (self._model_view is None and self.config.embed_query and self._embedder_spec == "static"
                and self.embedder.embedder.model_projection is not None):
            from ctxfold.embed.projected import ModelView, ProjectedEmbedder

            self._model_view = ModelView(self.question_reader, ProjectedEmbedder(self.embedder.embedder))
        return self._model_view

    @property
    def question_reader(self) -> Any:
        """MiniLM reading a question whole (`ctxfold.embed.SharedEncoder`, the
        model shared by the process's engines), cached by text: the question
        of the second view and of the default reranker, embedded once."""
        if self._question_reader is None:
            from ctxfold.embed.projected import SharedEncoder

            encoder = SharedEncoder()
            self._question_reader = CachingEmbedder(encoder, self.cache.query_embeddings, encoder.model_id)
        return self._question_reader

    # -- helpers ---------------------------------------------------------------------

    def _run(
        self, items: Sequence[Item], budget: int, query: str, *, question_is_current: bool = True,
        protect_recent: bool = True, now: dt.datetime | None = None,
    ) -> RunContext:
        """The engine's tools and settings with the facts of one call on
        `items`, for its stages: when it is asked (`now`, else the latest
        message's time) and who the chat is between are found here, once."""
        return RunContext(
            tokenizer=self.tokenizer, config=self.config, cache=self.cache, summarizer=self.summarizer,
            embedder=self.embedder, reranker=self.reranker, model_view=self.model_view,
            # The default reranker is the question's MiniLM at a shorter cut: it reads the question as the view did.
            rerank_question=(self.question_reader
                             if self._reranker_spec == "minilm" and self.reranker is not None else None),
            budget=budget,
            query=query, question_is_current=question_is_current, protect_recent=protect_recent,
            now=now or latest_time(items), people=people_in_chat(items),
        )

    def _arc(self, items: Sequence[Item]) -> ConversationArc:
        """The conversation arc of the parsed messages, on the scoring
        embedder's vectors (cached, so scoring does not embed them again)."""
        texts = [it.text for it in items]
        embedder = self.embedder
        vectors = np.asarray(embedder.embed(texts), dtype=np.float32) if embedder is not None and len(texts) > 1 else None
        speakers = [(it.role, str(it.message.get("name") or "")) for it in items]
        return arc_of(texts, speakers, [it.id for it in items], vectors, facts_of=self._message_facts)

    def _arc_text(self, arc: ConversationArc, items: Sequence[Item], budget: int) -> str:
        """The arc's text, cut to whole lines that fit beside what must stay
        (system, pinned and the current turn, with their tool groups): the
        arc is optional and never the reason the current turn is cut."""
        groups = tool_groups(items)
        must = set(current_turn(items)) | {i for i, it in enumerate(items) if hard_protected(it)}
        wanted = {int(groups[i]) for i in must if groups[i] >= 0}
        must |= {i for i in range(len(items)) if groups[i] in wanted}
        room = budget - REPLY_PRIMING - sum(items[i].tokens for i in must) - _ARC_OVERHEAD
        text = arc.to_text()
        if room < _ARC_MIN_TOKENS:
            return ""
        cut = self.tokenizer.truncate(text, room)
        if cut != text:
            cut = cut[: cut.rindex("\n")].rstrip() if "\n" in cut else ""
        return cut

    def _message_facts(self, text: str) -> MessageFacts:
        found = self.cache.arc_facts.get(text)
        if found is None:
            found = message_facts(text)
            self.cache.arc_facts.put(text, found)
        return found

    def _with_layers(
        self, messages: Sequence[Mapping[str, Any]], system: str | None, items: list[Item],
        layers: Mapping[str, Any], budget: int,
    ) -> tuple[list[Item], dict[str, int]]:
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
        return parse_messages(merged, self.tokenizer, cache=self.cache, on_invalid=self.config.on_invalid), allocation

    def _budget(self, budget: int | None) -> int:
        budget = self.config.budget if budget is None else budget
        # Any integer type (numpy's too), but not bool and not a float.
        if isinstance(budget, bool) or not isinstance(budget, numbers.Integral):
            raise InvalidTypeError(f"budget: expected int, got {type(budget).__name__}")
        budget = int(budget)
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

    def _archive_changed(self, items: Sequence[Item], results: Sequence[ItemResult]) -> None:
        # Copies (made by the archive), so later edits of the caller's dicts
        # cannot change what `restore` returns.
        self.archive.put_many((it.id, it.source) for it, res in zip(items, results) if res.status != "kept")

    def _warnings(self, items: Sequence[Item], sizes: Sequence[int], plan: Plan, results: Sequence[Any]) -> list[str]:
        """One line per kind of problem, with counts, in the caller's sizes."""
        warnings = list(plan.notes)
        cut = [results[i] for i in plan.cuts if i in plan.current]
        if cut:
            what = ", ".join(f"{r.id} {r.tokens_in} -> {r.tokens_out}" for r in cut)
            warnings.append(f"the current turn did not fit and was cut to head + tail (tokens: {what})")
        limit = self.config.tool_output_warning_tokens
        large = sorted(((sizes[i], it.id) for i, it in enumerate(items) if it.role == "tool" and sizes[i] > limit), reverse=True)
        if large:
            top = ", ".join(f"{item_id} {tokens}" for tokens, item_id in large[:3])
            warnings.append(f"{len(large)} tool result(s) over {limit} tokens (largest: {top})")
        total = sum(size for size, it in zip(sizes, items) if it.role == "tool")
        if total > self.config.total_tool_output_warning_tokens:
            warnings.append(f"tool output totals {total} tokens (over {self.config.total_tool_output_warning_tokens})")
        return warnings


def _highlights(plan: Plan, results: Sequence[Any], largest: int = 3) -> list[str]:
    """The report's first lines: the current turn, then the largest messages."""

    def line(label: str, r: Any) -> str:
        what = r.status if r.status == "kept" else f"{r.status} ({r.reason})" if r.reason else r.status
        return f"{label} {r.id} ({r.role}, {r.tokens_in} tokens): {what}, {r.tokens_out} tokens out"

    lines = [line("current turn:", results[i]) for i in plan.current]
    shown = set(plan.current)
    big = sorted((r for r in results if r.index not in shown), key=lambda r: r.tokens_in, reverse=True)[:largest]
    return lines + [line("largest:", r) for r in big]

def _default_summarizer(tokenizer: Tokenizer) -> Summarizer:
    """The extractive summarizer counting with the engine's own tokenizer (no
    progress bar: the engine is a library call)."""
    from ctxfold.summarize.extractive import ExtractiveSummarizer

    return ExtractiveSummarizer(tokenizer=tokenizer, progress=False)


def _model_id(embedder: Any) -> str:
    """What identifies an embedder's vectors in a persistent cache."""
    return str(getattr(embedder, "model_id", None) or repr(embedder))
