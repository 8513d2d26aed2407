"""The package's one entity extractor, without a model.

- `extract_entities`: lower-cased entity strings of a query, for the
  entity-overlap score (capitalised words and runs of them, numbers, dates,
  quoted strings, file paths, code identifiers).
- `verbatim_entities`: names, numbers and dates as written, with repeats, for
  checking that an extractive summary keeps them.
- `extract_mentions`: typed mentions with their spans (people, organisations,
  places, dates, times, money, percentages, emails, URLs, paths, code,
  versions, personal things, task goals, commitments, temporal constraints),
  for the entity repository and cross-references.
- `entity_recall`: the share of a text's entities another text still holds.

Regular expressions and one small gazetteer, no model, so that a long
history reads quickly: the atomic mentions (everything but clauses) come
from the core's `EntityScanner`, which gives what the pure-Python scanner
(`atomic_mentions_python`, over `entity_patterns`) gives. All three share
one stop list.
"""

from __future__ import annotations

import functools
import operator
import re
from collections.abc import Iterable, Iterator, Sequence
from itertools import starmap
from pathlib import Path
from typing import Any

import msgspec

from ctxfold._core import EntityScanner, literal_starts
from ctxfold.text.entity_patterns import NAME, WHEN, claim
from ctxfold.errors import InvalidTypeError

__all__ = [
    "ENTITY_TYPES", "CRITICAL_TYPES", "STOP_WORDS", "Mention", "extract_entities", "verbatim_entities",
    "extract_mentions", "clause_mentions", "entity_recall", "normalise", "places",
]

USER, PERSON, ORG, LOCATION = "user_identity", "person", "organisation", "location"
DATE, TIME, MONEY, PERCENT = "date", "time", "money", "percent"
EMAIL, URL, PATH, CODE, VERSION = "email", "url", "path", "code", "version"
PERSONAL, GOAL, COMMITMENT, CONSTRAINT, OTHER = "personal", "task_goal", "commitment", "temporal_constraint", "other"
ENTITY_TYPES = (USER, PERSON, ORG, LOCATION, DATE, TIME, MONEY, PERCENT, EMAIL, URL, PATH, CODE, VERSION,
                PERSONAL, GOAL, COMMITMENT, CONSTRAINT, OTHER)
#: What the user is, wants, promised or must meet: the engine may protect the messages that say it.
CRITICAL_TYPES = frozenset({USER, GOAL, COMMITMENT, CONSTRAINT})
# Clause-like types: phrases that overlap the atomic mentions inside them.
CLAUSE_TYPES = frozenset({USER, GOAL, COMMITMENT, CONSTRAINT, PERSONAL})

#: Words that open sentences, address the reader or glue clauses: never an entity on their own.
STOP_WORDS = frozenset(
    """i i'm i've i'd i'll a the an and but or so if it its this that these those there here what when where
    which who why how yes no ok okay sure thanks thank please hi hello hey also however great good well
    my your our their we you he she they is are was were be can could would should will do does did
    let let's sounds as in on at for to of with from by about just some any all not additionally finally
    overall remember consider try make keep use each every other another many most more once then now after
    before while since because although even both either neither one first second third next last note
    example instead otherwise still yet don didn doesn isn aren wasn weren won couldn wouldn shouldn haven
    hasn hadn""".split()
)

# ---- the two untyped views ----------------------------------------------------------------

_QUERY_PATTERNS = [
    r"\b\d{4}-\d{2}-\d{2}\b",  # ISO dates
    r"\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b",  # 5/21, 5/21/2023
    r"\$?\b\d+(?:[.,]\d+)*%?",  # numbers, money, percentages
    r"\b[A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*\b",  # capitalised words and runs of them
    r"(?:[\w.-]+/)+[\w.-]+",  # paths
    r"\b[a-z]+(?:_[a-z0-9]+)+\b|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b",  # snake_case, camelCase
    r"\"([^\"\n]{3,60})\"",  # quoted phrases
]
_QUERY_ENTITY = re.compile("|".join(f"(?:{p})" for p in _QUERY_PATTERNS))
# Names (capitalised words, acronyms), numbers and dates: what must survive verbatim.
_VERBATIM = re.compile(r"\b[A-ZÀ-ÖØ-Þ][^\W\d_]*[a-zß-öø-ÿ][^\W\d_]*|\b[A-Z]{2,}\b|\d+(?:[.,:/-]\d+)*")


