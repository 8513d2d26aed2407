"""Entity extraction over a 500-message conversation (goal < 100 ms, nothing
cached), and one added turn on a built repository (incremental).

Groups (compare the rows of a group):
- ``entities-500-synthetic``: a generated chat of 500 messages about
  100,000 tokens long (user turns 20-60 words, assistant turns 200-560, the
  sizes of bench_engine's synthetic chat), with names, places, dates, money,
  paths, goals and promises in its sentences;
- ``entities-500-lme``: the first LongMemEval-S histories cut to 500 turns,
  when ../shared/data is there;
- ``entities-add-turn``: `EntityRepository.add` of one new turn after 500;
- the reference in each extraction group: the untyped regular-expression
  extractor (`extract_entities`, what the scoring layer reads) over the same
  messages; no typed NER peer is installed in the bench extra.

Run: python -m pytest benches/bench_entities.py --benchmark-enable -p no:cacheprovider
"""

from __future__ import annotations

import random

import pytest
from ctxfold.text.entities import extract_entities, extract_mentions
from ctxfold.text.entity_repository import EntityRepository

from conftest import SHARED_DATA, lme_turns

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


def _lme() -> list[str]:
    if not (SHARED_DATA / "conversations" / "longmemeval_s").is_dir():
        pytest.skip(f"LongMemEval-S not found under {SHARED_DATA} (set CTXFOLD_SHARED_DATA)")
    return lme_turns(2)[:MESSAGES]


def _typed_cold(texts: list[str]) -> int:
    extract_mentions.cache_clear()
    return sum(len(extract_mentions(t)) for t in texts)


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
def test_untyped_regex_synthetic(benchmark) -> None:
    assert benchmark.pedantic(lambda: _untyped(SYNTHETIC), rounds=5, iterations=1, warmup_rounds=1) > 0


@pytest.mark.benchmark(group="entities-500-lme")
def test_ctxfold_extract_mentions_lme(benchmark) -> None:
    texts = _lme()
    assert benchmark.pedantic(lambda: _typed_cold(texts), rounds=5, iterations=1, warmup_rounds=1) > 0


@pytest.mark.benchmark(group="entities-500-lme")
def test_untyped_regex_lme(benchmark) -> None:
    texts = _lme()
    assert benchmark.pedantic(lambda: _untyped(texts), rounds=5, iterations=1, warmup_rounds=1) > 0


@pytest.mark.benchmark(group="entities-add-turn")
def test_ctxfold_repository_add_turn(benchmark) -> None:
    new_turn = "I need to call Melanie about the Lisbon trip by Friday; I'll pay the $300 deposit tomorrow."

    def setup():
        extract_mentions.cache_clear()
        return (EntityRepository.from_messages(SYNTHETIC),), {}

    def add(repo: EntityRepository) -> list[str]:
        return repo.add(new_turn)

    assert benchmark.pedantic(add, setup=setup, rounds=10, iterations=1)
