"""The model-free cut: head and tail around an omission marker, exactly
within the budget."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from ctxfold import Tokenizer
from ctxfold.summarize import HeadTailSummarizer
from ctxfold.summarize.head_tail import head_tail

TOK = Tokenizer.from_encoding("o200k_base")
TEXT = "".join(f"Step {i}: copied file_{i}.txt to the backup volume.\n" for i in range(200))


def test_a_text_that_fits_is_returned_unchanged() -> None:
    assert head_tail("short text", 10, TOK) == "short text"


def test_the_cut_keeps_two_thirds_head_one_third_tail_and_names_what_was_omitted() -> None:
    out = head_tail(TEXT, 120, TOK)
    head, rest = out.split("\n[... ", 1)
    omitted, tail = rest.split(" tokens omitted ...]\n", 1)
    assert int(omitted) == TOK.count(TEXT)
    assert TEXT.startswith(head) and TEXT.endswith(tail)
    assert TOK.count(out) <= 120
    assert TOK.count(head) > TOK.count(tail) > 0


def test_a_budget_below_the_marker_gives_the_marker_cut_to_fit() -> None:
    out = head_tail(TEXT, 4, TOK)
    assert TOK.count(out) <= 4
    assert "[... " in out and "Step" not in out


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=400), st.integers(0, 80))
def test_never_over_budget(text: str, budget: int) -> None:
    assert TOK.count(head_tail(text, budget, TOK)) <= budget


def test_the_summarizer_cuts_each_text_to_its_own_budget() -> None:
    s = HeadTailSummarizer(tokenizer=TOK)
    short, long = s.summarize(["a short note", TEXT], [50, 60])
    assert short == "a short note"
    assert TOK.count(long) <= 60 and "tokens omitted" in long
    assert long == head_tail(TEXT, 60, TOK).strip()
