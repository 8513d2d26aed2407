"""Knowledge updates: does a new memory restate an old one, replace it, or stand apart?

An add compares the new memory with the most similar memories of the same
category in the same scope (the embedding cosine only picks the candidates)
and reads both texts, without a model:

- **merge** (``same``): the texts carry the same facts in other words:
  the same negation, numbers, versions, dates and names, and no content word
  of one replaced by another (only function words, word order, inflection,
  case or punctuation differ, or a word is added or left out);
- **supersede** (``update``): the same statement with a different value:
  negated or no longer negated, another number, price, version, date,
  weekday or time, another name or identifier; the rest of the statement
  (its content words) must still match, so "Alice owns billing" and "Bob
  owns billing" is an update while "Alice owns billing" and "Bob owns
  search" are two memories. One kind of value changes: "the Berlin office
  opens at 9" and "the Munich office opens at 8" (a name and a number) are
  two memories;
- otherwise (``different``) the new memory is simply added.

What counts as a value (a "slot"):

- negation: ``not``, ``no``, ``never``, ``cannot``, ``-n't`` forms, ``no
  longer``, and a few negative forms read as "not" + the positive
  (``forbidden`` = not allowed, ``disabled`` = not enabled, ``false`` = not
  true); only the polarity (odd or even count) is compared, so ``not`` and
  ``never`` restate each other;
- numbers: digits with their unit (``9am``, ``$20``, ``30GB``, ``5%``,
  ``1,000``), number words (``three``);
- versions: ``2.1.0``, ``v3``;
- dates: ISO and slashed dates, months with their day and year ("May 3,
  2024" is one date), weekdays (plural or not),
  ``today``/``tomorrow``/``daily``/``weekly``...; a lower-case "may" or
  "march" is a month only next to a day;
- names: capitalised words and identifiers (``Alice``, ``PostgreSQL``,
  ``us-east-1``, ``snake_case``, ``camelCase``, ``api.example.com``). A
  capitalised word that the other text has in lower case is a case
  difference, not a name ("Office opens" / "the office opens").

This reads statements, not the world: "Alice is on the billing team" and
"Bob is on the billing team" read as an update though both may be true. Keep
such memories with ``merge=False`` (or ``supersede_threshold=None`` on the
store), or word them so they do not share one statement.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import Any, Literal

__all__ = ["MERGE_THRESHOLD", "SUPERSEDE_THRESHOLD", "AddAction", "AddResult", "Change", "compare"]

AddAction = Literal["added", "merged", "superseded"]

#: The default cosine from which a memory that restates a stored one merges
#: into it: the default embedder puts reworded short facts above it and a fact
#: with a few more words (a narrower statement) below it.
MERGE_THRESHOLD = 0.93
#: The default cosine from which a stored memory is a candidate for being
#: superseded: lower than the merge threshold, since a changed name or
#: identifier moves a short text's embedding more than a reworded one.
SUPERSEDE_THRESHOLD = 0.75
#: How many of the most similar memories an add reads before deciding.
CANDIDATES = 8


class AddResult(str):
    """What an add did: the id of the memory that is current afterwards, as
    a ``str`` (so code that stores, compares or passes ids keeps working),
    with ``.action``:

    - ``"added"``: a new memory was stored (``.replaced`` is ``""``);
    - ``"merged"``: the memory restated one already stored and was merged
      into it (tags united, the higher confidence kept); the result and
      ``.replaced`` are that memory's id. Adding exactly the same memory
      again (same category and content) is merged into itself and changes
      nothing;
    - ``"superseded"``: the memory was stored and replaced the one whose id
      is ``.replaced``, which moved to the archive (``archived_reason ==
      "superseded"``, ``superseded_by`` = the result).
    """

    action: AddAction
    replaced: str

    def __new__(cls, memory_id: str, action: AddAction = "added", replaced: str = "") -> AddResult:
        result = super().__new__(cls, memory_id)
        result.action = action
        result.replaced = replaced
        return result

    @property
    def id(self) -> str:
        """The id as a plain ``str``."""
        return str(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (AddResult, (str(self), self.action, self.replaced))


# --- reading a statement -------------------------------------------------------------------

_TOKEN = re.compile(r"[$€£¥]?\w+(?:(?:[.,:/@'’+\-]|\\)\w+)*%?")
_SENTENCE_END = re.compile(r"[.!?;:]\s*$")

_NEGATIONS = frozenset(
    "not no never none nobody nothing nowhere neither nor without cannot cant dont doesnt didnt isnt arent "
    "wasnt werent wont wouldnt shouldnt couldnt mustnt hasnt havent hadnt neednt".split()
)
# A negative form read as "not" + its positive, so "forbidden" updates "allowed".
_NEGATIVE_FORMS = {
    "forbidden": "allowed", "forbid": "allow", "forbids": "allows", "prohibited": "allowed",
    "disallowed": "allowed", "banned": "allowed", "disabled": "enabled", "disable": "enable",
    "unavailable": "available", "impossible": "possible", "inactive": "active", "invalid": "valid",
    "unsupported": "supported", "unable": "able", "false": "true", "incorrect": "correct",
}
_STOPWORDS = frozenset(
    """a an the this that these those it its it's they them their there here we us our you your he him his
    she her i me my is are was were be been being am has have had having do does did doing will would shall
    should can could may might must of to in on at by for from with about as into onto over under per via
    through during before after than then so and or but if also just still now currently again already
    only very too anymore longer any some all each every both such same other which who whom whose what
    when where how why""".split()
)
_NUMBER_WORDS = {
    w: str(i) for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
} | {"thirty": "30", "forty": "40", "fifty": "50", "sixty": "60", "seventy": "70", "eighty": "80",
     "ninety": "90", "hundred": "100", "thousand": "1000", "million": "1000000", "billion": "1000000000",
     "dozen": "12", "twice": "2", "once": "1", "half": "0.5"}
_MONTHS = {
    **{m: str(i) for i, m in enumerate(
        "january february march april may june july august september october november december".split(), 1)},
    **{m: str(i) for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)},
    "sept": "9",
}
_WEEKDAYS = {
    **{d: d for d in "monday tuesday wednesday thursday friday saturday sunday".split()},
    "mon": "monday", "tue": "tuesday", "tues": "tuesday", "wed": "wednesday", "thu": "thursday",
    "thur": "thursday", "thurs": "thursday", "fri": "friday", "sat": "saturday", "sun": "sunday",
}
_RELATIVE_DATES = frozenset(
    "today tomorrow yesterday tonight weekend weekday daily weekly biweekly fortnightly monthly quarterly "
    "yearly annually hourly nightly morning afternoon evening noon midnight".split()
)
_NUMBER = re.compile(r"[$€£¥]?\d{1,3}(?:,\d{3})+(?:\.\d+)?[a-z%]{0,3}|[$€£¥]?\d+(?:[.:]\d+)?[a-z%]{0,3}")
_VERSION = re.compile(r"v\d+(?:\.\d+)*(?:[-+][\w.]+)?|\d+(?:\.\d+){2,}(?:[-+][\w.]+)?")
_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}/\d{1,2}(?:/\d{2,4})?|\d{4}/\d{1,2}/\d{1,2}")
_IDENTIFIER = re.compile(r".*(?:[._/@\\]|[a-z][A-Z]).*")


@functools.lru_cache(maxsize=8192)
def _stem(word: str) -> str:
    """A light suffix strip, the same on both sides: enough to see "opens",
    "opening" and "opened" as one word."""
    if len(word) > 4 and word.endswith("ies"):
        word = word[:-3] + "y"
    elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    for suffix in ("ing", "ed", "ly"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


class _Reading:
    """The slots and content words of one text."""

    __slots__ = ("negated", "numbers", "versions", "dates", "names", "words", "stems")

    def __init__(self, text: str) -> None:
        negations = 0
        slots: list[tuple[str, str]] = []  # (kind, value) in text order, "" for a plain word
        names: set[str] = set()
        words: set[str] = set()
        stems: set[str] = set()
        initial = True
        for match in _TOKEN.finditer(text):
            surface = match.group().replace("\u2019", "'")
            if surface.endswith(("'s", "'S")) and len(surface) > 2:
                surface = surface[:-2]
            lower = surface.lower()
            first, initial = initial, bool(_SENTENCE_END.search(text[match.end() : match.end() + 2]))
            bare = lower.replace("'", "")
            stems.add(_stem(bare))
            slot = _slot(surface, lower, bare)
            if slot is not None:
                slots.append(slot)
                continue
            slots.append(("", ""))
            if bare in _NEGATIONS or lower.endswith("n't"):
                negations += 1
            elif bare in _NEGATIVE_FORMS:
                negations += 1
                words.add(_stem(_NEGATIVE_FORMS[bare]))
            elif any(c.isdigit() for c in bare) or _IDENTIFIER.fullmatch(surface):
                names.add(lower)
            elif bare in _STOPWORDS:
                pass
            elif surface[:1].isupper() and not (first and len(bare) == 1):
                names.add(bare)
            else:
                words.add(_stem(bare))
        self.negated = negations % 2 == 1
        self.numbers: Counter[str] = Counter()
        self.versions: Counter[str] = Counter()
        self.dates: Counter[str] = Counter()
        for kind, value in _fold_dates(slots):
            if kind == "month?":  # no day next to it: the modal "may", the verb "march"
                if value not in _STOPWORDS:
                    words.add(_stem(value))
            elif kind:
                getattr(self, kind)[value] += 1
        self.names, self.words, self.stems = names, words, stems


@functools.lru_cache(maxsize=1024)
def _read(text: str) -> _Reading:
    # The stored side of a comparison is read again at every add near it.
    return _Reading(text)


def _slot(surface: str, lower: str, bare: str) -> tuple[str, str] | None:
    """The value a token states (``("numbers", "20")``...), or None for a word."""
    if _DATE.fullmatch(lower):
        return ("dates", lower)
    if _VERSION.fullmatch(lower):
        return ("versions", lower.lstrip("v"))
    if _NUMBER.fullmatch(lower):
        return ("numbers", lower.replace(",", ""))
    if bare in _NUMBER_WORDS:
        return ("numbers", _NUMBER_WORDS[bare])
    capitalised = surface[:1].isupper()
    singular = bare[:-1] if bare.endswith("s") else bare
    if singular in _WEEKDAYS and (capitalised or len(singular) > 5):
        return ("dates", _WEEKDAYS[singular])
    if bare in _MONTHS:
        if capitalised or (len(bare) > 4 and bare != "march"):
            return ("dates", "month " + _MONTHS[bare])
        # "may", "march", "jan": a month only next to a day ("may 3"), see _fold_dates.
        return ("month?", bare)
    if singular in _RELATIVE_DATES:
        return ("dates", singular)
    return None


_DAY_OR_YEAR = re.compile(r"(?:[12]?\d|3[01])(?:st|nd|rd|th)?|\d{4}")


def _fold_dates(slots: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """A day or year next to a month is part of that date ("May 3, 2024",
    "3 May"): moving a meeting from May 3 to June 10 changes one date."""
    out = list(slots)
    for i, (kind, value) in enumerate(slots):
        if kind == "month?":
            value = "month " + _MONTHS[value]
        elif kind != "dates" or not value.startswith("month "):
            continue
        parts = [value]
        for j in (i - 1, i + 1, i + 2):
            if 0 <= j < len(out) and out[j][0] == "numbers" and _DAY_OR_YEAR.fullmatch(out[j][1]):
                parts.append(out[j][1])
                out[j] = ("", "")
            elif j > i:
                break
        if kind == "dates" or len(parts) > 1:
            out[i] = ("dates", " ".join(parts))
    return out


Kind = Literal["same", "update", "different"]


class Change:
    """How a new text relates to an old one: ``kind`` is ``"same"`` (merge),
    ``"update"`` (supersede) or ``"different"`` (keep both); ``reasons`` the
    slots that changed (``negation``, ``number``, ``version``, ``date``,
    ``name``) for an update."""

    __slots__ = ("kind", "reasons")

    def __init__(self, kind: Kind, reasons: tuple[str, ...] = ()) -> None:
        self.kind = kind
        self.reasons = reasons

    def __repr__(self) -> str:
        return f"Change({self.kind!r}, {self.reasons!r})"


def compare(old: str, new: str) -> Change:
    """How ``new`` relates to ``old`` (see the module docstring)."""
    a, b = _read(old), _read(new)
    reasons: list[str] = []
    if a.negated != b.negated:
        reasons.append("negation")
    if a.numbers != b.numbers:
        reasons.append("number")
    if a.versions != b.versions:
        reasons.append("version")
    if a.dates != b.dates:
        reasons.append("date")
    # A capitalised word the other text has in any case is not a different name.
    only_a = {n for n in a.names - b.names if _stem(n) not in b.stems}
    only_b = {n for n in b.names - a.names if _stem(n) not in a.stems}
    if only_a or only_b:
        reasons.append("name")
    # The statement around the values: content words and the names both texts share.
    frame_a = a.words | {_stem(n) for n in a.names - only_a}
    frame_b = b.words | {_stem(n) for n in b.names - only_b}
    kept, dropped, added = len(frame_a & frame_b), len(frame_a - frame_b), len(frame_b - frame_a)
    union = kept + dropped + added
    overlap = 1.0 if union == 0 else kept / union
    substituted = dropped > 0 and added > 0
    if reasons:
        # An update changes one kind of value in the same statement (most content
        # words kept); two kinds at once ("the Munich office opens at 8") is
        # more often another fact than a correction.
        kinds = {"number" if r == "version" else r for r in reasons}
        if len(kinds) == 1 and overlap >= (0.6 if substituted else 0.5):
            return Change("update", tuple(reasons))
        return Change("different", tuple(reasons))
    if not substituted and overlap >= 0.5:
        return Change("same")
    return Change("different")
