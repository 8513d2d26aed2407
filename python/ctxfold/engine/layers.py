"""Prompt layers around the history: memory (identity, preferences) and
knowledge (topic, entity, conversation arc, just-in-time retrieval), sized by
the core's `plan_layers` and placed in the order system -> memory ->
knowledge -> history -> current message. A layer is cut to its allocation;
what a layer leaves unused goes to the history."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxfold._core import BudgetAllocation, Tokenizer, plan_layers
from ctxfold.errors import InvalidInputError, InvalidTypeError

__all__ = ["LAYER_ORDER", "ALIASES", "layer_messages"]

#: Content layers in prompt order, with the heading each is given.
LAYER_ORDER = {
    "identity": "Identity",
    "preferences": "Preferences",
    "topic": "Topic knowledge",
    "entity": "Entity knowledge",
    "conversation_arc": "Conversation so far",
    "retrieval": "Retrieved knowledge",
}
ALIASES = {"knowledge": "retrieval", "memory": "preferences", "entities": "entity", "topics": "topic", "arc": "conversation_arc"}
# Framing of one system message (role + per-message overhead) plus the heading line.
_MESSAGE_OVERHEAD = 8


def _normalise(layers: Mapping[str, Any]) -> dict[str, list[str]]:
    if not isinstance(layers, Mapping):
        raise InvalidTypeError(f"layers: expected a dict of layer name -> text or list of texts, got {type(layers).__name__}")
    out: dict[str, list[str]] = {}
    for key, value in layers.items():
        name = ALIASES.get(key, key)
        if name not in LAYER_ORDER:
            raise InvalidInputError(f"layers: unknown layer {key!r}; use {', '.join([*LAYER_ORDER, *ALIASES])}")
        texts = [value] if isinstance(value, str) else value
        if not isinstance(texts, Sequence) or not all(isinstance(t, str) for t in texts):
            raise InvalidTypeError(f"layers[{key!r}]: expected str or a list of str")
        out.setdefault(name, []).extend(t for t in texts if t)
    return out


def layer_messages(
    layers: Mapping[str, Any],
    budget: int,
    tokenizer: Tokenizer,
    *,
    message_count: int,
    conversation_tokens: int,
    user_message_tokens: int,
) -> tuple[list[dict[str, Any]], BudgetAllocation]:
    """One pinned system message per non-empty layer, each cut to its
    allocation, and the allocation itself (for the report)."""
    content = _normalise(layers)
    alloc = plan_layers(
        budget,
        message_count=message_count,
        conversation_tokens=conversation_tokens,
        user_message_tokens=user_message_tokens,
        topic_count=len(content.get("topic", [])),
        entity_count=len(content.get("entity", [])),
        topic_bundle_tokens=sum(int(tokenizer.count(t)) for t in content.get("retrieval", [])),
    )
    messages = []
    for name, heading in LAYER_ORDER.items():
        texts = content.get(name)
        room = alloc[name] - _MESSAGE_OVERHEAD
        if not texts or room <= 0:
            continue
        full = "\n\n".join(texts)
        body = tokenizer.truncate(full, room)
        if name == "conversation_arc" and body != full:
            body = body[: body.rindex("\n")].rstrip() if "\n" in body else ""  # a list of lines: no half entry
        if body:
            messages.append({"role": "system", "content": f"## {heading}\n{body}", "id": f"layer:{name}", "pinned": True})
    return messages, alloc
