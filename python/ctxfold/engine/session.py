"""Cache-aware fitting of a growing conversation: a prefix that stays put.

Providers bill a prompt's cached prefix at a fraction of the input price
(`CachePricing`), so an agent that re-plans its whole history every turn pays
full price every turn. A `CacheAwareSession` keeps the context it returned
last time, byte for byte, and appends only the new messages; it compacts again
(a full `ContextEngine.optimize`, down to the budget minus a reserve for the
turns to come) only when the prefix plus the new messages no longer fit, or
when compacting now saves more over the turns before the next forced
compaction than the cache it throws away. What the turn's question needs
from the compacted past is quoted before the current turn: in the prefix as
far as the compaction target allows, the rest in a recall tail after the
cache breakpoint, for that turn only. A question that recalls the
conversation itself ("Have I mentioned...", "When is my call?") is planned
for alone, as `ContextEngine.optimize` would, and the prefix waits for the
turn after it.
"""

from __future__ import annotations

import copy
import math
import numbers
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from ctxfold.engine.messages import parse_with_repairs, with_date_annotations
from ctxfold.engine.scoring import recalls_the_conversation, recency_applies
from ctxfold.errors import BudgetError, InvalidInputError, InvalidTypeError
from ctxfold.tokens import REPLY_PRIMING, message_costs
from ctxfold.engine.results import CacheReport, ContextResult, ItemResult, Report

if TYPE_CHECKING:
    from ctxfold.engine.context_engine import ContextEngine

__all__ = ["CachePricing", "CacheAwareSession"]


