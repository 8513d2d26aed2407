"""compress: topic chunks summarised to the target ratio, multi-level down to
a token limit, metadata that traces every summary to its source span and
restores it, the progress bar, and clear errors for bad input."""

from __future__ import annotations

import io
import json
import math
import random

import pytest
from ctxfold import (
    CallableSummarizer,
    CompressionResult,
    CtxFoldError,
    ExtractiveSummarizer,
    InvalidInputError,
    InvalidTypeError,
    compress,
    get_tokenizer,
)
from ctxfold.summarize.extractive import TermVectorEmbedder, is_source_wording
from ctxfold.progress import MIN_ITEMS, ProgressBar, progress_wanted
from hypothesis import given, settings
from hypothesis import strategies as st

O200K = get_tokenizer()

TOPICS = {
    "travel": (
        ["Lisbon", "Porto", "Maria", "TAP"],
        "flight hotel train tickets museum beach itinerary luggage passport airport booking tram".split(),
    ),
    "car": (
        ["Toyota", "Corolla", "Midas", "Jake"],
        "brakes engine oil tires mechanic mileage transmission battery warranty garage repair inspection".split(),
    ),
    "party": (
        ["Emma", "Oliver", "Costco", "Saturday"],
        "birthday cake balloons guests invitations games music decorations snacks venue gifts candles".split(),
    ),
    "code": (
        ["Python", "pandas", "GitHub", "Linux"],
        "function variable loop dataframe error install library script debug import module test".split(),
    ),
}


def conversation(turns_per_topic: int = 10, seed: int = 7) -> str:
    """A chat that moves through four topics, with names and numbers."""
    rng = random.Random(seed)
    lines = []
    for names, words in TOPICS.values():
        for t in range(turns_per_topic):
            role = "user" if t % 2 == 0 else "assistant"
            sentences = []
            for _ in range(rng.randint(1, 4) if role == "user" else rng.randint(3, 7)):
                body = rng.sample(words, rng.randint(5, 9))
                body.insert(rng.randrange(len(body)), rng.choice(names))
                if rng.random() < 0.4:
                    body.append(str(rng.randint(2, 2030)))
                if rng.random() < 0.3:
                    body.insert(0, rng.choice(["Actually,", "I think", "Honestly,"]))
                sentence = " ".join(body)
                sentences.append(sentence[0].upper() + sentence[1:] + rng.choice([".", ".", "!", "?"]))
            lines.append(f"{role}: " + " ".join(sentences))
    return "\n".join(lines)


TEXT = conversation()
FAST = dict(embedder=TermVectorEmbedder(), topic_tokens=600)


def check_traceable(result: CompressionResult, text: str) -> None:
    """Every chunk's summary comes from its own source span, in order, and the
    spans tile the text's non-blank content."""
    assert result.source == text and result.restore() == text
    previous_end = 0
    for i, chunk in enumerate(result.chunks):
        assert chunk.index == i
        assert chunk.spans and chunk.start == chunk.spans[0][0] and chunk.end == chunk.spans[-1][1]
        source = result.restore(i)
        assert source == "\n".join(text[s:e] for s, e in chunk.spans)
        assert is_source_wording(chunk.summary, source), (chunk.summary, source)
        for s, e in chunk.sentence_spans:
            assert any(a <= s and e <= b for a, b in chunk.spans)
        if result.segmentation == "segment":
            assert chunk.start >= previous_end and not text[previous_end : chunk.start].strip()  # nothing of the source is lost between chunks
            previous_end = chunk.end
    assert not text[previous_end:].strip() or result.segmentation != "segment"


def test_compress_to_the_ratio_with_traceable_chunks() -> None:
    result = compress(TEXT, 0.15, **FAST)
    n = O200K.count(TEXT)
    assert result.source_tokens == n
    assert result.budget == math.floor(n * 0.15)
    assert result.tokens == O200K.count(result.text) <= result.budget
    assert result.ratio == pytest.approx(result.tokens / n) and result.compression_ratio > 5
    assert result.compression_type == "topic" and result.levels == 1
    assert len(result.chunks) >= 3
    assert all(c.method in ("ExtractiveSummarizer", "verbatim", "dropped") for c in result.chunks)
    assert result.text == "\n\n".join(c.summary for c in result.chunks if c.summary)
    check_traceable(result, TEXT)