def extract_entities(text: str) -> set[str]:
    """Lower-cased entity strings found in `text` (a run of capitalised words
    gives the run and each of its words)."""
    found: set[str] = set()
    for match in _QUERY_ENTITY.finditer(text):
        value = (match.group(1) or match.group(0)).strip().lower()
        if len(value) < 2 and not value.isdigit():
            continue
        words = [w for w in value.split() if w not in STOP_WORDS]
        if not words:
            continue
        found.add(" ".join(words))
        if len(words) > 1:
            found.update(words)
    return found


def verbatim_entities(text: str) -> list[str]:
    """Names, numbers and dates in ``text``, verbatim, with repeats."""
    return [e for e in _VERBATIM.findall(text) if e.lower() not in STOP_WORDS]


# ---- typed mentions -----------------------------------------------------------------------


class Mention(msgspec.Struct, frozen=True):
    """One entity mention: its `text` as written, `type` (one of
    `ENTITY_TYPES`), its span in the text and `key`, the normalised form
    mentions of one entity share."""

    text: str
    type: str
    start: int
    end: int
    key: str
    weak: bool = False
    """A sentence's capitalised first word without a person cue: a name only
    if the conversation names it elsewhere (the repository decides)."""


@functools.cache
def places() -> frozenset[str]:
    """The gazetteer of place names (lower-cased), shipped as ``data/places.txt``."""
    path = Path(__file__).resolve().parent / "data" / "places.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    return frozenset(line.strip().lower() for line in lines if line.strip() and not line.startswith("#"))


_MAX_PLACE_WORDS = 4


@functools.cache
def _place_first_words() -> frozenset[str]:
    return frozenset(name.split()[0] for name in places())


