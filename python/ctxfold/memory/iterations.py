"""Iteration records (the reflection framework): what each tool call of an
agent's loop did and taught, and per iteration a synthesis and a progress
assessment, so the agent can reason over a compressed history and notice
when it is stuck.

``log = store.iterations.log(scope=scope, log="task-42")``, then
``log.record_call(ToolCallRecord(tool=..., ...))`` per call,
``log.end_iteration("what we know now", progress="advancing")`` per
iteration, ``log.reasoning_context(goal, budget)`` for the prompt and
``log.is_stuck()`` / ``log.recovery_prompt()`` to break a loop.
"""

from __future__ import annotations

import time
from typing import Any, Literal

import msgspec

from ctxfold._core import count_tokens
from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.memory.backend import Backend, Part
from ctxfold.memory.checks import integer, metadata, number, text, text_list
from ctxfold.memory.scope import Scope, check_scope

__all__ = ["MAX_RAW_OUTPUT", "STUCK_AFTER", "IterationLog", "IterationSynthesis", "Iterations", "ToolCallRecord"]

Relevance = Literal["high", "medium", "low"]
Progress = Literal["advancing", "stuck", "regressing"]

#: Characters of a tool's raw output that are kept.
MAX_RAW_OUTPUT = 1_000
#: Consecutive stuck or regressing iterations after which `is_stuck` is true.
STUCK_AFTER = 3
_TIERS = ("high", "medium", "low")


class ToolCallRecord(msgspec.Struct, kw_only=True):
    """One tool call. ``raw_output`` is cut to `MAX_RAW_OUTPUT` characters when recorded."""

    tool: str
    params: dict[str, Any] = msgspec.field(default_factory=dict)
    raw_output: str = ""
    outcome: str = ""
    execution_time: float = 0.0
    """Seconds."""
    cost: float = 0.0
    insights: list[str] = msgspec.field(default_factory=list)
    learning: str = ""
    relevance: Relevance = "medium"
    next_actions: list[str] = msgspec.field(default_factory=list)
    iteration: int = 0
    """Filled by `IterationLog.record_call` (1 for the first iteration)."""
    timestamp: float | None = None


class IterationSynthesis(msgspec.Struct, kw_only=True):
    """What an agent concluded at the end of one iteration, and whether it is advancing, stuck or regressing."""

    iteration: int
    synthesis: str
    progress: Progress
    timestamp: float


_call_decoder = msgspec.msgpack.Decoder(ToolCallRecord)
_synth_decoder = msgspec.msgpack.Decoder(IterationSynthesis)
_encode = msgspec.msgpack.Encoder().encode


class Iterations(Part):
    """The iteration logs of each scope (``store.iterations``)."""

    def log(self, *, scope: Scope, log: str = "default") -> IterationLog:
        """The iteration log ``log`` of ``scope`` (created on first write)."""
        return IterationLog(self.backend, scope, log)


