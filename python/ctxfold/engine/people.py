"""The names two people in a chat go by, so that a question finds each of them.

A speaker's name on a message is often a handle ("Emi") while the other person
calls them something else ("Thanks, Kate!"), and a question may use either, or
spell it another way ("Muhammad" for "Muhhamed", "Aqib" for "Akib").
`with_speakers_named` puts the speaker's own name in place of those, so the
layers that look for a person (intent, entity, BM25) find that person's
messages; `without_speakers` (the question without them) and `what_is_said`
(a message without its speaker's name) are what the dense view reads.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence

from ctxfold._core import Bm25
from ctxfold.engine.cache import EngineCache
from ctxfold.engine.results import Item

__all__ = ["names_called", "what_is_said", "with_speakers_named", "without_speakers"]

# A name said to someone ends a sentence or clause after other words ("Those
# look amazing Kate!", "Thank you, Kate."); so do places ("back from Miami.").
_ADDRESSED = re.compile(r"(?<=[\w,])\s+([A-Z][a-z]+)(?=\s*(?:[!?.,]|$))")
_NAME = re.compile(r"\b[A-Z][a-z]+\b")
_WORD = re.compile(r"\b(\w+)(?:['’]s)?\b")
# A word said this often at the end of a sentence, and mostly there, by one
# person, and seldom by the other, is what the one calls the other: a place
# is said elsewhere in the sentence too, and by both.
MIN_ADDRESSED, ADDRESSED_SHARE, OTHER_SHARE = 5, 0.75, 0.25
# A name the chat never uses this close to a speaker's first name is that
# speaker spelled another way ("Elisa" for "Elise": 0.8).
SPELLING_RATIO = 0.75


def names_called(items: Sequence[Item], people: tuple[str, str], cache: EngineCache) -> dict[str, frozenset[str]]:
    """For each of the two `people`, the names (lowercase) the other one
    calls them by, beside their own."""
    addressed: dict[str, Counter[str]] = {p: Counter() for p in people}
    texts: dict[str, list[str]] = {p: [] for p in people}
    for it in items:
        if it.speaker in addressed:
            found = cache.addressed.get(it.text)
            if found is None:
                found = tuple(m.group(1) for m in _ADDRESSED.finditer(it.text) if m.group(1)[0].isupper())
                cache.addressed.put(it.text, found)
            addressed[it.speaker].update(found)
            texts[it.speaker].append(it.text)
    terms = {p: cache.terms_of(texts[p], Bm25.tokenize) for p in people}

    def said_by(person: str, name: str) -> int:
        stems = Bm25.tokenize(name)[:1]
        return sum(counts.get(stem, 0) for counts, _ in terms[person] for stem in stems)

    own = _words_of(people[0]) | _words_of(people[1])
    out: dict[str, frozenset[str]] = {}
    for speaker, other in (people, people[::-1]):
        out[other] = frozenset(
            name.lower() for name, count in addressed[speaker].items()
            if count >= MIN_ADDRESSED and name.lower() not in own
            and count >= ADDRESSED_SHARE * said_by(speaker, name) and said_by(other, name) <= OTHER_SHARE * count
        )
    return out


def with_speakers_named(query: str, items: Sequence[Item], people: tuple[str, str], cache: EngineCache) -> str:
    """`query` with each name it uses for one of the two `people` (a name
    the other calls them by, or their first name spelled another way and
    never used in the chat) replaced by that speaker's first name."""
    names = _NAME.findall(query)
    if not names:
        return query
    own = {p: _words_of(p) for p in people}
    if all(any(name.lower() in words for words in own.values()) for name in names):
        return query
    called = names_called(items, people, cache)
    terms = cache.terms_of([it.text for it in items], Bm25.tokenize)

    def unused(name: str) -> bool:
        # A stop word ("Will", "May") is no one's name.
        stems = Bm25.tokenize(name)
        return bool(stems) and not any(stem in counts for stem in stems for counts, _ in terms)

    def speaker_named(match: re.Match[str]) -> str:
        name = match.group(0)
        lowered = name.lower()
        if any(lowered in words for words in own.values()):
            return name
        for person in people:
            if lowered in called[person]:
                return person.split()[0]
        if not unused(name):
            return name
        for person in people:
            first = person.split()[0].lower()
            if _skeleton(lowered) == _skeleton(first) or difflib.SequenceMatcher(None, lowered, first).ratio() >= SPELLING_RATIO:
                return person.split()[0]
        return name

    return _NAME.sub(speaker_named, query)


def without_speakers(query: str, people: tuple[str, str]) -> str:
    """`query` without the two `people`'s names (and their "'s"): what it
    asks about them; `query` itself when nothing else is left."""
    own = _words_of(people[0]) | _words_of(people[1])
    rest = " ".join(_WORD.sub(lambda m: "" if m.group(1).lower() in own else m.group(0), query).split())
    return rest if re.search(r"\w", rest) else query


def what_is_said(item: Item) -> str:
    """The message's text without the speaker's name opening it ("Emi: ")."""
    head, speaker = item.text.lstrip(), item.speaker
    return head[len(speaker) + 1:].lstrip() if speaker and head.startswith(speaker + ":") else item.text


def _words_of(name: str) -> set[str]:
    return {w.lower() for w in name.split()}


def _skeleton(name: str) -> str:
    """A name's consonants after its first letter, doubled letters once and
    q as k: "muhammad", "mohamed" and "muhhamed" are all "mhmd"."""
    name = name.replace("q", "k").replace("ph", "f")
    return re.sub(r"(.)\1+", r"\1", name[:1] + re.sub(r"[aeiouy]", "", name[1:]))