# The rest of a clause: up to punctuation or 80 characters (goals and promises end at a conjunction too);
# "I have to say" and the like are manners of speaking, not goals or promises.
_CLAUSE_END = r"(?!(?:say|admit|agree|mention|confess|be honest|tell you|thank|definitely say)\b)[^.!?;,\n]{2,80}"
_CONJUNCTION = re.compile(r"\s+(?:and|but|so|because)\s", re.I)
_IDENTITY_NAME = r"([A-Z][a-z]+(?:[ \t]+[A-Z][a-z]+)?)"
# (type, substrings of the lower-cased text one of which must be there, pattern)
_CLAUSES: list[tuple[str, tuple[str, ...], re.Pattern[str]]] = [
    (USER, ("name is", "call me", "i'm ", "i am "),
     re.compile(rf"(?:[Mm]y name is|[Cc]all me|I'm|I am)[ \t]+{_IDENTITY_NAME}\b")),
    (USER, ("i work", "i live", " from ", "grew up", "born in", "study at"),
     re.compile(r"I (?:work (?:as|at|for)|live in|'m from|am from|grew up in|was born in|study at)"
                r"\s+[^.!?;,\n]{2,40}?(?=[.!?;,\n]|\s+(?:and|but|so|who|which|that)\s|$)", re.I)),
    (GOAL, ("need to", "want to", "like to", "goal is", "trying to", "have to", "plan to", "planning to"),
     re.compile(rf"(?:I (?:need|want|'d like|would like|'m trying|am trying|have|'m planning|plan) to"
                rf"|(?:my|our|the) goal is(?: to)?|we need to)\s+{_CLAUSE_END}", re.I)),
    (COMMITMENT, ("i will", "i'll", "going to", "we will", "we'll", "let's", "let us", "i promise"),
     re.compile(rf"(?:I will|I'll|I'm going to|I am going to|we will|we'll|let's|let us|I promise to|I promise)"
                rf"\s+{_CLAUSE_END}", re.I)),
    (CONSTRAINT, ("by ", "before ", "until ", "till ", "due ", "deadline"),
     re.compile(rf"(?:by|before|until|till|no later than|due|deadline(?: is)?)\s+(?:the\s+)?{WHEN}\b", re.I)),
    (PERSONAL, ("my ", "our "),
     re.compile(r"(?:[Mm]y|[Oo]ur)\s+(?:(?:new|old|first|last|next|current|favou?rite|little|big|best|"
                r"younger|older|own)\s+)?(?!own\b|way\b|mind\b|best\b|bad\b|pleasure\b|goal\b|name\b)"
                r"[a-z][a-z-]{2,}\b")),
]
_LOWERED = {p: re.compile(p.pattern.lower()) for _, _, p in _CLAUSES if p.flags & re.I}
# Where each clause pattern can start (in the order of `_CLAUSES`): after the pronoun "i " / "i'" (found once
# for all) or not, and (literal, how far before it the match starts) pairs, all lower-cased. Matching only there
# finds what a scan of every position finds, several times faster.
_PRONOUN_I = (("i ", 0), ("i'", 0))
_CLAUSE_STARTS: tuple[tuple[bool, tuple[tuple[str, int], ...]], ...] = (
    (True, (("my name", 0), ("call me", 0))),
    (True, ()),
    (True, (("goal", 3), ("goal", 4), ("we need", 0))),
    (True, (("we will", 0), ("we'll", 0), ("let", 0))),
    (False, (("by", 0), ("before", 0), ("until", 0), ("till", 0), ("no later", 0), ("due", 0), ("deadline", 0))),
    (False, (("my", 0), ("our", 0))),
)
# Each clause's start literals, with the pronoun's when it can start after it: one core call finds them all.
_CLAUSE_LITERALS = [[*literals, *(_PRONOUN_I if after_i else ())] for after_i, literals in _CLAUSE_STARTS]
_ORG_WORDS = frozenset(
    """inc inc. ltd ltd. llc corp corp. corporation company co. university college institute foundation bank group
    lab labs technologies systems association agency department ministry school hospital club society gmbh ag plc
    partners studio studios airlines motors""".split()
)
# Words that open a sentence before a name ("Later Mel called"): not part of the name.
_OPENERS = frozenset(
    """later maybe perhaps sometimes actually honestly anyway besides meanwhile luckily unfortunately apparently
    obviously ask tell call meet see dear tonight today yesterday tomorrow sadly hopefully oh wow congrats
    congratulations happy""".split()
)
# Chat spellings that are capitalised but name nothing ("Im fine", "Lol").
_NOT_NAMES = frozenset("im ive id ill dont cant wont thats whats lol omg haha oh ah ok okay yeah yep nope".split())
_TITLES = frozenset("mr mrs ms miss dr prof professor".split())
# A name right after one of these words (or a title) is a person; not "with",
# "called" or "named", which as often come before a tool or a product.
_PERSON_WORDS_BEFORE = frozenset(
    """friend sister brother wife husband mom mum mother dad father son daughter boss manager colleague coworker
    co-worker partner girlfriend boyfriend cousin aunt uncle grandma grandpa neighbor neighbour teacher doctor
    roommate fiance fiancé fiancée met told asked thanks thank hi hey hello dear mr mrs ms miss
    dr prof professor""".split()
)
_PERSON_AFTER = re.compile(r"(?:'s|’s)?[ \t]+(?:said|says|told|tells|asked|asks|thinks|thought|wants|wanted|is my|was my|"
                           r"and I|called|texted|emailed|replied|mentioned|suggested|and his|and her)\b")
# What can come right before a sentence's first word (after spaces).
_SENTENCE_OPENERS = frozenset('.!?:\n"“(*#>-')
_WORD = re.compile(r"\S+")
# An article or a title is not part of what a mention names ("Dr. Smith" is "Smith").
_KEY_PREFIX = re.compile(r"^(?:the|mr|mrs|ms|miss|dr|prof|professor)\.?\s+")
_START = operator.attrgetter("start")
_POSSESSIVE = re.compile(r"(?:'s|’s|'|’)$")