class IterationLog:
    """The tool calls and iteration syntheses of one log in one scope."""

    def __init__(self, backend: Backend, scope: Scope, log: str = "default") -> None:
        self.backend = backend
        self.scope = check_scope(scope, write=True)
        if not isinstance(log, str):
            raise InvalidTypeError(f"log: expected str, got {type(log).__name__}")
        self.log = text(log, "log", key=True)

    def _rows(self, kind: str) -> list[bytes]:
        db = self.backend
        with db.read() as cur:
            sid = db.scope_id(cur, self.scope, create=False)
            if sid is None:
                return []
            rows = db.execute(
                cur, "SELECT record FROM iterations WHERE scope_id = ? AND log = ? AND kind = ? ORDER BY rid",
                (sid, self.log, kind),
            ).fetchall()
        return [bytes(r[0]) for r in rows]

    def _insert(self, kind: str, record: Any, created: float) -> None:
        db = self.backend
        with db.write() as cur:
            sid = db.scope_id(cur, self.scope, create=True)
            db.execute(
                cur, "INSERT INTO iterations (scope_id, log, kind, created_at, record) VALUES (?, ?, ?, ?, ?)",
                (sid, self.log, kind, created, _encode(record)),
            )

    @property
    def current_iteration(self) -> int:
        """The iteration in progress (1 + the number of ended iterations)."""
        return len(self._rows("synthesis")) + 1

    def record_call(self, call: ToolCallRecord | None = None, /, **fields: Any) -> ToolCallRecord:
        """Record a tool call (a `ToolCallRecord` or its fields); the stored record."""
        if call is None:
            try:
                call = msgspec.convert(fields, ToolCallRecord)
            except msgspec.ValidationError as e:
                raise InvalidInputError(f"record_call: {e}") from e
        elif not isinstance(call, ToolCallRecord):
            raise InvalidTypeError(f"call: expected a ToolCallRecord, got {type(call).__name__}")
        if call.relevance not in _TIERS:
            raise InvalidInputError(f"relevance: must be one of {_TIERS}, got {call.relevance!r}")
        call = msgspec.structs.replace(
            call,
            tool=text(call.tool, "call.tool"),
            params=metadata(call.params, "call.params"),
            raw_output=text(call.raw_output, "call.raw_output"),
            outcome=text(call.outcome, "call.outcome"),
            execution_time=number(call.execution_time, "call.execution_time"),
            cost=number(call.cost, "call.cost"),
            insights=text_list(call.insights, "call.insights"),
            learning=text(call.learning, "call.learning"),
            next_actions=text_list(call.next_actions, "call.next_actions"),
            iteration=integer(call.iteration, "call.iteration"),
            timestamp=number(call.timestamp, "call.timestamp", optional=True),
        )
        now = time.time()
        call = msgspec.structs.replace(
            call,
            raw_output=call.raw_output[:MAX_RAW_OUTPUT],
            iteration=call.iteration or self.current_iteration,
            timestamp=now if call.timestamp is None else call.timestamp,
        )
        self._insert("call", call, now)
        return call

    def end_iteration(self, synthesis: str, progress: Progress) -> IterationSynthesis:
        """Close the current iteration with what was learned and whether the work is
        ``advancing``, ``stuck`` or ``regressing``."""
        if progress not in ("advancing", "stuck", "regressing"):
            raise InvalidInputError(f"progress: must be 'advancing', 'stuck' or 'regressing', got {progress!r}")
        synthesis = text(synthesis, "synthesis")
        now = time.time()
        record = IterationSynthesis(iteration=self.current_iteration, synthesis=synthesis, progress=progress, timestamp=now)
        self._insert("synthesis", record, now)
        return record

    def calls(self) -> list[ToolCallRecord]:
        return [_call_decoder.decode(r) for r in self._rows("call")]

    def syntheses(self) -> list[IterationSynthesis]:
        return [_synth_decoder.decode(r) for r in self._rows("synthesis")]

    def is_stuck(self) -> bool:
        """True after `STUCK_AFTER` or more consecutive stuck/regressing iterations (the latest ones)."""
        run = 0
        for s in reversed(self.syntheses()):
            if s.progress == "advancing":
                break
            run += 1
        return run >= STUCK_AFTER

    def recovery_prompt(self) -> str:
        """A prompt that asks the agent to change course, citing the recent iterations."""
        recent = self.syntheses()[-STUCK_AFTER:]
        tried = sorted({c.tool for c in self.calls() if c.iteration in {s.iteration for s in recent}})
        lines = [
            f"You have made no progress for {len(recent)} iterations.",
            *(f"- iteration {s.iteration} ({s.progress}): {s.synthesis}" for s in recent),
            f"Tools used in them: {', '.join(tried) or 'none'}.",
            "Stop repeating these steps. Re-read the goal, list your assumptions and which one may be wrong, "
            "then choose a different approach (another tool, other parameters, or ask for help).",
        ]
        return "\n".join(lines)

    def reasoning_context(self, goal: str, budget: int) -> str:
        """The history compressed for a prompt: the goal, the latest synthesis,
        then the tool calls ranked by relevance tier (high, medium, low) and
        chronological within a tier, as many as fit in ``budget`` tokens
        (o200k_base): the first call that does not fit ends the list, so a
        lower tier is only shown when every call of the higher ones is."""
        budget = integer(budget, "budget")
        goal = text(goal, "goal")
        header = [f"Goal: {goal}"]
        syntheses = self.syntheses()
        if syntheses:
            last = syntheses[-1]
            header.append(f"Iteration {last.iteration} ({last.progress}): {last.synthesis}")
        lines: list[str] = []
        used = 0
        for line in header:
            cost = int(count_tokens(line + "\n"))
            if used + cost > budget:
                return "\n".join(lines)
            lines.append(line)
            used += cost
        calls = self.calls()
        for tier in _TIERS:
            for c in (c for c in calls if c.relevance == tier):
                line = _call_line(c)
                cost = int(count_tokens(line + "\n"))
                if used + cost > budget:
                    return "\n".join(lines)
                lines.append(line)
                used += cost
        return "\n".join(lines)


def _call_line(c: ToolCallRecord) -> str:
    parts = [f"[{c.relevance}] it{c.iteration} {c.tool}({', '.join(f'{k}={v!r}' for k, v in c.params.items())})"]
    if c.outcome:
        parts.append(f"-> {c.outcome}")
    if c.learning:
        parts.append(f"learned: {c.learning}")
    if c.insights:
        parts.append("insights: " + "; ".join(c.insights))
    if c.next_actions:
        parts.append("next: " + "; ".join(c.next_actions))
    return " ".join(parts)
