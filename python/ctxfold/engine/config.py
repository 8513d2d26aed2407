"""`EngineConfig`: every knob of the engine, with the seed spec's defaults and
its two appendix presets."""

from __future__ import annotations

from typing import Literal

import msgspec

from ctxfold.errors import InvalidInputError

__all__ = ["EngineConfig", "DEFAULT_WEIGHTS", "SEED_WEIGHTS", "STRATEGIES"]

STRATEGIES = ("optimal", "auto", "full", "windowed", "compacted", "multi_level")
# MiniLM's position embeddings end at 512 tokens.
MAX_RERANK_TOKENS = 512

#: The seed spec's layer weights (cross-reference is a boost on top);
#: DEFAULT_WEIGHTS raise semantic to 0.40, which kept the most evidence over
#: every dev set of `benches/eval_context.py` (docs/benchmarks.md).
#: SEED_WEIGHTS keeps the spec's values.
SEED_WEIGHTS = {
    "semantic": 0.30,
    "entity": 0.25,
    "recency": 0.20,
    "intent": 0.15,
    "structure": 0.10,
    "cross_reference": 0.15,
}
DEFAULT_WEIGHTS = {
    "semantic": 0.40,
    "entity": 0.25,
    "recency": 0.20,
    "intent": 0.15,
    "structure": 0.10,
    "cross_reference": 0.15,
}


