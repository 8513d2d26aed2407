"""The core's atomic entity scanner gives what the pure-Python scanner gives,
mention for mention (text, type, span, key, weak), on generated chats and on
texts that test its edges; and it refuses bad word lists."""

from __future__ import annotations

import pytest
from ctxfold._core import EntityScanner, date_reference_starts, literal_starts
from ctxfold.errors import InvalidInputError, InvalidTypeError
from ctxfold.text.entities import _CLAUSE_LITERALS, Mention, _scanner, atomic_mentions_python, find_all_python
from ctxfold.text.temporal import starts_python

from test_text_fixed_output import conversation

EDGES = [
    "",
    "İstanbul was lovely the day before yesterday; İİ May 5 then tomorrow.",
    "Mr. O'Neil McGregor met Jean-Luc at the University of Michigan in Sept. 2023, 12th of May, May 2023.",
    "Paid $ 5 and €3.50m, 5,000 dollars, 12.5 percent, 7 a.m., 10:30:15PM, 3 pm, 123pm, 5/21/2023, 2023-05-08.",
    "version 2.1, v3, V4, 1.2.3-rc.1+build, 1.2, a1.2.3, see C:\\Users\\me\\notes.txt and ~/a/b.md or ../x/y.",
    "and/or a/b/c/d1 x/y.tar.gz foo.py bar.tsx .json `engine.optimize()` ContextEngine.run() getHTTPResponse "
    "parseJson snake_case_2 _private LeBron DiCaprio",
    "mail a.b+c@x.co.uk, @@, x@y, https://www.example.org/a_b). www.. http://.",
    "ＡＢＣ ١٢٣ café Zoë Ñandú the Bank of America Acme Corp. and New York City, NASA IBM's EU.",
    "Later Mel called; Maybe Sarah said hi. Hi Bob! \"Lisbon\" (Texas) - Paris\tFrance  Tokyo",
    "Noon, midnight, NOON; next Monday, this  coming Friday, last December, mar 3rd, Mar. 3, 3 of march, 5 may",
]


def _core(text: str) -> list[Mention]:
    return [Mention(*row) for row in _scanner().scan(text)]


@pytest.mark.parametrize("text", EDGES)
def test_core_scanner_matches_python_on_edges(text: str) -> None:
    assert _core(text) == atomic_mentions_python(text)


def test_core_scanner_matches_python_on_generated_chats() -> None:
    texts = [t for seed in (3, 4) for t in conversation(seed, 60)]
    rows = _scanner().scan_many(texts)
    for text, found in zip(texts, rows):
        assert [Mention(*r) for r in found] == atomic_mentions_python(text), text[:120]


@pytest.mark.parametrize("text", EDGES + ["in a couple of days; last night. x_yesterday\tthis\u2003week"])
def test_date_reference_starts_match_python(text: str) -> None:
    assert date_reference_starts(text.lower()) == starts_python(text.lower())


@pytest.mark.parametrize("text", EDGES + ["I'm sure i will, by then; my goal is our goal. let's go, hi i'd"])
def test_clause_starts_match_python(text: str) -> None:
    low = text.lower()
    assert literal_starts(low, _CLAUSE_LITERALS) == [find_all_python(low, group) for group in _CLAUSE_LITERALS]


def test_bad_word_lists_are_refused() -> None:
    lists = dict(places=["lisbon"], stop_words=["the"], not_names=[], titles=[], openers=[], org_words=[],
                 person_cues=[])
    with pytest.raises(InvalidInputError, match="stop_words"):
        EntityScanner(**{**lists, "stop_words": ["two words"]})
    with pytest.raises(InvalidTypeError, match="titles"):
        EntityScanner(**{**lists, "titles": "mr"})
    with pytest.raises(InvalidTypeError, match="text"):
        EntityScanner(**lists).scan(3)  # type: ignore[arg-type]
