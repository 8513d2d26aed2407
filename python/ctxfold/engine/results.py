"""The records that flow through `ContextEngine.optimize` (msgspec Structs:
typed, cheap to build, and serialisable for reports and the memory store)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import msgspec

from ctxfold.text.arc import ConversationArc
from ctxfold.text.entity_repository import EntityRepository

__all__ = ["Item", "ItemResult", "Repair", "Report", "ContextResult", "Status", "STATE_KINDS", "LAYER_NAMES"]

Status = Literal["kept", "summarized", "cleared", "dropped"]
#: Message kinds that carry the agent's state: scored as structure, never compacted.
STATE_KINDS = frozenset({"decision", "quality_gate", "trajectory", "active_task"})

#: The scoring layers, in the order of `EngineConfig.weights`.
LAYER_NAMES = ("semantic", "entity", "recency", "intent", "structure", "cross_reference")


class Item(msgspec.Struct, kw_only=True):
    """One input message, validated, with what scoring and planning need."""

    id: str
    index: int
    role: str
    message: dict[str, Any]
    """The message as the chat API takes it (only API keys, content as given)."""
    text: str
    """All readable text of the message (content parts, tool call arguments)."""
    tokens: int
    """What this message costs in a prompt (its share of `count_messages`)."""
    kind: str | None = None
    timestamp: float | None = None
    utc_offset: float = 0.0
    """Seconds east of UTC of the timestamp as given (0 for naive times and epoch seconds), so its calendar date is the writer's."""
    importance: float = 0.5
    pinned: bool = False
    tool_call_ids: tuple[str, ...] = ()
    """Ids of the tool calls an assistant message makes."""
    tool_name: str | None = None
    """For a tool result: the name of the function whose call it answers."""
    speaker: str | None = None
    """Who wrote the message, when it says: its `name`, or a leading ``Name: `` in its text."""
    source: Any = None
    """The caller's message this item came from, as passed (for `restore`)."""
    date_note: str = ""
    """The line of dates added after the content (`with_date_annotations`), or ""."""
    note_tokens: int = 0
    """What `date_note` adds to `tokens`."""


class ItemResult(msgspec.Struct, kw_only=True):
    """What happened to one input message."""

    id: str
    index: int
    role: str
    status: Status
    tokens_in: int
    tokens_out: int
    score: float
    layers: dict[str, float] = msgspec.field(default_factory=dict)
    reason: str = ""


class Repair(msgspec.Struct, kw_only=True):
    """One fix made to the input under `EngineConfig(on_invalid="repair")`."""

    index: int
    """Index of the message in the caller's `messages` (-1: the `system=` argument)."""
    id: str
    """Id of that message: its item in `ContextResult.items`, except for a
    duplicate tool result, which is folded into the first result's item."""
    kind: str
    """orphan_tool_result, misplaced_tool_result, unanswered_tool_call,
    duplicate_tool_call_id, duplicate_tool_result, none_content,
    empty_tool_calls or lone_surrogate."""
    problem: str
    """What was wrong."""
    action: str
    """What was done about it."""

    @property
    def where(self) -> str:
        return f"messages[{self.index}]" if self.index >= 0 else "system"


class CacheReport(msgspec.Struct, kw_only=True):
    """Whether a `CacheAwareSession` kept the previous context as the prefix."""

    kept: bool
    reason: str
    """Why the prefix was kept, or why it was compacted afresh."""
    prefix_tokens: int = 0
    """Tokens of the previous context at the start of this one (what a provider's cache can serve)."""
    tail: list[str] = msgspec.field(default_factory=list)
    """Ids of the messages the recall tail quotes (before the current turn, after the cache breakpoint)."""
    tail_tokens: int = 0
    """Tokens of the recall tail: sent for this turn only, so not served from the cache."""
    one_off: bool = False
    """Whether the context was planned for this turn's question alone, outside
    the prefix (a question that recalls the conversation): nothing of it is
    cached, and the next call keeps the prefix from before it."""