class EngineConfig(msgspec.Struct, kw_only=True):
    """How `ContextEngine` plans: the default budget, the strategy, the scoring
    weights, what is protected, how summaries and tool output are sized.
    Presets: `high_compression()` and `high_fidelity()`."""

    budget: int = 8000
    """Default token budget of `optimize` when none is passed."""
    strategy: Literal["optimal", "auto", "full", "windowed", "compacted", "multi_level"] = "optimal"
    """optimal: the knapsack over scores; windowed: newest ~70% verbatim, older
    summarised; compacted: oldest 40% heavily summarised, middle 35% key
    messages with gap markers, newest 25% verbatim; multi_level: chunks of ~20
    older messages each replaced by a level-1 or level-2 summary (or dropped),
    the newest chunk verbatim; full: everything (only when it fits; otherwise
    optimal); auto: picked by how far over budget."""
    weights: dict[str, float] = msgspec.field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    protect_last: int = 4
    """The last N messages are soft-protected: verbatim when they fit, shortened
    otherwise; newest first, while their shortest forms take at most a
    quarter of the budget (the older ones are then planned by value)."""
    protect_critical_entities: bool = False
    """Keep present (verbatim or shortened) the latest user message naming
    each active critical entity: who the user is, a task goal, a commitment,
    a deadline; at most a tenth of the budget goes to them."""
    expand_neighbours: bool = True
    """Neighbour expansion: a kept assistant answer pulls in the user turn it
    replies to (its value lifted, the knapsack solved again). Not in a chat
    between two people, where the turns are not questions and answers."""
    embed_query: bool = True
    """With the default embedder (the static MiniLM table), the question is
    also embedded by MiniLM itself, and the messages' table vectors are
    mapped into MiniLM's space (`ctxfold.embed.ProjectedEmbedder`): a second
    view of it, read in context, set beside the table's own (the larger
    score counts). One short text per question: the model loads on the
    first call (once per process) and then adds milliseconds. False: the
    table alone (the short list of ``rerank`` is still read by the model)."""
    rerank: int = 100
    """Two-stage ranking: the N messages the fast first stage (BM25 and the
    static table) ranks best are scored again with MiniLM (the process's
    shared model, each message embedded once and cached, persisted with
    ``store=``); 0 is off (with ``embed_query=False`` too, no model runs)."""
    rerank_tokens: int = 64
    """What MiniLM reads of each message of the short list: its first N
    tokens. The opening of a message says what it is about, and the model's
    cost grows with what it reads: 64 keeps a cold call on a 100K-token
    history within the default's time (docs/benchmarks.md); `reranked()`
    reads 256."""
    half_life_turns: float = 20.0
    summary_ratio: float = 0.3
    """A summarised message keeps about this share of its tokens."""
    min_summary_tokens: int = 24
    max_tool_output_tokens: int = 2000
    """Tool output longer than this can be cut to head + tail of this many
    tokens: one of its forms, which the plan picks before giving up anything
    of more value."""
    tool_output_warning_tokens: int = 2000
    total_tool_output_warning_tokens: int = 5000
    context_window: int = 128_000
    compact_threshold: float = 0.8
    """`should_compact` is true above this share of `context_window`."""
    annotate_dates: bool = True
    """Relative dates ("yesterday", "last week") in timestamped user and
    assistant messages get their absolute dates on a line after the message
    (``[dates: yesterday = 2023-05-07]``), so what is kept still says when;
    the message's own words stay as written, the annotated text is what the
    plan counts, and `restore` returns the original."""
    annotate_references: bool = False
    """After a kept message whose pronouns or definite references ("it",
    "she", "that bug") point into a message that was left out, a line naming
    what they point to (``[refs: it = the payment service]``), in the room
    the plan held for them (a fiftieth of the budget); the message's own
    words stay as written. Off by default: the held room costs some evidence
    and resolving every message's references costs time on each call
    (docs/benchmarks.md), and how often the resolution names the right
    antecedent in real chats is not measured."""
    conversation_arc: bool = False
    """Put the conversation arc (`report.arc.to_text()`: current focus, open
    questions, pending actions, decisions, earlier topics) in the prompt as
    the budgeted ``conversation_arc`` layer. Off by default: it spends budget
    the history would otherwise get. The report carries the arc either way."""
    on_invalid: Literal["repair", "raise"] = "repair"
    """What `optimize` does with malformed messages (orphan tool results,
    unanswered tool calls, duplicate call ids, ``None`` contents): repair them
    and list each repair in ``report.repairs``, or raise `InvalidInputError`
    naming the message."""

    def __post_init__(self) -> None:
        if self.budget <= 0:
            raise InvalidInputError(f"budget: must be > 0, got {self.budget}")
        unknown = set(self.weights) - set(DEFAULT_WEIGHTS)
        if unknown:
            raise InvalidInputError(f"weights: unknown layers {sorted(unknown)}; known: {sorted(DEFAULT_WEIGHTS)}")
        if any(w < 0 for w in self.weights.values()):
            raise InvalidInputError("weights: every weight must be >= 0")
        if not isinstance(self.embed_query, bool):
            raise InvalidInputError(f"embed_query: True or False, got {self.embed_query!r}")
        if isinstance(self.rerank, bool) or not isinstance(self.rerank, int) or self.rerank < 0:
            raise InvalidInputError(f"rerank: the short list's length, an int >= 0 (0: off), got {self.rerank!r}")
        if isinstance(self.rerank_tokens, bool) or not isinstance(self.rerank_tokens, int) \
                or not 1 <= self.rerank_tokens <= MAX_RERANK_TOKENS:
            raise InvalidInputError(f"rerank_tokens: how many tokens MiniLM reads of each message, an int from 1 to "
                                    f"{MAX_RERANK_TOKENS}, got {self.rerank_tokens!r}")
        if self.protect_last < 0:
            raise InvalidInputError(f"protect_last: must be >= 0, got {self.protect_last}")
        if not 0 < self.summary_ratio < 1:
            raise InvalidInputError(f"summary_ratio: must be in (0, 1), got {self.summary_ratio}")
        if self.strategy not in STRATEGIES:
            raise InvalidInputError(f"strategy: unknown {self.strategy!r}; use one of {', '.join(STRATEGIES)}")
        if self.on_invalid not in ("repair", "raise"):
            raise InvalidInputError(f"on_invalid: use 'repair' or 'raise', got {self.on_invalid!r}")
        if not 0 < self.compact_threshold <= 1:
            raise InvalidInputError(f"compact_threshold: must be in (0, 1], got {self.compact_threshold}")

    @classmethod
    def high_compression(cls, **overrides: object) -> EngineConfig:
        """Aggressive: fewer protected turns, shorter summaries, compact early."""
        values: dict[str, object] = {"protect_last": 2, "summary_ratio": 0.15, "compact_threshold": 0.6,
                                     "max_tool_output_tokens": 1000}
        return cls(**{**values, **overrides})  # type: ignore[arg-type]

    @classmethod
    def reranked(cls, **overrides: object) -> EngineConfig:
        """Two-stage ranking reading more: MiniLM over the first 256 tokens
        of each of the first stage's 150 best messages, where the default
        reads 64 of the 100 best. Its first call on a long history takes
        seconds, not milliseconds, on a CPU (docs/benchmarks.md)."""
        values: dict[str, object] = {"rerank": 150, "rerank_tokens": 256}
        return cls(**{**values, **overrides})  # type: ignore[arg-type]

    @classmethod
    def high_fidelity(cls, **overrides: object) -> EngineConfig:
        """Conservative: more protected turns, longer summaries, compact late."""
        values: dict[str, object] = {"protect_last": 8, "summary_ratio": 0.5, "compact_threshold": 0.9,
                                     "max_tool_output_tokens": 4000}
        return cls(**{**values, **overrides})  # type: ignore[arg-type]