class CachePricing(msgspec.Struct, frozen=True, kw_only=True):
    """Prices of prompt tokens relative to uncached input: `read` for a token
    served from the cached prefix, `write` for a token written to the cache."""

    read: float = 0.1
    write: float = 1.25

    def __post_init__(self) -> None:
        for name in ("read", "write"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
                raise InvalidInputError(f"{name}: must be a finite price >= 0 (1.0 = uncached input), got {value!r}")

    @classmethod
    def anthropic(cls) -> CachePricing:
        """Anthropic's prompt caching: reads at a tenth, writes (5-minute cache) at 1.25x."""
        return cls(read=0.1, write=1.25)

    @classmethod
    def openai(cls) -> CachePricing:
        """OpenAI's automatic caching on its newest models: reads at a tenth, writes free."""
        return cls(read=0.1, write=1.0)

    def billed(self, cached: int, written: int) -> float:
        """Input billed for a prompt of `cached` tokens read and `written` tokens written,
        in uncached-token units."""
        return cached * self.read + written * self.write


class _Segment(msgspec.Struct):
    """Messages `start`..`end` of the input as one compaction rendered them."""

    start: int
    end: int
    messages: list[dict[str, Any]]
    tokens: int
    results: list[ItemResult]
    source_tokens: int
    """Tokens of the messages the segment stands for, as they were passed."""

    @property
    def density(self) -> float:
        return self.tokens / self.source_tokens if self.source_tokens else 1.0


class Turn(msgspec.Struct):
    """One call of a session: the parsed input and what every step reads of it."""

    items: list[Any]
    query: str
    current: int
    """Where the current turn starts (the last user message)."""
    repairs: list[Any]
    new: bool
    """Whether the current turn started in this call (its quote is chosen now)."""
    budget: int
    """The call's token limit."""
    scores: Any = None
    """The engine's value of each message for the question, once a quote needs it."""


class CacheAwareSession:
    """Fits one growing conversation turn after turn, keeping a stable prefix.

    Made by `ContextEngine.session`. Call `optimize` with the whole
    conversation each turn (the earlier messages unchanged, new ones
    appended). The context is a row of compacted segments, then the messages
    since the last compaction verbatim. New messages are appended while they
    fit; when they no longer do, the newest segment and the messages after it
    (the current turn aside) are compacted again, down to the budget minus
    `reserve`, and the older segments stay byte for byte what they were, so
    the provider's cache still serves them. The exchange before the current
    turn, which a follow-up reads, is still sent verbatim on that turn:
    what of it the new segment shortened is quoted again after the cache
    breakpoint, for that turn only.

    The question of the turn is not left to a stale prefix: when some of the
    `recall_top` messages the engine values most for it stand out from the
    rest and are no longer in the context verbatim, the turn quotes what the
    question needs, within `quote_share` of the budget: the messages that
    stand out first, then the others the prefix lost, by value. The part of
    the quote that fits within the compaction target stays in the prefix,
    read from the cache on the turns after it (a later quote leaves out what
    an earlier one holds) until the next compaction. For a question about
    the past (see `recency_applies`), the rest is the recall tail, sent once
    just before the current turn, after the cache breakpoint, so it never
    takes the room kept for the turns to come; such a question compacts
    first when the prefix leaves its tail less than half of `quote_share`,
    as its answer may be among the messages that do not stand out. A turn
    about the present task has its recent messages verbatim and gets no
    tail. Segments are planned without the question of the turn that
    compacts: later questions are served by the quotes, not by a prefix
    rewritten for each.

    A question that recalls the conversation itself (see
    `recalls_the_conversation`: what was said or decided before, a short
    question about the user's own facts) needs what a generic prefix and a
    quote beside it hold only in part. Once something has been compacted,
    such a turn is planned for its question alone, as
    `ContextEngine.optimize` would (`report.cache.one_off`, no cache
    breakpoint): paid in full once, while the prefix is left as it was and
    read from the provider's cache again on the next turn.

    The result's `report.cache` says whether the prefix was kept and why not,
    and which messages the recall tail quotes; `cache_breakpoint` is the
    index of the last message the next call keeps as it is (where
    Anthropic's ``cache_control`` belongs), before the recall tail. A history that
    changed before its end (as repaired, see `EngineConfig.on_invalid`), or
    another budget or system prompt, starts afresh.
    """

    engine: ContextEngine
    pricing: CachePricing
    reserve: float
    recall_top: int
    quote_share: float

    def __init__(
        self, engine: ContextEngine, *, pricing: CachePricing | None = None, reserve: float = 0.15,
        recall_top: int = 16, quote_share: float = 0.25,
    ) -> None:
        if pricing is not None and not isinstance(pricing, CachePricing):
            raise InvalidTypeError(f"pricing: expected a CachePricing, got {type(pricing).__name__}")
        if isinstance(reserve, bool) or not isinstance(reserve, numbers.Real) or not 0.0 <= reserve < 1.0:
            raise InvalidInputError(
                f"reserve: must be a share of the budget in [0, 1), got {reserve!r} "
                "(the room a compaction leaves for the turns after it)"
            )
        if isinstance(recall_top, bool) or not isinstance(recall_top, numbers.Integral) or recall_top < 0:
            raise InvalidInputError(f"recall_top: must be an int >= 0 (0: never quote older messages), got {recall_top!r}")
        if isinstance(quote_share, bool) or not isinstance(quote_share, numbers.Real) or not 0.0 < quote_share <= 1.0:
            raise InvalidInputError(
                f"quote_share: must be a share of the budget in (0, 1], got {quote_share!r} "
                "(the most one turn's quote may take; recall_top=0 turns quoting off)"
            )
        self.engine = engine
        self.pricing = pricing if pricing is not None else CachePricing.anthropic()
        self.reserve = float(reserve)
        self.recall_top = int(recall_top)
        self.quote_share = float(quote_share)
        self.reset()

    def reset(self) -> None:
        """Forget the prefix: the next call compacts afresh."""
        self._inputs: list[tuple[str, dict[str, Any]]] = []
        self._segments: list[_Segment] = []
        self._key: tuple[int, str | None] | None = None
        self._sent = 0
        self._growth: float | None = None
        self._turn = -1
        # Quotes in the tail: (the message index they precede, the message, its tokens, the quoted indexes).
        self._quotes: list[tuple[int, dict[str, Any], int, list[int]]] = []
        # The current turn's recall tail, outside the prefix: (the turn's start, the message, its tokens, the indexes as chosen).
        self._tail: tuple[int, dict[str, Any], int, list[int]] | None = None
        # The exchange before the current turn the last compaction took but did not keep verbatim: quoted in its tail.
        self._exchange: list[int] = []

    def optimize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        query: str | None = None,
        system: str | None = None,
        budget: int | None = None,
    ) -> ContextResult:
        """`ContextEngine.optimize` for this turn, keeping the previous
        context as the prefix as far as it fits."""
        started = time.perf_counter()
        engine = self.engine
        budget = engine._budget(budget)
        items, repairs = parse_with_repairs(
            messages, engine.tokenizer, system=system, cache=engine.cache, on_invalid=engine.config.on_invalid
        )
        if engine.config.annotate_dates:
            # The verbatim tail says when too, priced as sent (segments are annotated by `optimize`); only the
            # day, once per day, as a note that counted from "now" would go stale in the kept prefix.
            items = with_date_annotations(items, engine.tokenizer, engine.cache, said=True, said_once=True)
        query = engine._query(items, query)
        key = (budget, system)
        before = self._sent
        reason = self._fresh_reason(items, key)
        if reason is not None:
            self.reset()
            self._key, before = key, 0
        current = _current_start(items)
        self._exchange = []
        if reason is None and self._segments and recalls_the_conversation(query):
            return self._one_off(items, query, repairs, budget, started)
        # A quote is chosen once per turn and stays in the prefix after it, so later calls read it from the cache.
        turn = Turn(items, query, current, repairs, new=current >= len(self._inputs) or self._turn != current,
                    budget=budget)
        total = self._tokens() + sum(it.tokens for it in items[self._end():]) + REPLY_PRIMING
        if reason is None:
            grown = sum(it.tokens for it in items[len(self._inputs):])
            self._growth = grown if self._growth is None else (self._growth + grown) / 2
        overflow = total > budget
        # The quote this call adds: chosen for a new turn (a later call of the turn has it in the prefix), and not
        # before an overflow, whose compaction changes what the segments lost.
        wanted = self._quote(turn, room=self._quote_room(budget)) if turn.new and not overflow else _NO_QUOTE
        if overflow:
            reason = reason or f"the prefix and the new messages ({total} tokens) exceed the budget"
        elif wanted.need > budget - total and not recency_applies(query):
            # Only a question about the past gets a recall tail, so only it makes room for its quote.
            reason = reason or "the messages the question needs do not fit beside the prefix"
        elif reason is None and self._worth_compacting(items, budget, current, total):
            reason = "compacting now saves more before the prefix would overflow than the cache it discards"
        else:
            cache = CacheReport(kept=reason is None, reason=reason or "the prefix and the new messages fit",
                                prefix_tokens=before)
            return self._finish(turn, None, cache, budget, started, quote=wanted)
        compacted = self._compact(items, query, budget, current)
        before = min(before, sum(s.tokens for s in self._segments[:-1]))
        cache = CacheReport(kept=False, reason=reason, prefix_tokens=before)
        return self._finish(turn, compacted, cache, budget, started)

    def _one_off(self, items: list[Any], query: str, repairs: list[Any], budget: int, started: float) -> ContextResult:
        """The context of a question that recalls the conversation: the
        engine's plan of the whole history for it, sent once; the session's
        prefix stays as it was for the next call."""
        result = self._plan_whole(items, query, budget)
        cache = CacheReport(kept=False, one_off=True, reason="the question recalls the conversation: planned for it "
                            "alone, the prefix kept for the next turn")
        report = msgspec.structs.replace(
            result.report, cache=cache, repairs=repairs,
            timings_ms={**result.report.timings_ms, "total": (time.perf_counter() - started) * 1e3})
        engine = self.engine
        report.with_arc(lambda: engine._arc(items))
        return ContextResult(messages=result.messages, tokens=result.tokens, items=result.items, report=report,
                             cache_breakpoint=None)

    def _plan_whole(self, items: list[Any], query: str, budget: int) -> ContextResult:
        """The engine's plan of the whole conversation for `query`, as `optimize` makes it."""
        return self.engine._optimize([_as_passed(it) for it in items], query=query, system=None, budget=budget,
                                     layers=None, now=None, relative=False)

    # -- compaction ---------------------------------------------------------------------

    def _compact(self, items: list[Any], query: str, budget: int, current: int) -> Report:
        """Compact the messages after the kept segments, up to the current
        turn, into one new segment within the budget minus `reserve`.

        As many segments are kept as leave the new one room enough, and no
        less than `_DENSITY_FLOOR` of the density (tokens kept per token
        passed) of the segment before it, so that recent messages are not
        squeezed far harder than older ones for the sake of the cache. The
        new segment takes half its room when that is enough, so the next
        compactions add a segment after it instead of rewriting it.

        The exchange before the current turn (the message before it and the
        user message that one answers), which a follow-up question reads, is
        sent verbatim this turn: the segment takes it, and what of it the
        segment does not keep as it was is quoted again in the recall tail,
        for this turn only, so the turns after it do not carry it twice. If
        that does not fit beside the segment, the last two messages (and the
        calls their tool results answer) stay after the segment verbatim; if
        that leaves the segment too little room, the segment takes them
        too."""
        self._quotes = []  # the messages they quoted are in the new segment's source
        target = budget - math.ceil(self.reserve * budget)
        recent = _recent_start(items, current, _KEPT_RECENT)
        exchange = _exchange_before(items, current)
        exchange_cost = self._quote_cost(items, exchange)  # at most: the segment may keep some as it was
        # (where the segment ends, whether the exchange is quoted in the tail)
        for end, requoted in dict.fromkeys(((current, True), (recent, False), (current, False))):
            loose = sum(it.tokens for it in items[end:])
            for j in range(len(self._segments), -1, -1):
                kept = self._segments[:j]
                start = kept[-1].end if kept else 0
                kept_tokens = sum(s.tokens for s in kept)
                room = target - kept_tokens - loose - REPLY_PRIMING
                if start >= end or room < _MIN_SEGMENT_TOKENS:
                    continue
                source = sum(it.tokens for it in items[start:end])
                if kept and room < _DENSITY_FLOOR * kept[-1].density * source:
                    continue
                if room // 2 >= _MIN_SEGMENT_TOKENS and (not kept or room // 2 >= _DENSITY_FLOOR * kept[-1].density * source):
                    room //= 2
                if requoted and budget - kept_tokens - room - loose - REPLY_PRIMING < exchange_cost:
                    continue
                try:
                    # A segment ends before the latest messages, which follow it: its own last ones are not protected.
                    result = self.engine._optimize([_as_passed(it) for it in items[start:end]], query=_SEGMENT_QUERY,
                                                   system=None, budget=room + REPLY_PRIMING, layers=None, now=None,
                                                   relative=False, protect_recent=False)
                except BudgetError:
                    continue
                self._segments = [*kept, _Segment(start, end, copy.deepcopy(result.messages),
                                                  result.tokens - REPLY_PRIMING, _shifted(result.items, start), source)]
                if requoted:
                    lost = {r.index for r in self._segments[-1].results if r.status != "kept"}
                    self._exchange = [i for i in exchange if i in lost]
                return result.report
        # The current turn leaves no room for a segment: the engine fits everything at once.
        result = self._plan_whole(items, query, budget)
        self._segments = [_Segment(0, len(items), copy.deepcopy(result.messages), result.tokens - REPLY_PRIMING,
                                   list(result.items), sum(it.tokens for it in items))]
        return result.report

    # -- the context ----------------------------------------------------------------------

    def _finish(self, turn: Turn, report: Report | None, cache: CacheReport, budget: int, started: float,
                quote: _Wanted | None = None) -> ContextResult:
        """The segments, the messages after them with the quotes among them,
        and this turn's quote of what the question needs (before the current
        turn; `quote` when it was chosen before a compaction was ruled out,
        else chosen here) as far as it fits within the compaction target:
        all of it is the prefix the next call keeps. Then the rest of the
        quote, the recall tail, just before the current turn."""
        items, current = turn.items, turn.current
        end = self._end()
        tail = items[end:]
        self._inputs = [(it.id, it.message) for it in items]
        self._turn = current
        previous_tail, self._tail = self._tail, None
        results = [r for s in self._segments for r in s.results] + [
            ItemResult(id=it.id, index=it.index, role=it.role, status="kept", tokens_in=it.tokens,
                       tokens_out=it.tokens, score=0.0, reason="after the last compaction")
            for it in tail
        ]
        # On a turn about the present the exchange a compaction took is quoted first, and the question's quote
        # has the room it leaves; a question about the past has its quote first.
        exchange_cost = self._quote_cost(items, self._exchange) if recency_applies(turn.query) else 0
        if quote is None:  # after a compaction: the segments changed, so does what they lost
            quote = self._quote(turn, room=min(self._quote_room(budget), budget - self._tokens()
                                               - sum(it.tokens for it in tail) - REPLY_PRIMING - exchange_cost))
        # The prefix keeps the quote only within the compaction target: the reserve is for the turns to come.
        loose = self._tokens() + sum(it.tokens for it in tail) + REPLY_PRIMING
        quote_message, quote_tokens, quoted, spill = self._split(
            items, quote.chosen, budget - max(math.ceil(self.reserve * budget), exchange_cost) - loose)
        if quote_message is not None:
            self._quotes.append((current, quote_message, quote_tokens, sorted(quoted)))
        highlights = [f"prefix: {cache.prefix_tokens} tokens kept as before, {len(tail)} message(s) after the last compaction"]
        at = {q[0]: q for q in self._quotes}
        messages = [m for s in self._segments for m in s.messages]
        for i in range(end, len(items)):
            if i in at:
                messages.append(at[i][1])
            messages.append(items[i].message)
        for position, _, _, indexes in self._quotes:
            where = "the current turn" if position == current else f"message {items[position].id}"
            for i in indexes:
                results[i] = msgspec.structs.replace(
                    results[i], reason=f"{results[i].reason}; quoted again before {where}".lstrip("; "))
        if quote_message is not None:
            highlights.append("quoted for the question: " + ", ".join(items[i].id for i in sorted(quoted)))
        prefix = self._tokens() + sum(it.tokens for it in tail)
        self._sent = prefix
        tokens = prefix + REPLY_PRIMING
        breakpoint_at = len(messages) - 1
        # The exchange a compaction took comes first (the previous message first); the rest only for the past.
        exchange_tail = [i for i in reversed(self._exchange) if i not in quoted]  # not twice
        spill = [*exchange_tail, *(spill if not recency_applies(turn.query) else [])]
        if spill:
            self._tail = self._recall_tail(items, current, spill, room=budget - tokens)
        elif previous_tail is not None and previous_tail[0] == current and not turn.new and report is None:
            # The turn's later calls send the same tail while it fits (they share a cache), else what of it fits.
            self._tail = previous_tail if previous_tail[2] <= budget - tokens else self._recall_tail(
                items, current, previous_tail[3], room=budget - tokens)
        if self._tail is not None and end <= current < len(items):
            _, tail_message, tail_tokens, recalled = self._tail
            first = len(messages) - (len(items) - current)  # the current turn's first message
            messages.insert(first, tail_message)
            breakpoint_at = first - 1  # the next turn chooses its own tail
            tokens += tail_tokens
            for i in recalled:
                results[i] = msgspec.structs.replace(
                    results[i], reason=f"{results[i].reason}; recalled in the tail before the current turn".lstrip("; "))
            highlights.append("recall tail (after the cache breakpoint, for this turn only): "
                              + ", ".join(items[i].id for i in sorted(recalled)))
            cache = msgspec.structs.replace(cache, tail=[items[i].id for i in sorted(recalled)], tail_tokens=tail_tokens)
        else:
            self._tail = None
        counts = {s: sum(r.status == s for r in results) for s in ("kept", "summarized", "cleared", "dropped")}
        elapsed = {"total": (time.perf_counter() - started) * 1e3}
        tokens_in = sum(it.tokens for it in items) + REPLY_PRIMING
        if report is None:
            report = Report(strategy="prefix", budget=budget, tokens_in=tokens_in, tokens_out=tokens, counts=counts,
                            timings_ms=elapsed, highlights=highlights, cache=cache, repairs=turn.repairs)
        else:
            # The compaction's own report speaks of one segment: its strategy and warnings stay, the rest is the whole.
            report = msgspec.structs.replace(
                report, budget=budget, tokens_in=tokens_in, tokens_out=tokens, counts=counts,
                timings_ms={**report.timings_ms, **elapsed}, highlights=highlights, cache=cache, repairs=turn.repairs,
            )
        engine = self.engine
        report.with_arc(lambda: engine._arc(items))  # the whole conversation's, built when first read
        return ContextResult(messages=copy.deepcopy(messages), tokens=tokens, items=results, report=report,
                             cache_breakpoint=breakpoint_at if breakpoint_at >= 0 else None)

    def _scores(self, turn: Turn) -> Any:
        """The engine's value of each message of `turn` for its question (computed once)."""
        if turn.scores is None:
            from ctxfold.engine.scoring import score_items

            engine = self.engine
            turn.scores, _ = score_items(turn.items, engine._run(turn.items, turn.budget, turn.query))
        return turn.scores

    def _quote(self, turn: Turn, *, room: int) -> _Wanted:
        """What the question needs that the segments hold only in part or not
        at all, within `room` tokens, once some of the `recall_top` messages
        the engine values most for it stand out (`_QUOTE_SPREAD` standard
        deviations above the mean value, `_PAST_QUOTE_SPREAD` for a question
        about the past): those first, then the other messages the segments
        lost, each group most valued per square root of its tokens first.
        `need` is what may force a compaction: the cost of quoting the ones
        that stand out, and for a question about the past at least half of
        `room` (or the whole quote, when it is smaller)."""
        items, current = turn.items, turn.current
        end = self._end()
        if not self.recall_top or not self._segments or current < end or current >= len(items) or room <= 0:
            return _NO_QUOTE
        missing = {r.index for s in self._segments for r in s.results if r.status != "kept"}
        missing -= {i for q in self._quotes for i in q[3]}
        if not missing:
            return _NO_QUOTE
        scores = self._scores(turn)
        top = sorted(range(current), key=lambda i: -float(scores[i]))[: self.recall_top]
        past = scores[:current]
        # Only a question that singles out older messages gets a quote, so a turn about the present adds nothing;
        # a question about the past (no recency pull) is answered from older messages, so its bar is lower.
        about_past = not recency_applies(turn.query)
        spread = _PAST_QUOTE_SPREAD if about_past else _QUOTE_SPREAD
        bar = float(past.mean() + spread * past.std())
        standing = {i for i in top if float(scores[i]) >= bar and i in missing}
        if not standing:
            return _NO_QUOTE

        def order(group: set[int]) -> list[int]:
            # The room is a knapsack: value per root of size keeps the best while fitting more of them.
            return sorted(group, key=lambda i: -float(scores[i]) / math.sqrt(max(items[i].tokens, 1)))

        chosen: list[int] = []
        cost = 0
        for i in [*order(standing), *order(missing - standing)]:
            if cost + items[i].tokens - _QUOTE_SLACK > room:
                continue  # cannot fit: spares rendering and counting a quote per message of a long history
            trial_cost = self._quote_cost(items, [*chosen, i])
            if trial_cost <= room:
                chosen, cost = [*chosen, i], trial_cost
        need = self._quote_cost(items, [i for i in chosen if i in standing])
        if about_past:
            # Its answer may be among the others the segments lost, which only a tail with room brings back.
            need = max(need, min(cost, room // 2))
        return _Wanted(chosen, cost, need)

    def _quote_cost(self, items: list[Any], indexes: list[int]) -> int:
        """Tokens of quoting `items[indexes]` under the longer header (the quote's or the recall tail's)."""
        if not indexes:
            return 0
        # The header is a paragraph of its own, so the two renderings differ by the same count whatever they quote.
        return message_costs([_quote_message(items, sorted(indexes), _LONGER_HEADER)], self.engine.tokenizer)[0]

    def _split(self, items: list[Any], chosen: list[int], room: int,
               header: str | None = None) -> tuple[dict[str, Any] | None, int, list[int], list[int]]:
        """The quote (under `header`, default the quote's) of those of `chosen` (in their order)
        that fit `room` tokens, its tokens, their indexes, and the rest (for
        the recall tail)."""
        kept: list[int] = []
        spill: list[int] = []
        message, cost = None, 0
        for i in chosen:
            trial = _quote_message(items, sorted([*kept, i]), header)
            trial_cost = message_costs([trial], self.engine.tokenizer)[0]
            if trial_cost <= room:
                kept, message, cost = [*kept, i], trial, trial_cost
            else:
                spill.append(i)
        return message, cost, kept, spill

    def _recall_tail(self, items: list[Any], current: int, spill: list[int],
                     room: int) -> tuple[int, dict[str, Any], int, list[int]] | None:
        """The recall tail: those of `spill` (in their order) that fit `room` tokens, in one message."""
        message, cost, chosen, _ = self._split(items, spill, room, _TAIL_HEADER)
        return (current, message, cost, chosen) if message is not None else None

    def _worth_compacting(self, items: list[Any], budget: int, current: int, total: int) -> bool:
        """Under `pricing`: compacting the messages since the last compaction
        now rewrites them as a new segment (written instead of read) but makes
        every prompt smaller, at the read price, for the turns the prefix
        would otherwise still last."""
        if not self._growth:
            return False
        loose = sum(it.tokens for it in items[self._end():current])
        target = budget - math.ceil(self.reserve * budget)
        room = target - self._tokens() - sum(it.tokens for it in items[current:]) - REPLY_PRIMING
        segment = max(room // 2, _MIN_SEGMENT_TOKENS)
        saved = loose - segment
        if saved <= 0:
            return False
        turns = (budget - total) / self._growth
        return bool(saved * self.pricing.read * turns > segment * (self.pricing.write - self.pricing.read))

    def _quote_room(self, budget: int) -> int:
        return math.floor(self.quote_share * budget)

    def _end(self) -> int:
        return self._segments[-1].end if self._segments else 0

    def _tokens(self) -> int:
        """The segments' tokens and the quotes' (the tail's messages aside)."""
        return sum(s.tokens for s in self._segments) + sum(q[2] for q in self._quotes)

    def _fresh_reason(self, items: list[Any], key: tuple[int, str | None]) -> str | None:
        """Why the prefix cannot be kept at all, or None."""
        if self._key is None:
            return "no prefix yet"
        if key != self._key:
            return "the budget or the system prompt changed"
        n = len(self._inputs)
        # As repaired: an unanswered call repaired last time may be answered now.
        if len(items) < n or any((it.id, it.message) != known for it, known in zip(items, self._inputs)):
            return "the earlier messages changed"
        return None


#: The least share of the previous segment's density a new segment may have: a higher floor merges more often,
#: and a merge rewrites segments the provider had cached.
_DENSITY_FLOOR = 0.25
#: How many messages before the current turn a compaction sends verbatim: the exchange a follow-up reads.
_KEPT_RECENT = 2
#: The smallest compacted segment worth making; below it, older segments are compacted too.
_MIN_SEGMENT_TOKENS = 256
#: How many standard deviations above the mean value for the question a message must be for the turn to quote.
_QUOTE_SPREAD = 2.5
#: The same for a question about the past (`recency_applies` false).
_PAST_QUOTE_SPREAD = 2.0
#: Segments are planned without the question of the turn that compacts, since the later questions differ.
_SEGMENT_QUERY = ""


_QUOTE_HEADER = "Earlier in this conversation (quoted again for the current question):"
_TAIL_HEADER = "Earlier in this conversation (recalled for this turn only):"
_LONGER_HEADER = max(_QUOTE_HEADER, _TAIL_HEADER, key=len)
#: A message costs at least its own tokens less this once quoted (its role and framing become an id line).
_QUOTE_SLACK = 8


class _Wanted(msgspec.Struct, frozen=True):
    """A turn's quote as chosen: the indexes in their order, its tokens, and
    the tokens of the part that may force a compaction."""

    chosen: list[int]
    tokens: int
    need: int


_NO_QUOTE = _Wanted([], 0, 0)


def _current_start(items: list[Any]) -> int:
    """Where the current turn starts: the last user message (or the end)."""
    return next((i for i in range(len(items) - 1, -1, -1) if items[i].role == "user"), len(items))


def _recent_start(items: list[Any], current: int, last: int) -> int:
    """Where the last `last` messages before `current` start, moved back to
    the call a tool result answers, so a call and its results stay together."""
    start = max(current - last, 0)
    while 0 < start < current and items[start].role == "tool":
        start -= 1
    return start


def _exchange_before(items: list[Any], current: int) -> list[int]:
    """The message before `current` and the user message it answers: what a
    follow-up reads, quoted again without the tool rounds between them, whose
    results the answer reports."""
    if current < 1:
        return []
    asked = next((i for i in range(current - 2, -1, -1) if items[i].role == "user"), None)
    return sorted({current - 1} | ({asked} if asked is not None else set()))


def _quote_message(items: list[Any], indexes: list[int], header: str | None = None) -> dict[str, Any]:
    """The user message quoting `items[indexes]`, in conversation order, each under its id."""
    parts = [header or _QUOTE_HEADER]
    for i in indexes:
        it = items[i]
        who = f"result of {it.tool_name}" if it.role == "tool" and it.tool_name else it.role
        parts.append(f"[{it.id}, {who}]\n{it.text}")
    return {"role": "user", "content": "\n\n".join(parts)}


def _as_passed(item: Any) -> Any:
    """An item's message as the caller passed it, with the id it was given,
    so a segment's ids are the whole conversation's."""
    source = item.source
    if isinstance(source, dict):
        return {**source, "id": item.id}
    return source if source is not None else {**item.message, "id": item.id}


def _shifted(results: list[ItemResult], start: int) -> list[ItemResult]:
    """Item results of a segment with their indexes in the whole input."""
    return [msgspec.structs.replace(r, index=r.index + start) for r in results]
