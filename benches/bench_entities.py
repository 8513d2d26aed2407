"""Entity extraction and date resolution over a 500-message conversation
(goal < 100 ms, nothing cached), and one added turn (incremental).

Groups (compare the rows of a group):
- ``entities-500-synthetic``: a generated chat of 500 messages about
  100,000 tokens long (user turns 20-60 words, assistant turns 200-560, the
  sizes of bench_engine's synthetic chat), with names, places, dates, money,
  paths, goals and promises in its sentences; each message an hour after the
  one before;
- ``entities-500-lme``: the first LongMemEval-S histories cut to 500 turns,
  each turn dated by its session, when ../shared/data is there;
- rows of each: `extract_mentions` alone, then `extract_mentions` plus
  `resolve_dates` against the message's date (the speed goal), both from an
  empty cache; the reference is the untyped regular-expression extractor
  (`extract_entities`, what the scoring layer reads) over the same messages;
  no typed NER peer is installed in the bench extra;
- ``entities-add-turn``: one new turn after 500: its mentions and dates from
  an empty cache, and `EntityRepository.add` of it on a built repository.

Run: python -m pytest benches/bench_entities.py --benchmark-enable -p no:cacheprovider
"""

from __future__ import annotations

import datetime as dt
import json
import random

import pytest
from ctxfold.text.entities import clause_mentions, extract_entities, extract_mentions
from ctxfold.text.entity_repository import EntityRepository
from ctxfold.text.temporal import resolve_dates

from conftest import SHARED_DATA, shared_data

MESSAGES = 500
SENTENCES = [
    "My friend {name} flew to {place} on {date} and paid {money} for the hotel.",
    "I need to send the report to {name} by Friday.",
    "I'll ask {name} at {org} about the {percent} discount tomorrow.",
    "The fix is in {path}; call count_tokens before you run it at {time}.",
    "Let's meet {name} in {place} next week.",
    "We upgraded to v{version} and the error in the payment service went away.",
    "She said the invoice from {org} is due before the 15th.",
    "Email {email} or see https://example.com/docs/{word} for details.",
    "the weather was nice and we talked about recipes, gardens and the old car for a while.",
    "It took three hours, so we stopped for coffee and read the news.",
]
NAMES = "Melanie Caroline Bob Sarah Akib Nicolas Vanessa Emi Elise Fahim".split()
PLACES = "Lisbon Paris Texas Tokyo Berlin Denver Chicago Kenya Norway Seoul".split()
ORGS = ["Acme Corp", "Globex Inc", "Initech LLC", "the University of Michigan", "Umbrella Ltd"]


def synthetic(seed: int = 0) -> list[str]:
    rng = random.Random(seed)

    def sentence() -> str:
        return rng.choice(SENTENCES).format(
            name=rng.choice(NAMES), place=rng.choice(PLACES), org=rng.choice(ORGS),
            date=f"{rng.choice(['May', 'June', 'March'])} {rng.randint(1, 28)}, 2023", money=f"${rng.randint(50, 5000):,}",
            percent=f"{rng.randint(1, 60)}%", path=f"src/app/module_{rng.randint(1, 40)}.py",
            time=f"{rng.randint(1, 12)}:{rng.choice(['00', '15', '30', '45'])} pm", version=f"1.{rng.randint(0, 9)}.{rng.randint(0, 9)}",
            email=f"{rng.choice(NAMES).lower()}@example.com", word=rng.choice(["start", "api", "faq"]),
        )

    out = []
    for i in range(MESSAGES):
        words = rng.randint(20, 60) if i % 2 == 0 else rng.randint(200, 560)
        parts: list[str] = []
        while sum(len(p.split()) for p in parts) < words:
            parts.append(sentence())
        out.append(" ".join(parts))
    return out


SYNTHETIC = synthetic()


SYNTHETIC_DATES = [dt.datetime(2023, 5, 1, 9) + dt.timedelta(hours=i) for i in range(MESSAGES)]


def _lme_dated() -> tuple[list[str], list[dt.date]]:
    """The first LongMemEval-S turns and the date of each one's session."""
    if not (SHARED_DATA / "conversations" / "longmemeval_s").is_dir():
        pytest.skip(f"LongMemEval-S not found under {SHARED_DATA} (set CTXFOLD_SHARED_DATA)")
    texts: list[str] = []
    dates: list[dt.date] = []
    for f in sorted(shared_data("conversations", "longmemeval_s").glob("*.json"))[:2]:
        data = json.loads(f.read_text(encoding="utf-8"))
        for when, session in zip(data["haystack_dates"], data["haystack_sessions"]):
            day = dt.datetime.strptime(when[:10], "%Y/%m/%d").date()
            texts += [t["content"] for t in session]
            dates += [day] * len(session)
    return texts[:MESSAGES], dates[:MESSAGES]


def _lme() -> list[str]:
    return _lme_dated()[0]


def _cold() -> None:
    extract_mentions.cache_clear()
    clause_mentions.cache_clear()