def normalise(text: str) -> str:
    """The key mentions of one entity share: lower case, single spaces, no
    possessive ending, no leading article or trailing punctuation."""
    if text.isalnum():
        return text.lower()
    key = " ".join(text.lower().split()).lstrip("\"'`([").rstrip(".,;:!?\"'`)]")
    if "'" in key or "’" in key:
        key = _POSSESSIVE.sub("", key)
    return _KEY_PREFIX.sub("", key) if key[:1] in "tmdp" else key


@functools.lru_cache(maxsize=65536)
def extract_mentions(text: str) -> tuple[Mention, ...]:
    """Typed mentions in ``text``, in order of their start. Atomic mentions
    (names, dates, paths, ...) never overlap each other; clause mentions (task
    goals, commitments, temporal constraints, identity statements, personal
    things) may contain atomic ones."""
    clauses = clause_mentions(text)
    found = list(clauses)
    found.extend(starmap(Mention, _scanner().scan(text)))
    # Sorting by (start, -end): a C-level key first, and the full key only when two mentions share a start
    # (only clause mentions can; the sort is stable, so those keep coming first).
    found.sort(key=_START)
    if clauses and len(found) != len({m.start for m in found}):
        found.sort(key=lambda x: (x.start, -x.end))
    return tuple(found)


@functools.cache
def _scanner() -> EntityScanner:
    """The core's scanner of atomic mentions, built once from this module's word lists."""
    return EntityScanner(places=places(), stop_words=STOP_WORDS, not_names=_NOT_NAMES, titles=_TITLES,
                         openers=_OPENERS, org_words=_ORG_WORDS, person_cues=_PERSON_WORDS_BEFORE)


def atomic_mentions_python(text: str) -> list[Mention]:
    """The atomic mentions of ``text`` found by the pure-Python scanner (what
    the core's `EntityScanner` must give, mention for mention): the reference
    the equivalence checks compare against."""
    place_set = places()
    hits, claimed = claim(text)
    found = []
    for start, end, kind in hits:
        value = text[start:end]
        key = normalise(value.strip("`").removesuffix("()")) if kind == CODE else (
            value.lower() if value.isalnum() else normalise(value))
        if key:
            found.append(Mention(value, kind, start, end, key))
    # Runs of capitalised words come last and never overlap each other: each needs only the claims above.
    for m in NAME.finditer(text):
        start, end = m.span()
        if (start and text[start - 1].isalnum()) or claimed.find(1, start, end) != -1:
            continue
        run = m.group(0)
        if " " in run or "\t" in run:
            found.extend(_names(text, run, start, place_set))
            continue
        low = run.lower()
        # The common case, "The" or "It" opening a sentence: without an apostrophe `_not_a_name` is one look-up.
        if _not_a_name(run) if "'" in low or "’" in low else low in _NAME_STOPS:
            continue
        found.append(_single_name(text, run, start, place_set, low))
    return found


@functools.lru_cache(maxsize=65536)
def clause_mentions(text: str) -> tuple[Mention, ...]:
    """Only the clause mentions of ``text`` (identity statements, task goals,
    commitments, temporal constraints, personal things): the cheap part of
    `extract_mentions`, enough to find the critical messages."""
    if not isinstance(text, str):
        raise InvalidTypeError(f"text: expected str, got {type(text).__name__}; pass the message's text content")
    found: list[Mention] = []
    low = text.lower()
    # Case-free clauses run on the lower-cased text (faster than IGNORECASE) when lowering kept every offset.
    same_offsets = len(low) == len(text)
    all_starts = literal_starts(low, _CLAUSE_LITERALS) if same_offsets else []
    for index, (kind, needles, pattern) in enumerate(_CLAUSES):
        if same_offsets:
            starts = all_starts[index]
            lowered = _LOWERED.get(pattern)
            matches: Iterable[re.Match[str]] = list(_matches_at(lowered or pattern, low if lowered else text, starts))
            # The needles gate the pattern (tested only when it matched: the result is the same).
            if not matches or not any(n in low for n in needles):
                continue
        elif any(n in low for n in needles):
            matches = pattern.finditer(text)
        else:
            continue
        for m in matches:
            if m.start() > 0 and text[m.start() - 1].isalnum():
                continue
            group = 1 if pattern.groups else 0
            if group and _bare(m.group(1).split()[0]) in STOP_WORDS:
                continue
            value = text[m.start(group):m.end(group)]
            if kind in (GOAL, COMMITMENT):
                cut = _CONJUNCTION.search(value, 12)
                value = value[:cut.start()] if cut else value
            value = value.rstrip(" \t")
            found.append(Mention(value, kind, m.start(group), m.start(group) + len(value), normalise(value)))
    found.sort(key=lambda x: (x.start, -x.end))
    return tuple(found)


