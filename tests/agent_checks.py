"""What an engine output must hold, computed from the input alone (shared by the engine tests)."""

from __future__ import annotations

__all__ = ["current_turn", "must_be_present"]


def current_turn(msgs: list[dict]) -> list[int]:
    """The last user message and, when the input ends with tool results, their call and all its results."""
    current = [max((i for i, m in enumerate(msgs) if m["role"] == "user"), default=None)]
    if msgs and msgs[-1]["role"] == "tool":
        call = next(i for i in range(len(msgs) - 1, -1, -1) if msgs[i].get("tool_calls"))
        ids = {c["id"] for c in msgs[call]["tool_calls"]}
        current += [call] + [i for i, m in enumerate(msgs) if m.get("tool_call_id") in ids]
    return sorted({i for i in current if i is not None})


def must_be_present(msgs: list[dict], extra: frozenset[int] = frozenset()) -> list[dict]:
    """System and pinned messages with their tool groups, and the current turn, verbatim
    (and the messages `extra` names, with their tool groups)."""
    keep = set(current_turn(msgs)) | {i for i, m in enumerate(msgs) if m["role"] == "system" or m.get("pinned")} | extra
    owner = {c["id"]: i for i, m in enumerate(msgs) for c in m.get("tool_calls") or ()}
    group = [owner.get(m.get("tool_call_id"), i) for i, m in enumerate(msgs)]
    kept_groups = {group[i] for i in keep}
    return [m for i, m in enumerate(msgs) if i in keep or group[i] in kept_groups]