def _typed_cold(texts: list[str]) -> int:
    _cold()
    return sum(len(extract_mentions(t)) for t in texts)


def _typed_and_dates_cold(texts: list[str], dates: list) -> int:
    _cold()
    return sum(len(extract_mentions(t)) + len(resolve_dates(t, d)) for t, d in zip(texts, dates))


def _untyped(texts: list[str]) -> int:
    return sum(len(extract_entities(t)) for t in texts)


def test_conversation_size() -> None:
    chars = sum(map(len, SYNTHETIC))
    print(f"\n[bench_entities] synthetic: {len(SYNTHETIC)} messages, {chars} characters")
    assert len(SYNTHETIC) == MESSAGES and _typed_cold(SYNTHETIC) > MESSAGES


@pytest.mark.benchmark(group="entities-500-synthetic")
def test_ctxfold_extract_mentions_synthetic(benchmark) -> None:
    assert benchmark.pedantic(lambda: _typed_cold(SYNTHETIC), rounds=5, iterations=1, warmup_rounds=1) > 0


@pytest.mark.benchmark(group="entities-500-synthetic")
def test_ctxfold_extract_and_dates_synthetic(benchmark) -> None:
    count = benchmark.pedantic(lambda: _typed_and_dates_cold(SYNTHETIC, SYNTHETIC_DATES), rounds=5, iterations=1, warmup_rounds=1)
    assert count > _typed_cold(SYNTHETIC)


@pytest.mark.benchmark(group="entities-500-synthetic")
def test_untyped_regex_synthetic(benchmark) -> None:
    assert benchmark.pedantic(lambda: _untyped(SYNTHETIC), rounds=5, iterations=1, warmup_rounds=1) > 0


@pytest.mark.benchmark(group="entities-500-lme")
def test_ctxfold_extract_mentions_lme(benchmark) -> None:
    texts = _lme()
    assert benchmark.pedantic(lambda: _typed_cold(texts), rounds=5, iterations=1, warmup_rounds=1) > 0


@pytest.mark.benchmark(group="entities-500-lme")
def test_ctxfold_extract_and_dates_lme(benchmark) -> None:
    texts, dates = _lme_dated()
    assert benchmark.pedantic(lambda: _typed_and_dates_cold(texts, dates), rounds=5, iterations=1, warmup_rounds=1) > 0


@pytest.mark.benchmark(group="entities-500-lme")
def test_untyped_regex_lme(benchmark) -> None:
    texts = _lme()
    assert benchmark.pedantic(lambda: _untyped(texts), rounds=5, iterations=1, warmup_rounds=1) > 0


NEW_TURN = "I need to call Melanie about the Lisbon trip by Friday; I'll pay the $300 deposit tomorrow, not next week."


@pytest.mark.benchmark(group="entities-add-turn")
def test_ctxfold_extract_and_dates_add_turn(benchmark) -> None:
    _typed_cold(SYNTHETIC)  # the 500 before it are cached by text and need nothing new
    anchor = SYNTHETIC_DATES[-1] + dt.timedelta(hours=1)
    rounds = iter(range(1000))

    def setup():
        return (f"{NEW_TURN} ({next(rounds)})",), {}  # a text not seen before, so nothing of it is cached

    def add(turn: str) -> int:
        return len(extract_mentions(turn)) + len(resolve_dates(turn, anchor))

    benchmark.pedantic(add, setup=setup, rounds=20, iterations=1)
    assert add(NEW_TURN) > 0


@pytest.mark.benchmark(group="entities-add-turn")
def test_ctxfold_repository_add_turn(benchmark) -> None:
    new_turn = NEW_TURN

    def setup():
        _cold()
        return (EntityRepository.from_messages(SYNTHETIC),), {}

    def add(repo: EntityRepository) -> list[str]:
        return repo.add(new_turn)

    assert benchmark.pedantic(add, setup=setup, rounds=10, iterations=1)


def test_core_scanner_matches_the_python_scanner_on_shared_data() -> None:
    """The core's atomic mentions and date reference starts equal the pure-Python scanners' on every message of
    ../shared/data."""
    from conftest import chat_messages
    from ctxfold._core import date_reference_starts, literal_starts
    from ctxfold.text.entities import _CLAUSE_LITERALS, Mention, _scanner, atomic_mentions_python, find_all_python
    from ctxfold.text.temporal import starts_python

    messages = chat_messages()
    scanner = _scanner()
    for i, text in enumerate(messages):
        core = [Mention(*row) for row in scanner.scan(text)]
        python = atomic_mentions_python(text)
        assert core == python, f"message {i} differs: core {core[:3]} ... python {python[:3]} ...; text {text[:200]!r}"
        lower = text.lower()
        assert date_reference_starts(lower) == starts_python(lower), f"message {i}: date reference starts differ"
        clause_starts = [find_all_python(lower, group) for group in _CLAUSE_LITERALS]
        assert literal_starts(lower, _CLAUSE_LITERALS) == clause_starts, f"message {i}: clause starts differ"
    print(f"\n[bench_entities] core scanner = Python scanner on {len(messages)} messages")
