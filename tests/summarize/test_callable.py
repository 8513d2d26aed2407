"""CallableSummarizer: sync and async functions, LLM-client responses, the
prompt template, concurrency, and the token target kept exactly."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace
from typing import Any

import ctxfold
import numpy as np
import pytest
from ctxfold import CallableSummarizer, InvalidInputError, InvalidTypeError, Summarizer, get_tokenizer
from ctxfold.summarize.callable import DEFAULT_PROMPT_TEMPLATE
from ctxfold.summarize.protocol import BaseSummarizer, fit_to_tokens
from hypothesis import given, settings
from hypothesis import strategies as st

O200K = get_tokenizer()
LONG = " ".join(f"Sentence number {i} mentions Alice, 3 apples and 2024-05-0{i % 9 + 1}." for i in range(40))


def echo_words(prompt: str) -> str:
    """A fake LLM: returns the text part of the prompt."""
    return prompt.split("Text:\n", 1)[1]


class Recorder:
    def __init__(self, answer: Any = "A short summary.") -> None:
        self.prompts: list[str] = []
        self.answer = answer

    def __call__(self, prompt: str) -> Any:
        self.prompts.append(prompt)
        return self.answer


def test_sync_function_and_exact_target() -> None:
    fn = Recorder(answer=LONG)
    s = CallableSummarizer(fn)
    (out,) = s.summarize([LONG], budget=30)
    assert O200K.count(out) <= 30 and out and LONG.startswith(out)
    assert out.endswith(".")  # cut after the last whole sentence that fits
    assert len(fn.prompts) == 1 and LONG in fn.prompts[0] and "22 words" in fn.prompts[0]


def test_counted_with_the_tokenizer_given() -> None:
    cl100k = get_tokenizer(encoding="cl100k_base")
    s = CallableSummarizer(echo_words, tokenizer=cl100k)
    for target in (1, 7, 50):
        (out,) = s.summarize([LONG], target)
        assert cl100k.count(out) <= target


def test_texts_that_fit_skip_the_call() -> None:
    fn = Recorder()
    s = CallableSummarizer(fn)
    assert s.summarize(["Already short."], 50) == ["Already short."]
    assert fn.prompts == []
    always = CallableSummarizer(fn, always_summarize=True)
    assert always.summarize(["Already short."], 50) == ["A short summary."]
    assert len(fn.prompts) == 1


def test_per_text_targets_and_order() -> None:
    s = CallableSummarizer(echo_words)
    texts = [LONG, "tiny", LONG[:400]]
    out = s.summarize(texts, np.array([5, 10, 20]))
    assert out[1] == "tiny"
    assert O200K.count(out[0]) <= 5 and O200K.count(out[2]) <= 20
    assert out[0] == fit_to_tokens(LONG, 5, O200K)


def test_async_function_sync_and_async_calls() -> None:
    async def fn(prompt: str) -> str:
        await asyncio.sleep(0)
        return "async " + echo_words(prompt)

    s = CallableSummarizer(fn)
    (out,) = s.summarize([LONG], 12)
    assert out.startswith("async Sentence") and O200K.count(out) <= 12
    assert asyncio.run(s.asummarize([LONG], 12)) == [out]


def test_sync_summarize_inside_a_running_loop() -> None:
    async def fn(prompt: str) -> str:
        return "from a coroutine"

    async def main() -> list[str]:
        return CallableSummarizer(fn, always_summarize=True).summarize(["text"], 10)

    assert asyncio.run(main()) == ["from a coroutine"]


def test_sync_function_returning_an_awaitable() -> None:
    async def answer() -> str:
        return "awaited"

    s = CallableSummarizer(lambda prompt: answer(), always_summarize=True)
    assert s.summarize(["text"], 10) == ["awaited"]
    assert asyncio.run(s.asummarize(["text"], 10)) == ["awaited"]


def test_async_callable_object() -> None:
    class Client:
        async def __call__(self, prompt: str) -> str:
            return "object"

    assert CallableSummarizer(Client(), always_summarize=True).summarize(["t"], 5) == ["object"]


def test_asummarize_with_a_sync_function_uses_threads() -> None:
    seen: set[int] = set()

    def fn(prompt: str) -> str:
        seen.add(threading.get_ident())
        return "done"

    s = CallableSummarizer(fn, always_summarize=True)
    assert asyncio.run(s.asummarize(["a", "b"], 5)) == ["done", "done"]
    assert threading.get_ident() not in seen


@pytest.mark.parametrize(
    "response",
    [
        SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content="openai"))]),
        {"choices": [{"message": {"content": "openai"}}]},
        SimpleNamespace(choices=[SimpleNamespace(text="openai")]),
        SimpleNamespace(content=[SimpleNamespace(type="text", text="open"), SimpleNamespace(type="text", text="ai")]),
        {"content": "openai"},
        SimpleNamespace(text="openai"),
    ],
)
def test_llm_client_responses_are_read(response: Any) -> None:
    s = CallableSummarizer(lambda prompt: response, always_summarize=True)
    assert s.summarize(["some text"], 10) == ["openai"]


@pytest.mark.parametrize("bad", [None, 42, {"unexpected": "shape"}, SimpleNamespace(choices=[])])
def test_unreadable_response_is_a_type_error(bad: Any) -> None:
    s = CallableSummarizer(lambda prompt: bad, always_summarize=True)
    with pytest.raises(InvalidTypeError, match=r"fn: returned .* for texts\[0\]"):
        s.summarize(["some text"], 10)


def test_errors_from_fn_propagate_unchanged() -> None:
    def fn(prompt: str) -> str:
        raise ConnectionError("rate limited")

    with pytest.raises(ConnectionError, match="rate limited"):
        CallableSummarizer(fn, always_summarize=True).summarize(["x"], 5)


def test_prompt_template_is_an_attribute() -> None:
    s = CallableSummarizer(Recorder())
    assert s.prompt_template == DEFAULT_PROMPT_TEMPLATE
    assert "Focus on what matters for: Where is Alice?" in s.prompt(LONG, 100, query="Where is Alice?")
    assert "Focus" not in s.prompt(LONG, 100)
    s.prompt_template = "Q={query} T={budget} W={target_words}\n{text}"
    assert s.prompt("body", 40, query="why") == "Q=why T=40 W=30\nbody"
    fn = Recorder()
    s2 = CallableSummarizer(fn, prompt_template="Shorten: {text}", always_summarize=True)
    s2.summarize(["hello"], 3)
    assert fn.prompts == ["Shorten: hello"]


@pytest.mark.parametrize(
    ("template", "match"),
    [
        ("no text field", r"must contain \{text\}"),
        ("{text} {bogus}", "unknown field"),
        ("{text} {", "not a valid format string"),
        (3, "expected str"),
    ],
)
def test_bad_prompt_templates(template: Any, match: str) -> None:
    with pytest.raises((InvalidInputError, InvalidTypeError), match=match):
        CallableSummarizer(Recorder(), prompt_template=template)
    s = CallableSummarizer(Recorder())
    with pytest.raises((InvalidInputError, InvalidTypeError), match=match):
        s.prompt_template = template


def test_concurrency_is_bounded() -> None:
    active = peak = 0
    lock = threading.Lock()

    def fn(prompt: str) -> str:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.02)
        with lock:
            active -= 1
        return "ok"

    s = CallableSummarizer(fn, max_concurrency=2, always_summarize=True)
    assert s.summarize([f"t{i}" for i in range(6)], 5) == ["ok"] * 6
    assert peak == 2


def test_async_concurrency_is_bounded() -> None:
    active = peak = 0

    async def fn(prompt: str) -> str:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.01)
        active -= 1
        return prompt.rsplit("\n", 1)[-1]

    s = CallableSummarizer(fn, max_concurrency=3, always_summarize=True)
    texts = [f"t{i}" for i in range(8)]
    assert asyncio.run(s.asummarize(texts, 5)) == texts  # order kept
    assert peak == 3


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"fn": "not callable"}, InvalidTypeError, "fn"),
        ({"fn": echo_words, "max_concurrency": 0}, InvalidInputError, "max_concurrency"),
        ({"fn": echo_words, "max_concurrency": 1.5}, InvalidTypeError, "max_concurrency"),
        ({"fn": echo_words, "tokenizer": "cl100k_base"}, InvalidTypeError, "tokenizer"),
    ],
)
def test_bad_constructor_arguments(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        CallableSummarizer(**kwargs)


@pytest.mark.parametrize(
    ("texts", "target", "error", "match"),
    [
        ([""], 5, InvalidInputError, r"texts\[0\]: empty"),
        (["a"], 0, InvalidInputError, "budget"),
        (["a"], -1, InvalidInputError, "budget"),
        (["a", "b"], [1], InvalidInputError, "1 budgets for 2 texts"),
        (["a"], 1.0, InvalidTypeError, "budget"),
        ("a", 5, InvalidTypeError, "wrap it in a list"),
        (None, 5, InvalidTypeError, "texts"),
    ],
)
def test_bad_inputs(texts: Any, target: Any, error: type[Exception], match: str) -> None:
    s = CallableSummarizer(echo_words)
    with pytest.raises(error, match=match):
        s.summarize(texts, target)
    with pytest.raises(error, match=match):
        asyncio.run(s.asummarize(texts, target))


def test_empty_list_and_protocol() -> None:
    s = CallableSummarizer(echo_words)
    assert s.summarize([], 10) == []
    assert isinstance(s, Summarizer) and isinstance(s, BaseSummarizer)
    assert {"Summarizer", "CallableSummarizer", "BaseSummarizer"} <= set(ctxfold.__all__)


@settings(max_examples=60, deadline=None)
@given(answer=st.text(min_size=1, max_size=400), target=st.integers(min_value=1, max_value=60))
def test_output_never_exceeds_the_target(answer: str, target: int) -> None:
    s = CallableSummarizer(lambda prompt: answer, always_summarize=True)
    (out,) = s.summarize(["some text"], target)
    assert O200K.count(out) <= target
    assert answer.strip().startswith(out)


def test_fit_to_tokens_prefers_sentence_ends() -> None:
    text = "First sentence is here. Second one is a bit longer than the first one was."
    # Cut after the last sentence end when that keeps at least half of the cut...
    assert fit_to_tokens(text, 9, O200K) == "First sentence is here."
    # ...and on a token boundary when the sentence would lose more.
    assert fit_to_tokens(text, 12, O200K) == "First sentence is here. Second one is a bit longer than"
    assert fit_to_tokens("  fits  ", 5, O200K) == "fits"
    # No usable sentence end: a plain token-boundary cut.
    words = " ".join(["word"] * 50)
    assert fit_to_tokens(words, 10, O200K) == O200K.truncate(words, 10).rstrip()