def test_default_embedder_and_names_survive() -> None:
    result = compress(TEXT, 0.2, topic_tokens=600)
    assert result.tokens <= result.budget
    for names, _ in TOPICS.values():
        assert any(name in result.text for name in names)  # every topic keeps some of its names


def test_restore_and_expand() -> None:
    result = compress(TEXT, 0.15, **FAST)
    for c in result.chunks:
        assert TEXT[c.start : c.end] == result.restore(c.index)
        expanded = result.expand(c.index)
        assert result.restore(c.index) in expanded
    assert result.expand(range(len(result.chunks))).split() == TEXT.split()
    offset = result.text.index(result.chunks[1].summary[:20])
    assert result.chunk_at(offset).index == 1
    data = result.to_dict()
    assert "source" not in data and data["chunks"][0]["spans"]
    json.dumps(data)
    with pytest.raises(InvalidInputError, match="index"):
        result.restore(len(result.chunks))
    with pytest.raises(InvalidInputError, match="offset"):
        result.chunk_at(-1)


@given(limit=st.integers(5, 400))
@settings(max_examples=12, deadline=None)
def test_multi_level_fits_any_token_limit(limit: int) -> None:
    result = compress(TEXT, 0.3, budget=limit, **FAST)
    assert result.budget == min(limit, math.floor(O200K.count(TEXT) * 0.3))
    assert result.tokens == (O200K.count(result.text) if result.text else 0) <= result.budget
    assert 1 <= result.levels <= 3
    assert result.compression_type == "+".join(("topic", "extractive", "key_points")[: result.levels])
    check_traceable(result, TEXT)


def test_levels_recurse_when_the_limit_is_tight() -> None:
    loose = compress(TEXT, 0.3, **FAST)
    tight = compress(TEXT, 0.3, budget=60, **FAST)
    assert loose.levels == 1 and tight.levels >= 2
    assert max(c.level for c in tight.chunks) >= 2
    assert tight.tokens <= 60 < loose.tokens


@given(ratio=st.floats(0.02, 1.0), seed=st.integers(0, 5), per_topic=st.integers(1, 8))
@settings(max_examples=15, deadline=None)
def test_always_within_target(ratio: float, seed: int, per_topic: int) -> None:
    text = conversation(per_topic, seed)
    result = compress(text, ratio, **FAST)
    assert result.tokens <= max(1, math.floor(O200K.count(text) * ratio))
    check_traceable(result, text)


def test_text_that_fits_is_kept() -> None:
    result = compress("user: hi there", 1.0)
    assert result.text == "user: hi there" and result.compression_type == "none" and result.levels == 0
    assert result.chunks[0].method == "verbatim"


def test_spectral_segmentation_groups_topics() -> None:
    result = compress(TEXT, 0.15, segmentation="spectral", **FAST)
    assert result.segmentation == "spectral"
    assert result.tokens <= result.budget
    check_traceable(result, TEXT)
    starts = [c.start for c in result.chunks]
    assert starts == sorted(starts)


def test_any_summarizer_and_workers() -> None:
    seen: list[str] = []

    def first_words(prompt: str) -> str:
        text = prompt.split("Text:\n", 1)[1]
        seen.append(text)
        return text

    result = compress(TEXT, 0.15, summarizer=CallableSummarizer(first_words, max_concurrency=1), **FAST)
    assert seen and result.tokens <= result.budget
    assert {c.method for c in result.chunks} <= {"CallableSummarizer", "verbatim", "dropped"}
    check_traceable(result, TEXT)
    one = compress(TEXT, 0.15, workers=1, **FAST)
    two = compress(TEXT, 0.15, workers=2, **FAST)
    assert one.text == two.text


