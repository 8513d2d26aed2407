"""The records that flow through `ContextEngine.optimize` (msgspec Structs:
typed, cheap to build, and serialisable for reports and the memory store)."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

__all__ = ["Item", "ItemResult", "Report", "ContextResult", "Status", "LAYER_NAMES"]

Status = Literal["kept", "summarized", "cleared", "dropped"]

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
    importance: float = 0.5
    pinned: bool = False
    tool_call_ids: tuple[str, ...] = ()
    """Ids of the tool calls an assistant message makes."""
    source: Any = None
    """The caller's message this item came from, as passed (for `restore`)."""


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


class Report(msgspec.Struct, kw_only=True):
    """How a context was built: the strategy, where the tokens went, timings."""

    strategy: str
    budget: int
    tokens_in: int
    tokens_out: int
    counts: dict[str, int]
    layers: dict[str, int] = msgspec.field(default_factory=dict)
    timings_ms: dict[str, float] = msgspec.field(default_factory=dict)
    warnings: list[str] = msgspec.field(default_factory=list)
    optimality_gap: float = 0.0

    @property
    def compression_ratio(self) -> float:
        """Input tokens per output token (1.0 when nothing was removed)."""
        return self.tokens_in / self.tokens_out if self.tokens_out else float("inf")

    def to_dict(self) -> dict[str, Any]:
        data = msgspec.to_builtins(self)
        data["compression_ratio"] = round(self.compression_ratio, 4)
        return data

    def to_text(self) -> str:
        lines = [
            f"strategy {self.strategy}: {self.tokens_in} -> {self.tokens_out} tokens "
            f"(budget {self.budget}, {self.compression_ratio:.2f}x)",
            "items: " + ", ".join(f"{k} {v}" for k, v in self.counts.items()),
        ]
        if self.layers:
            lines.append("layers: " + ", ".join(f"{k} {v}" for k, v in self.layers.items()))
        if self.timings_ms:
            lines.append("timings: " + ", ".join(f"{k} {v:.1f} ms" for k, v in self.timings_ms.items()))
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


class ContextResult(msgspec.Struct, kw_only=True):
    """The fitted context: `messages` for the chat API, exactly `tokens` long."""

    messages: list[dict[str, Any]]
    tokens: int
    items: list[ItemResult]
    report: Report
