"""Renamed token-limit arguments: `budget` everywhere, the old keyword still
accepted for one release with a `DeprecationWarning` that names the new one."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable
from typing import Any

import pytest

import ctxfold
from ctxfold import InvalidTypeError, Tokenizer
from ctxfold._renamed import renamed_arguments
from ctxfold.summarize import CallableSummarizer, ExtractiveSummarizer, HeadTailSummarizer, compress
from ctxfold.summarize.extractive import split_sentences
from ctxfold.summarize.head_tail import head_tail
from ctxfold.summarize.protocol import fit_to_tokens

TEXT = "The meeting moved to Thursday at 10:00 in room 4. " * 20
TOK = Tokenizer.from_encoding("o200k_base")
LAYERS = [(0, 50, 100, 90, 0.5), (10, 20, 30, 50, 0.0)]


def _deprecated(call: Callable[[], Any], old: str, new: str) -> Any:
    """The call's result; it must warn once, naming both names, from this file."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning)]
    assert len(deprecations) == 1, [str(w.message) for w in caught]
    message = str(deprecations[0].message)
    assert f"{old}=" in message and f"is now {new}=" in message, message
    assert deprecations[0].filename == __file__  # points at the caller's line
    return result


async def _awaited(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Awaited from a coroutine of this file, as a caller would."""
    return await method(*args, **kwargs)


# (name, old-name call, new-name call, old keyword) for every renamed keyword.
RENAMED_CALLS: list[tuple[str, Callable[[], Any], Callable[[], Any], str]] = [
    ("count_until", lambda: ctxfold.count_until(TEXT, limit=50), lambda: ctxfold.count_until(TEXT, budget=50), "limit"),
    ("truncate", lambda: ctxfold.truncate(TEXT, max_tokens=9), lambda: ctxfold.truncate(TEXT, budget=9), "max_tokens"),
    ("truncate side", lambda: ctxfold.truncate(TEXT, max_tokens=9, side="start"),
     lambda: ctxfold.truncate(TEXT, budget=9, side="start"), "max_tokens"),
    ("Tokenizer.count_until", lambda: TOK.count_until(TEXT, limit=2000), lambda: TOK.count_until(TEXT, budget=2000), "limit"),
    ("Tokenizer.truncate", lambda: TOK.truncate(TEXT, max_tokens=7), lambda: TOK.truncate(TEXT, budget=7), "max_tokens"),
    ("negotiate_budget", lambda: ctxfold.negotiate_budget(total=120, layers=LAYERS).to_dict(),
     lambda: ctxfold.negotiate_budget(budget=120, layers=LAYERS).to_dict(), "total"),
    ("plan_layers", lambda: ctxfold.plan_layers(total=4000, message_count=3).to_dict(),
     lambda: ctxfold.plan_layers(budget=4000, message_count=3).to_dict(), "total"),
    ("summarize", lambda: HeadTailSummarizer().summarize([TEXT], target_tokens=30),
     lambda: HeadTailSummarizer().summarize([TEXT], budget=30), "target_tokens"),
    ("asummarize", lambda: asyncio.run(_awaited(HeadTailSummarizer().asummarize, [TEXT], target_tokens=30)),
     lambda: asyncio.run(_awaited(HeadTailSummarizer().asummarize, [TEXT], budget=30)), "target_tokens"),
    ("extract", lambda: ExtractiveSummarizer().extract(TEXT, target_tokens=25).text,
     lambda: ExtractiveSummarizer().extract(TEXT, budget=25).text, "target_tokens"),
    ("select", lambda: ExtractiveSummarizer().select(split_sentences(TEXT), target=25).text,
     lambda: ExtractiveSummarizer().select(split_sentences(TEXT), budget=25).text, "target"),
    ("prompt", lambda: CallableSummarizer(str).prompt("x", target_tokens=40),
     lambda: CallableSummarizer(str).prompt("x", budget=40), "target_tokens"),
    ("compress", lambda: compress(TEXT, 0.5, max_tokens=40, progress=False).text,
     lambda: compress(TEXT, 0.5, budget=40, progress=False).text, "max_tokens"),
    ("head_tail", lambda: head_tail(TEXT, max_tokens=20, tokenizer=TOK), lambda: head_tail(TEXT, budget=20, tokenizer=TOK),
     "max_tokens"),
    ("fit_to_tokens", lambda: fit_to_tokens(TEXT, max_tokens=20, tokenizer=TOK),
     lambda: fit_to_tokens(TEXT, budget=20, tokenizer=TOK), "max_tokens"),
]


@pytest.mark.parametrize(("name", "old_call", "new_call", "old"), RENAMED_CALLS, ids=[c[0] for c in RENAMED_CALLS])
def test_the_old_keyword_warns_and_gives_the_same_result(
    name: str, old_call: Callable[[], Any], new_call: Callable[[], Any], old: str
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name never warns
        expected = new_call()
    assert _deprecated(old_call, old, "budget") == expected


@pytest.mark.parametrize(
    "call",
    [
        lambda: ctxfold.count_until(TEXT, 5, limit=5),
        lambda: ctxfold.truncate(TEXT, budget=5, max_tokens=5),
        lambda: TOK.count_until(TEXT, budget=5, limit=5),
        lambda: TOK.truncate(TEXT, 5, max_tokens=5),
        lambda: ctxfold.negotiate_budget(100, LAYERS, total=100),
        lambda: ctxfold.plan_layers(100, total=100),
        lambda: HeadTailSummarizer().summarize([TEXT], budget=5, target_tokens=5),
        lambda: compress(TEXT, budget=50, max_tokens=50),
    ],
)
def test_both_names_at_once_is_an_error_naming_them(call: Callable[[], Any]) -> None:
    with pytest.raises(InvalidTypeError, match=r"got both budget= and its old name \w+=; pass only budget="):
        call()


@pytest.mark.parametrize(
    "call",
    [
        lambda: ctxfold.count_until(TEXT),  # type: ignore[call-arg]
        lambda: ctxfold.truncate(TEXT),  # type: ignore[call-arg]
        lambda: TOK.count_until(TEXT),  # type: ignore[call-arg]
        lambda: ctxfold.plan_layers(),  # type: ignore[call-arg]
    ],
)
def test_a_missing_budget_is_named(call: Callable[[], Any]) -> None:
    with pytest.raises(InvalidTypeError, match="missing the required argument budget"):
        call()


def test_negotiate_budget_without_layers_is_named() -> None:
    with pytest.raises(InvalidTypeError, match="missing the required argument layers"):
        ctxfold.negotiate_budget(100)  # type: ignore[call-arg]


def test_budget_allocation_total_is_the_deprecated_budget() -> None:
    alloc = ctxfold.negotiate_budget(120, LAYERS)
    assert alloc.budget == 120
    with pytest.warns(DeprecationWarning, match=r"BudgetAllocation.total is now BudgetAllocation.budget"):
        assert alloc.total == 120
    assert "budget=120" in repr(alloc)


def test_compression_result_target_tokens_is_the_deprecated_budget() -> None:
    result = compress(TEXT, 0.5, budget=40, progress=False)
    with pytest.warns(DeprecationWarning, match=r"CompressionResult.target_tokens is now CompressionResult.budget"):
        assert result.target_tokens == result.budget <= 40


def test_the_old_prompt_field_still_fills_and_warns() -> None:
    s = CallableSummarizer(str)
    with pytest.warns(DeprecationWarning, match=r"\{target_tokens\} is now \{budget\}"):
        s.prompt_template = "{target_tokens}|{budget}|{text}"
    assert s.prompt("x", 40) == "40|40|x"


def test_the_helper_keeps_signature_and_async_nature() -> None:
    @renamed_arguments(size="budget")
    def sync(text: str, budget: int) -> str:
        """Doc."""
        return text[:budget]

    @renamed_arguments(size="budget")
    async def coro(text: str, budget: int) -> str:
        return text[:budget]

    assert sync.__doc__ == "Doc." and sync.__name__ == "sync"
    assert asyncio.iscoroutinefunction(coro) and not asyncio.iscoroutinefunction(sync)
    assert sync("abcdef", 2) == "ab"
    assert _deprecated(lambda: sync("abcdef", size=3), "size", "budget") == "abc"
    assert _deprecated(lambda: asyncio.run(_awaited(coro, "abcdef", size=4)), "size", "budget") == "abcd"