class Report(msgspec.Struct, kw_only=True, dict=True):
    """How a context was built: the strategy, where the tokens went, timings,
    the conversation arc (`arc`) and the entities (`entities`), both built
    when first read."""

    strategy: str
    budget: int
    tokens_in: int
    tokens_out: int
    counts: dict[str, int]
    layers: dict[str, int] = msgspec.field(default_factory=dict)
    timings_ms: dict[str, float] = msgspec.field(default_factory=dict)
    warnings: list[str] = msgspec.field(default_factory=list)
    optimality_gap: float = 0.0
    repairs: list[Repair] = msgspec.field(default_factory=list)
    """What was repaired in the input (`EngineConfig.on_invalid`), in message order."""
    highlights: list[str] = msgspec.field(default_factory=list)
    """What happened to the current turn, then to the largest messages, one line each."""
    cache: CacheReport | None = None
    """For a `CacheAwareSession`: whether the previous context was kept as the prefix."""

    @property
    def arc(self) -> ConversationArc | None:
        """The conversation arc of the input: topics, open questions,
        decisions, actions and the current focus (`arc.to_text()` is what the
        ``conversation_arc`` layer shows under
        `EngineConfig(conversation_arc=True)`). Built on first read, then kept."""
        found: ConversationArc | None = self._built("arc")
        return found

    @property
    def entities(self) -> EntityRepository | None:
        """The entities of the input (an `EntityRepository`: types, mentions,
        aliases, first and last turn, what is active). Built on first read,
        then kept."""
        found: EntityRepository | None = self._built("entities")
        return found

    def with_arc(self, arc: ConversationArc | Callable[[], ConversationArc] | None) -> Report:
        """This report with `arc` (or a function that builds it when first read)."""
        return self._with("arc", arc, ConversationArc)

    def with_entities(self, entities: EntityRepository | Callable[[], EntityRepository] | None) -> Report:
        """This report with `entities` (or a function that builds them when first read)."""
        return self._with("entities", entities, EntityRepository)

    def _built(self, name: str) -> Any:
        found = self.__dict__.get(f"_{name}")
        if found is None:
            make = self.__dict__.pop(f"_{name}_source", None)
            if make is not None:
                found = self.__dict__[f"_{name}"] = make()
        return found

    def _with(self, name: str, value: Any, kind: type) -> Report:
        self.__dict__.pop(f"_{name}", None)
        self.__dict__.pop(f"_{name}_source", None)
        if isinstance(value, kind):
            self.__dict__[f"_{name}"] = value
        elif value is not None:
            self.__dict__[f"_{name}_source"] = value
        return self

    @property
    def compression_ratio(self) -> float:
        """Input tokens per output token (1.0 when nothing was removed)."""
        return self.tokens_in / self.tokens_out if self.tokens_out else float("inf")

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON-ready values, the arc and the compression ratio included."""
        data: dict[str, Any] = msgspec.to_builtins(self)
        data["compression_ratio"] = round(self.compression_ratio, 4)
        arc = self.arc
        data["arc"] = arc.to_dict() if arc is not None else None
        return data

    def to_text(self) -> str:
        """The report as short lines for a log: sizes, the current turn and largest messages, warnings, the arc."""
        lines = [
            f"strategy {self.strategy}: {self.tokens_in} -> {self.tokens_out} tokens "
            f"(budget {self.budget}, {self.compression_ratio:.2f}x)",
        ]
        lines += self.highlights
        lines.append("items: " + ", ".join(f"{k} {v}" for k, v in self.counts.items()))
        if self.cache is not None:
            kept = "kept" if self.cache.kept else "compacted afresh"
            lines.append(f"prefix {kept}: {self.cache.reason}")
        if self.layers:
            lines.append("layers: " + ", ".join(f"{k} {v}" for k, v in self.layers.items()))
        if self.timings_ms:
            lines.append("timings: " + ", ".join(f"{k} {v:.1f} ms" for k, v in self.timings_ms.items()))
        lines += [f"warning: {w}" for w in self.warnings]
        arc = self.arc.to_text(limit=3) if self.arc is not None else ""
        if arc:
            lines.append("conversation arc:")
            lines += [f"  {line}" for line in arc.splitlines()]
        shown = 5
        lines += [f"repair: {r.where} ({r.id}): {r.problem}; {r.action}" for r in self.repairs[:shown]]
        if len(self.repairs) > shown:
            lines.append(f"repair: ... and {len(self.repairs) - shown} more (report.repairs)")
        return "\n".join(lines)


class ContextResult(msgspec.Struct, kw_only=True):
    """The fitted context: `messages` for the chat API, exactly `tokens` long."""

    messages: list[dict[str, Any]]
    tokens: int
    items: list[ItemResult]
    report: Report
    cache_breakpoint: int | None = None
    """For a `CacheAwareSession`: the index of the last message the next call
    keeps unchanged, where a prompt-cache breakpoint belongs."""
