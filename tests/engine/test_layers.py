"""Prompt layers on their own: one pinned system message per non-empty layer,
in prompt order, each within its allocation from `plan_layers`."""

from __future__ import annotations

import pytest

from ctxfold import InvalidInputError, InvalidTypeError, Tokenizer, plan_layers
from ctxfold.engine.layers import LAYER_ORDER, layer_messages

TOK = Tokenizer.from_encoding("cl100k_base")
SITUATION = {"message_count": 10, "conversation_tokens": 2000, "user_message_tokens": 50}


def test_one_pinned_message_per_layer_in_prompt_order() -> None:
    layers = {
        "knowledge": ["Flights to Lisbon leave at 09:10.", "The hotel is near the river."],
        "identity": "The user is Ann, a travel agent.",
        "arc": "Current focus: booking a trip",
        "preferences": "",
    }
    messages, alloc = layer_messages(layers, 8000, TOK, **SITUATION)
    assert [m["id"] for m in messages] == ["layer:identity", "layer:conversation_arc", "layer:retrieval"]
    assert all(m["role"] == "system" and m["pinned"] for m in messages)
    assert messages[0]["content"] == "## Identity\nThe user is Ann, a travel agent."
    # A list is joined by blank lines under the heading of its layer.
    assert messages[2]["content"] == "## Retrieved knowledge\nFlights to Lisbon leave at 09:10.\n\nThe hotel is near the river."
    assert alloc.budget == 8000 and alloc.names is not None and "retrieval" in alloc.names


def test_the_allocation_is_plan_layers_for_the_situation() -> None:
    layers = {"topic": ["a", "b"], "entity": "Ann", "knowledge": "x " * 40}
    _, alloc = layer_messages(layers, 6000, TOK, **SITUATION)
    expected = plan_layers(
        6000, topic_count=2, entity_count=1, topic_bundle_tokens=TOK.count("x " * 40), **SITUATION
    )
    assert alloc.to_dict() == expected.to_dict()


def test_a_long_layer_is_cut_to_its_allocation() -> None:
    long = " ".join(f"fact {i} about the client." for i in range(2000))
    messages, alloc = layer_messages({"knowledge": long}, 3000, TOK, **SITUATION)
    (message,) = messages
    assert TOK.count(message["content"]) <= alloc["retrieval"]
    assert long.startswith(message["content"].split("\n", 1)[1])


def test_the_arc_is_cut_in_whole_lines() -> None:
    lines = [f"- decision {i}: take the 09:10 flight and the river hotel" for i in range(400)]
    messages, _ = layer_messages({"arc": "\n".join(lines)}, 4000, TOK, **SITUATION)
    body = messages[0]["content"].split("\n", 1)[1]
    assert 0 < len(body.splitlines()) < len(lines)
    assert all(line in lines for line in body.splitlines())


def test_nothing_for_an_empty_mapping() -> None:
    messages, alloc = layer_messages({}, 5000, TOK, **SITUATION)
    assert messages == [] and len(alloc) == 8


@pytest.mark.parametrize(
    ("layers", "error", "match"),
    [
        ({"gossip": "x"}, InvalidInputError, "unknown layer 'gossip'"),
        ({"identity": 3}, InvalidTypeError, r"layers\['identity'\]: expected str or a list of str"),
        ({"topic": ["a", None]}, InvalidTypeError, r"layers\['topic'\]"),
        (["identity"], InvalidTypeError, "layers: expected a dict"),
    ],
)
def test_bad_layers_are_named(layers: object, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        layer_messages(layers, 5000, TOK, **SITUATION)  # type: ignore[arg-type]


def test_every_layer_has_a_heading() -> None:
    assert list(LAYER_ORDER) == ["identity", "preferences", "topic", "entity", "conversation_arc", "retrieval"]
