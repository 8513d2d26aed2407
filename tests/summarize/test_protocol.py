"""What every summarizer shares (`BaseSummarizer`): argument checks, the
fits-already shortcut, the final cut on a sentence end, and model answers
that do not match the request."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from ctxfold import InvalidInputError, InvalidTypeError, ModelError, Tokenizer
from ctxfold.summarize.protocol import BaseSummarizer, Summarizer, check_targets, check_texts, fit_to_tokens

TOK = Tokenizer.from_encoding("o200k_base")
LONG = "The release moved to Friday. QA found two blockers in the importer. " * 10


class Recording(BaseSummarizer):
    """Answers with `answer(text)` and records what it was asked."""

    def __init__(self, answer=lambda t: t, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(tokenizer=TOK, **kwargs)
        self.answer = answer
        self.asked: list[tuple[str, int]] = []

    def _summarize_many(self, texts: list[str], targets: list[int], query: str | None) -> list[str]:
        self.asked += list(zip(texts, targets))
        return [self.answer(t) for t in texts]


def test_a_text_within_its_budget_is_not_sent_to_the_model() -> None:
    s = Recording(answer=lambda t: "short.")
    assert s.summarize(["tiny", LONG], 20) == ["tiny", "short."]
    assert s.asked == [(LONG, 20)]
    forced = Recording(answer=lambda t: "short.", always_summarize=True)
    assert forced.summarize(["tiny"], 20) == ["short."] and forced.asked == [("tiny", 20)]
    assert asyncio.run(Recording().asummarize(["tiny", LONG], [5, 30]))[0] == "tiny"


def test_an_overlong_answer_is_cut_at_the_last_sentence_end() -> None:
    out = Recording().summarize([LONG], 30)[0]
    assert TOK.count(out) <= 30 and out.endswith(".")
    assert LONG.startswith(out)


def test_fit_to_tokens_prefers_a_sentence_end_that_keeps_half() -> None:
    text = "One short sentence. " + "and then a very long clause that runs on " * 10
    cut = fit_to_tokens(text, 40, TOK)
    assert TOK.count(cut) <= 40 and not cut.endswith(".")  # the sentence end would lose more than half
    assert fit_to_tokens("  spaced out.  ", 10, TOK) == "spaced out."
    cut = fit_to_tokens(LONG, 25, TOK)
    assert cut.endswith(".") and LONG.startswith(cut) and TOK.count(cut) <= 25
    # The longest whole-sentence start: one sentence more does not fit.
    longer = LONG[: LONG.index(".", len(cut) + 1) + 1]
    assert TOK.count(longer) > 25


def test_answers_that_do_not_match_the_request_are_model_errors() -> None:
    class Short(BaseSummarizer):
        def _summarize_many(self, texts: list[str], targets: list[int], query: str | None) -> list[str]:
            return []

    with pytest.raises(ModelError, match="Short: got 0 summaries for 1 texts"):
        Short().summarize([LONG], 10)
    with pytest.raises(InvalidTypeError, match=r"summary of texts\[0\]: expected str, got int"):
        Recording(answer=lambda t: 3).summarize([LONG], 10)


def test_check_texts_and_budgets_name_what_is_wrong() -> None:
    assert check_texts(("a", "b")) == ["a", "b"]
    assert check_targets(np.array([3, 4]), 2) == [3, 4]  # the planner passes arrays
    assert check_targets(np.int64(5), 2) == [5, 5]
    with pytest.raises(InvalidTypeError, match="wrap it in a list"):
        check_texts("one text")
    with pytest.raises(InvalidInputError, match=r"texts\[1\]: empty text"):
        check_texts(["a", "  "])
    with pytest.raises(InvalidInputError, match="budget: got 1 budgets for 2 texts"):
        check_targets([3], 2)
    with pytest.raises(InvalidInputError, match=r"budget\[1\]: must be a positive number of tokens, got 0"):
        check_targets([3, 0], 2)
    with pytest.raises(InvalidTypeError, match="budget: expected an int or a list of ints, got bool"):
        check_targets(True, 1)


def test_the_tokenizer_and_query_are_checked() -> None:
    with pytest.raises(InvalidTypeError, match="tokenizer: expected a ctxfold.Tokenizer"):
        BaseSummarizer(tokenizer="o200k_base")  # type: ignore[arg-type]
    with pytest.raises(InvalidTypeError, match="query: expected str or None, got int"):
        Recording().summarize([LONG], 10, query=3)  # type: ignore[arg-type]


def test_any_object_with_the_two_methods_is_a_summarizer() -> None:
    class Plain:
        def summarize(self, texts, budget, query=None):  # type: ignore[no-untyped-def]
            return list(texts)

        async def asummarize(self, texts, budget, query=None):  # type: ignore[no-untyped-def]
            return list(texts)

    assert isinstance(Plain(), Summarizer) and isinstance(Recording(), Summarizer)
    assert not isinstance(object(), Summarizer)