def find_all_python(text: str, literals: Sequence[tuple[str, int]]) -> list[int]:
    """Every position `back` characters before an occurrence of a `literal` in `text`, in order, once each: the
    pure-Python reference of the core's `literal_starts`, which `clause_mentions` runs."""
    found = set()
    for literal, back in literals:
        at = text.find(literal)
        while at != -1:
            if at >= back:
                found.add(at - back)
            at = text.find(literal, at + 1)
    return sorted(found)


def _matches_at(pattern: re.Pattern[str], text: str, starts: list[int]) -> Iterator[re.Match[str]]:
    """What `pattern.finditer(text)` gives when `starts` holds every position where a match can start."""
    at = 0
    for start in starts:
        if start >= at and (m := pattern.match(text, start)) is not None:
            yield m
            at = m.end()


_NAME_STOPS = STOP_WORDS | _NOT_NAMES
_TITLES_OR_NOT_NAMES = _TITLES | _NOT_NAMES
# Words that join the parts of a name ("Bank of", "van") but do not end one.
_STOP_OR_JOINERS = STOP_WORDS | {"of", "de", "van", "von", "da", "del"}


def _not_a_name(run: str) -> bool:
    """A one-word run of capitals that names nothing: the common case, "The", "It", "I'm" opening a sentence."""
    return " " not in run and "\t" not in run and (_bare(run) in STOP_WORDS or run.lower() in _NOT_NAMES)


def _bare(word: str) -> str:
    """A word lower-cased without its contraction or possessive ("Don't" -> "don")."""
    low = word.lower()
    if "'" in low or "’" in low:
        return low.replace("’", "'").partition("'")[0]
    return low


def _names(text: str, run: str, start: int, place_set: frozenset[str]) -> list[Mention]:
    """A run of capitalised words: places from the gazetteer (longest first),
    the rest a name; a sentence's first word only when it is a known place
    or part of a longer run, and never a stop word."""
    if " " not in run and "\t" not in run:
        return [_single_name(text, run, start, place_set)]
    words = [(m.group(0), start + m.start()) for m in _WORD.finditer(run)]
    while words and (_bare(words[0][0]) in STOP_WORDS or words[0][0].lower() in _TITLES_OR_NOT_NAMES
                     or (words[0][0].lower() in _OPENERS and _at_sentence_start(text, words[0][1]))):
        words.pop(0)
    out: list[Mention] = []
    if len(words) > 1 and (words[-1][0].lower() in _ORG_WORDS or words[0][0].lower() in ("university", "college")):
        s, e = words[0][1], words[-1][1] + len(words[-1][0])
        if e < len(text) and text[e] == "." and words[-1][0].lower() + "." in _ORG_WORDS:
            e += 1
        return [Mention(text[s:e], ORG, s, e, normalise(text[s:e]))]
    i = 0
    rest: list[tuple[str, int]] = []

    def flush() -> None:
        while rest and _bare(rest[0][0]) in STOP_WORDS:
            rest.pop(0)
        while rest and _bare(rest[-1][0]) in _STOP_OR_JOINERS:
            rest.pop()
        if not rest:
            return
        s, e = rest[0][1], rest[-1][1] + len(rest[-1][0])
        value = text[s:e]
        starts = len(rest) == 1 and not value.isupper() and _at_sentence_start(text, s)
        kind = _name_kind(text, s, e, value)
        # A sentence's capitalised first word is a name only with a person cue, or when named elsewhere.
        out.append(Mention(value, kind, s, e, normalise(value), weak=starts and kind != PERSON))
        rest.clear()

    first_words = _place_first_words()
    while i < len(words):
        if _bare(words[i][0]) not in first_words:
            rest.append(words[i])
            i += 1
            continue
        for n in range(min(_MAX_PLACE_WORDS, len(words) - i), 0, -1):
            phrase = " ".join(w for w, _ in words[i:i + n])
            if normalise(phrase) in place_set:
                flush()
                s, e = words[i][1], words[i + n - 1][1] + len(words[i + n - 1][0])
                out.append(Mention(text[s:e], LOCATION, s, e, normalise(text[s:e])))
                i += n
                break
        else:
            rest.append(words[i])
            i += 1
    flush()
    return out


