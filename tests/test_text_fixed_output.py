"""Typed mentions and resolved dates of a generated entity-dense chat, held
to a stored digest: a faster scanner must give the same mentions (text,
type, span, key, weak) and the same date references, or this test says which
message differs first."""

from __future__ import annotations

import datetime as dt
import hashlib
import random

from ctxfold.text.entities import clause_mentions, extract_mentions
from ctxfold.text.temporal import resolve_dates

SENTENCES = [
    "My friend {name} flew to {place} on {date} and paid {money} for the hotel.",
    "I need to send the report to {name} by {weekday}.",
    "I'll ask {name} at {org} about the {percent} discount {rel}.",
    "The fix is in {path}; call count_tokens before you run it at {time}.",
    "Let's meet {name} in {place} {rel}.",
    "We upgraded to v{version} and the error in the payment service went away {rel}.",
    "She said the invoice from {org} is due before the 15th.",
    "Email {email} or see https://example.com/docs/{word} for details.",
    "the weather was nice and we talked about recipes, gardens and the old car for a while.",
    "{Rel} {name} told me that {place} was cold, so {count} {unit} ago we left.",
    "In {count} {unit} from now {name} and I will visit {place}; on {weekday} we have to pack.",
    "Mr. {name} McGregor met Dr. {name} at the University of Michigan in {month} {year}.",
    "Call me {name}. I work at {org} as a nurse, and I live in {place}.",
    "Use `engine.optimize()` or ContextEngine.run() in C:\\Users\\{word}\\notes.txt and ~/notes/{word}.md.",
    "That was {money2} dollars, about {percent} percent more than version 2.1 cost at 7 a.m. or noon.",
    "My goal is to finish the {word} draft before the end of the month, and our meeting moved to {date2}.",
    "This may be fine: next May we go to New York City, this past weekend we stayed in Salt Lake City.",
    "Later {name} called; İstanbul was lovely the day before yesterday, earlier this week and last night.",
    "Wow {name}'s sister asked about NASA, the EU and IBM's plan_v2 rollout {rel}; see 5/21/2023 or 2023-05-08.",
    "He said: \"{name}, we'll ship 1.26.4 by 3pm tomorrow\" and I promise to check https://www.example.org/a_b).",
]
NAMES = "Melanie Caroline Bob Sarah Akib Nicolas Vanessa Emi Elise Fahim Mel Jean-Luc O'Neil".split()
PLACES = "Lisbon Paris Texas Tokyo Berlin Denver Chicago Kenya Norway Seoul".split() + ["New York", "San Francisco"]
ORGS = ["Acme Corp", "Globex Inc", "Initech LLC", "the University of Michigan", "Umbrella Ltd"]
RELATIVE = ["yesterday", "tomorrow", "today", "last week", "next month", "this Friday", "last Saturday", "next weekend",
            "this coming Monday", "a couple of days ago", "a few weeks ago", "in 2 weeks' time", "two months ago",
            "three years from now", "later this month", "last December", "this year's", "tonight"]
UNITS = ["days", "weeks", "months", "years", "fortnight", "day"]
COUNTS = ["3", "two", "a couple of", "several", "many", "twenty", "a", "1234"]
WEEKDAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split()
MONTHS = "January February March May June July August September October November December Jan Sept".split()
ANCHORS = (dt.date(2023, 5, 8), dt.datetime(2024, 2, 29, 23, 30, tzinfo=dt.timezone(dt.timedelta(hours=-5))), None)


def conversation(seed: int, messages: int = 120) -> list[str]:
    rng = random.Random(seed)

    def sentence() -> str:
        rel = rng.choice(RELATIVE)
        return rng.choice(SENTENCES).format(
            name=rng.choice(NAMES), place=rng.choice(PLACES), org=rng.choice(ORGS), rel=rel, Rel=rel.capitalize(),
            date=f"{rng.choice(MONTHS)} {rng.randint(1, 28)}, 2023", date2=f"the {rng.randint(1, 28)}th of {rng.choice(MONTHS)}",
            money=f"${rng.randint(50, 5000):,}", money2=rng.randint(5, 900), percent=f"{rng.randint(1, 60)}%",
            path=f"src/app/module_{rng.randint(1, 40)}.py", time=f"{rng.randint(1, 12)}:{rng.choice(['00', '30'])} pm",
            version=f"1.{rng.randint(0, 9)}.{rng.randint(0, 9)}", email=f"{rng.choice(NAMES).lower()}@example.com",
            word=rng.choice(["start", "api", "faq", "draftV2"]), weekday=rng.choice(WEEKDAYS), month=rng.choice(MONTHS),
            year=rng.randint(1990, 2030), count=rng.choice(COUNTS), unit=rng.choice(UNITS),
        )

    out = []
    for i in range(messages):
        words = rng.randint(10, 40) if i % 2 == 0 else rng.randint(60, 200)
        parts: list[str] = []
        while sum(len(p.split()) for p in parts) < words:
            parts.append(sentence())
        out.append(rng.choice([" ", "\n", "  ", "\n\n- "]).join(parts))
    return out


def _lines(texts: list[str]) -> list[str]:
    lines = []
    for i, text in enumerate(texts):
        extract_mentions.cache_clear()
        clause_mentions.cache_clear()
        lines.append(f"{i} mentions {extract_mentions(text)!r}")
        lines.append(f"{i} clauses {clause_mentions(text)!r}")
        for anchor in ANCHORS:
            lines.append(f"{i} dates {anchor!r} {resolve_dates(text, anchor)!r}")
    return lines


# sha256 of the lines above for conversation(seed) with seed 0, 1 and 2, computed with the regex-per-kind scanner.
EXPECTED = {
    0: "3c7d06b6f83cbcd340fe22a9e8ac998fd6765462ed641036eecd0baff579fba6",
    1: "0aef4b4bc61c64acbd611b8ebc1ade08fde5e8dee8b768fc583df572af3a840f",
    2: "80011e5917221b63d55b9924a5c929038caeaead17bf89ff5381e09ecf824ccd",
}


def test_mentions_and_dates_match_the_stored_digest() -> None:
    for seed, expected in EXPECTED.items():
        lines = _lines(conversation(seed))
        digest = hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()
        assert digest == expected, f"seed {seed}: output changed (digest {digest}); first lines: {lines[:2]}"


def test_the_fixture_is_dense() -> None:
    texts = conversation(0)
    types = {m.type for t in texts for m in extract_mentions(t)}
    resolved = [r for t in texts for r in resolve_dates(t, ANCHORS[0]) if r.resolved]
    assert len(types) >= 15 and len(resolved) > len(texts)
