"""Anthropic-style messages read as OpenAI-style ones (`from_anthropic`,
`split_anthropic`, `is_anthropic`); the other direction, `to_anthropic`, is
checked against the SDK's types in test_sdk_types."""

from __future__ import annotations

import json

from ctxfold.adapters import from_anthropic, is_anthropic, split_anthropic

NATIVE = [
    {"role": "user", "content": "Find flights to Lisbon", "id": "u1", "importance": 0.9},
    {"role": "assistant", "id": "a1", "content": [
        {"type": "text", "text": "Searching."},
        {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"to": "LIS", "max": 3}},
        {"type": "tool_use", "id": "toolu_2", "name": "hotels", "input": {}},
    ]},
    {"role": "user", "id": "u2", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "LH123 09:40"},
                                                                      {"type": "image", "source": {}}]},
        {"type": "tool_result", "tool_use_id": "toolu_2", "content": "Hotel Sol"},
        {"type": "text", "text": "Which is cheapest?"},
    ]},
]


def test_tool_blocks_become_calls_and_tool_messages() -> None:
    out = from_anthropic(NATIVE)
    assert out[0] == NATIVE[0] and out[0] is not NATIVE[0]  # plain messages are copied as they are
    assert out[1] == {"role": "assistant", "content": "Searching.", "id": "a1", "tool_calls": [
        {"id": "toolu_1", "type": "function", "function": {"name": "search", "arguments": json.dumps({"to": "LIS", "max": 3})}},
        {"id": "toolu_2", "type": "function", "function": {"name": "hotels", "arguments": "{}"}},
    ]}
    # One user turn with two results and a question: two tool messages, then the question, ids numbered.
    assert out[2:] == [
        {"role": "tool", "tool_call_id": "toolu_1", "content": "LH123 09:40", "id": "u2"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "Hotel Sol", "id": "u2.1"},
        {"role": "user", "content": "Which is cheapest?", "id": "u2.2"},
    ]


def test_each_output_message_knows_the_callers_message_it_came_from() -> None:
    out, sources = split_anthropic(NATIVE)
    assert len(out) == len(sources) == 5
    assert [id(s) for s in sources] == [id(NATIVE[0]), id(NATIVE[1]), id(NATIVE[2]), id(NATIVE[2]), id(NATIVE[2])]


def test_a_call_without_text_has_no_content_and_input_is_not_changed() -> None:
    before = json.dumps(NATIVE, sort_keys=True)
    (call,) = from_anthropic([{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f"}]}])
    assert call["content"] is None and call["tool_calls"][0]["function"]["arguments"] == "{}"
    from_anthropic(NATIVE)
    assert json.dumps(NATIVE, sort_keys=True) == before


def test_is_anthropic_looks_for_tool_blocks_only() -> None:
    assert is_anthropic(NATIVE)
    assert not is_anthropic([{"role": "user", "content": [{"type": "text", "text": "hi"}]}])
    assert not is_anthropic([{"role": "user", "content": "tool_use"}, "not a message"])