def _single_name(text: str, word: str, start: int, place_set: frozenset[str], low: str | None = None) -> Mention:
    """`_names` for a run of one word (most runs): a place, or a name, weak at
    a sentence's start (`_name_kind` written out: this runs for most names)."""
    end = start + len(word)
    key = (low or word.lower()) if word.isalnum() else normalise(word)
    if key in place_set:
        return Mention(word, LOCATION, start, end, key)
    if word.isupper():
        return Mention(word, OTHER, start, end, key)
    before = text[max(0, start - 24):start].rsplit(None, 1)
    if (before and before[-1].lower().rstrip(".") in _PERSON_WORDS_BEFORE) or _PERSON_AFTER.match(text, end, end + 24):
        return Mention(word, PERSON, start, end, key)
    return Mention(word, OTHER, start, end, key, weak=_at_sentence_start(text, start))


def _at_sentence_start(text: str, start: int) -> bool:
    before = text[max(0, start - 6):start].rstrip(" \t")
    return not before or before[-1] in _SENTENCE_OPENERS


def _name_kind(text: str, start: int, end: int, value: str) -> str:
    if value.isupper():
        return OTHER
    before = text[max(0, start - 24):start].split()
    if before and before[-1].lower().rstrip(".") in _PERSON_WORDS_BEFORE:
        return PERSON
    if _PERSON_AFTER.match(text, end, end + 24):
        return PERSON
    return OTHER


# ---- the metric ---------------------------------------------------------------------------


def _text_of(value: str | Sequence[Any], name: str) -> str:
    if isinstance(value, str):
        return value
    parts: list[str] = []
    for i, item in enumerate(value):
        if isinstance(item, str):
            parts.append(item)
        elif isinstance(item, dict):
            content = item.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
        else:
            raise InvalidTypeError(f"{name}[{i}]: expected str or a message dict, got {type(item).__name__}")
    return "\n".join(parts)


def entity_recall(original: str | Sequence[Any], compressed: str | Sequence[Any]) -> float:
    """The share of ``original``'s entities (names, places, organisations,
    dates, times, amounts, addresses, paths, code, versions) that
    ``compressed`` still contains, compared case-insensitively. Each argument
    is a text or a list of texts or chat messages. 1.0 when the original has
    no entity."""
    if not isinstance(original, (str, list, tuple)):
        raise InvalidTypeError(f"original: expected str or a list of messages, got {type(original).__name__}")
    if not isinstance(compressed, (str, list, tuple)):
        raise InvalidTypeError(f"compressed: expected str or a list of messages, got {type(compressed).__name__}")
    source = _text_of(original, "original")
    mentions = [m for m in extract_mentions(source) if m.type not in CLAUSE_TYPES]
    strong = {m.key for m in mentions if not m.weak}
    # A sentence's first word counts when the text names it elsewhere too.
    wanted = strong | {m.key for m in mentions if m.weak and m.key in strong}
    if not wanted:
        return 1.0
    target = normalise_text(_text_of(compressed, "compressed"))
    return sum(1 for key in wanted if key in target) / len(wanted)


def normalise_text(text: str) -> str:
    """``text`` lower-cased with single spaces, so that entity keys can be found in it."""
    return " ".join(text.lower().split())