def test_query_steers_the_summary() -> None:
    s = ExtractiveSummarizer(embedder=TermVectorEmbedder(), query_weight=5.0)
    result = compress(TEXT, 0.1, summarizer=s, query="birthday cake for Emma", **FAST)
    assert "Emma" in result.text or "cake" in result.text


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        (dict(text=""), InvalidInputError, "empty"),
        (dict(text="  \n"), InvalidInputError, "empty"),
        (dict(text=b"bytes"), InvalidTypeError, "text"),
        (dict(text=None), InvalidTypeError, "text"),
        (dict(target_ratio=0), InvalidInputError, "target_ratio"),
        (dict(target_ratio=-0.1), InvalidInputError, "target_ratio"),
        (dict(target_ratio=1.5), InvalidInputError, "target_ratio"),
        (dict(target_ratio=float("nan")), InvalidInputError, "target_ratio"),
        (dict(target_ratio="0.1"), InvalidTypeError, "target_ratio"),
        (dict(budget=0), InvalidInputError, "budget"),
        (dict(budget=-3), InvalidInputError, "budget"),
        (dict(budget=2.5), InvalidTypeError, "budget"),
        (dict(topic_tokens=0), InvalidInputError, "topic_tokens"),
        (dict(block_tokens=True), InvalidTypeError, "block_tokens"),
        (dict(workers=0), InvalidInputError, "workers"),
        (dict(segmentation="kmeans"), InvalidInputError, "segmentation"),
        (dict(query=5), InvalidTypeError, "query"),
        (dict(summarizer="bart"), InvalidTypeError, "summarizer"),
        (dict(tokenizer="o200k_base"), InvalidTypeError, "tokenizer"),
    ],
)
def test_bad_input_raises_clear_errors(kwargs: dict, error: type, words: str) -> None:
    args = {"text": TEXT, **kwargs}
    text = args.pop("text")
    with pytest.raises(error, match=words) as info:
        compress(text, **args)
    assert isinstance(info.value, CtxFoldError)


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTXFOLD_PROGRESS", raising=False)
    term = FakeTerminal()
    with ProgressBar(8, "compress", stream=term, delay=0) as bar:
        for _ in range(8):
            bar.update()
    out = term.getvalue()
    assert "compress [" in out and "8/8 chunks" in out and out.endswith("\n") and "\r" in out
    pipe = io.StringIO()
    with ProgressBar(8, stream=pipe, delay=0) as bar:
        bar.update(8)
    assert pipe.getvalue() == ""
    quick = FakeTerminal()
    with ProgressBar(8, stream=quick, delay=60) as bar:  # a call that ends before the delay draws nothing
        bar.update(8)
    assert quick.getvalue() == ""
    assert not progress_wanted(False, 100, term)  # off by the flag
    assert not progress_wanted(True, MIN_ITEMS - 1, term)  # too few chunks to bother
    monkeypatch.setenv("CTXFOLD_PROGRESS", "0")
    assert not progress_wanted(True, 100, term)


def test_compress_draws_progress_on_stderr_of_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTXFOLD_PROGRESS", raising=False)
    monkeypatch.setattr("ctxfold.progress.DEFAULT_DELAY", 0.0)
    term = FakeTerminal()
    monkeypatch.setattr("sys.stderr", term)
    compress(TEXT, 0.15, embedder=TermVectorEmbedder(), topic_tokens=300, progress=False)
    assert term.getvalue() == ""
    compress(TEXT, 0.15, embedder=TermVectorEmbedder(), topic_tokens=300)
    assert "compress (topic)" in term.getvalue()


def test_module_and_function_both_work() -> None:
    import importlib

    import ctxfold

    # the module itself: `import ctxfold.summarize.compress as m` would give the
    # package's attribute, the function, once `ctxfold.summarize` has exported it
    module = importlib.import_module("ctxfold.summarize.compress")

    assert callable(ctxfold.summarize.compress)
    assert module.CompressionResult is CompressionResult
    assert module("user: hi there", 1.0).text == "user: hi there"
