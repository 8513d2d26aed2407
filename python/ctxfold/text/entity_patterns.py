"""The pure-Python typed entity scanner: the reference that
`ctxfold._core.EntityScanner` (what `ctxfold.text.entities.extract_mentions`
runs) must match mention for mention.

Each kind is one pass that starts on a literal or a narrow character class
(a leading ``\\b`` or a wide class makes Python's regex engine try every
position), or on substring searches for its words, guarded by a substring
test so that texts without, say, an ``@`` skip the email pass; word
boundaries are checked on the few hits instead. `claim` runs them all and
keeps the hits no earlier one overlaps; runs of capitalised words (`NAME`)
come last, read by `entities.atomic_mentions_python` against the claimed
characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

__all__ = ["Hit", "MONTH_DAY", "NAME", "WHEN", "claim"]

Hit = tuple[int, int, str]  # start, end, kind

_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_MONTH = (r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
          r"|(?:jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?)")
_ORDINAL = r"\d{1,2}(?:st|nd|rd|th)"
MONTH_DAY = (rf"(?:{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?"
             rf"|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?)")
WHEN = (rf"(?:(?:next|this|coming)\s+)?(?:{_WEEKDAY}|tomorrow|tonight|today|noon|midnight|{MONTH_DAY}"
        rf"|(?:the\s+)?{_ORDINAL}|\d{{4}}-\d{{2}}-\d{{2}}|\d{{1,2}}(?::\d{{2}})?\s*(?:am|pm)"
        r"|(?:the\s+)?end\s+of\s+(?:the\s+|this\s+|next\s+)?(?:day|week|month|quarter|year)|eod|eow"
        r"|next\s+(?:week|month|year))")

_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_EMAIL_LEFT = re.compile(r"[\w.+-]*")
_URL = re.compile(r"(?:https?://|www\.)[^\s<>()\"'`]+")
_SLASH = re.compile(r"[/\\]")
_PATH_LEFT = re.compile(r"[\w.~:/\\-]*")
_PATH_RIGHT = re.compile(r"[\w./\\-]*")
_PATH = re.compile(
    r"(?:[A-Za-z]:\\|~/|\.{1,2}/|/)(?:[\w.-]+[/\\])*[\w.-]*[A-Za-z][\w.-]*"
    r"|(?:[\w.-]+/){2,}[\w.-]*[A-Za-z][\w.-]*|(?:[\w.-]+/)+[\w-]+\.[A-Za-z]\w{0,5}"
)
_EXT = re.compile(r"\.(?:py|rs|js|ts|tsx|jsx|json|ya?ml|toml|md|txt|csv|html|css|go|java|cpp|hpp|sh|sql|log|cfg|ini|"
                  r"xml|ipynb|pdf|docx?|xlsx?)\b")
_STEM_LEFT = re.compile(r"[\w-]*")
# "[$€£¥]?\d[\d.,:/%-]*", written to start on a character class so that the regex engine skips to candidates.
_NUMBER = re.compile(r"[$€£¥\d](?:(?<=[$€£¥])\d|(?<![$€£¥]))[\d.,:/%-]*")
_VERSION = re.compile(r"v\d+(?:\.\d+)*|\d+\.\d+\.\d+(?:[-+][\w.]+)?")
_MONEY = re.compile(r"[$€£¥]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:k|m|bn|million|billion|thousand)\b)?"
                    r"|\d[\d,]*(?:\.\d+)?\s?(?:dollars|usd|eur|euros|gbp|pounds|bucks)\b", re.I)
_PERCENT = re.compile(r"\d+(?:\.\d+)?\s?(?:%|percent\b)", re.I)
_NUMERIC_DATE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{2,4}")
_TIME = re.compile(r"\d{1,2}:\d{2}(?::\d{2})?(?:\s?(?:[ap]m\b|[ap]\.m\.))?|\d{1,2}\s?(?:[ap]m\b|[ap]\.m\.)", re.I)
# The kinds above in priority order, one alternative each: one match call per number instead of five.
_NUMBER_KINDS = ("version", _VERSION), ("money", _MONEY), ("percent", _PERCENT), ("date", _NUMERIC_DATE), ("time", _TIME)
_NUMBER_KIND, _NUMBER_KIND_NOT_VERSION = (
    re.compile("|".join(f"(?P<{kind}>{'(?i:' if p.flags & re.I else '(?:'}{p.pattern}))" for kind, p in kinds))
    for kinds in (_NUMBER_KINDS, _NUMBER_KINDS[1:])
)
_DAY_BEFORE_MONTH = re.compile(r"\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?\Z", re.I)
_DATE_WORDS = frozenset(
    """january february march april may june july august september october november december jan feb mar apr jun
    jul aug sept sep oct nov dec monday tuesday wednesday thursday friday saturday sunday tomorrow today
    yesterday""".split()
)
# Each of _DATE_WORDS holds one stem (the weekdays, today and yesterday end with "day").
_DATE_STEMS = (
    ("day", ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "today", "yesterday")),
    ("tomorrow", ("tomorrow",)), ("jan", ("january", "jan")), ("feb", ("february", "feb")), ("mar", ("march", "mar")),
    ("apr", ("april", "apr")), ("may", ("may",)), ("jun", ("june", "jun")), ("jul", ("july", "jul")),
    ("aug", ("august", "aug")), ("sep", ("september", "sept", "sep")), ("oct", ("october", "oct")),
    ("nov", ("november", "nov")), ("dec", ("december", "dec")),
)
_MONTH_AT = re.compile(rf"{MONTH_DAY}|{_MONTH}\s+\d{{4}}\b", re.I)
_ORDINAL_OR_OF = re.compile(r"st|nd|rd|th|of", re.I)
_RELATIVE_BEFORE = re.compile(r"(?:next|this|last|coming)\s+\Z", re.I)
_CAPITAL_MONTHS = frozenset("January February March April June July August September October November December".split())
_CLOCK_WORD = re.compile(r"noon|midnight")
_BACKTICK = re.compile(r"`[^`\n]{1,60}`")
_CALL = re.compile(r"\(\)")
_CALL_LEFT = re.compile(r"[A-Za-z_][\w.]*\Z")
_SNAKE = re.compile(r"_")
_SNAKE_WORD = re.compile(r"[a-z]+(?:_[a-z0-9]+)+")
# The capital of a lower-upper pair ("[a-z][A-Z]" one character later), found by skipping to capitals.
_CAMEL = re.compile(r"[A-Z](?<=[a-z][A-Z])")
_CAMEL_WORD = re.compile(r"[A-Za-z][a-z0-9]*(?:[A-Z][a-z0-9]+)+")
# McGregor, MacDonald, DiCaprio, LeBron: names, not code.
_SURNAME = re.compile(r"(?:Mc|Mac|Di|De|Le|La|Van|O)[A-Z][a-z]+\Z")
_WORD_LEFT = re.compile(r"[A-Za-z0-9_]*")
NAME = re.compile(r"[A-Z](?:[a-zà-ÿ]+(?:[-'’][A-Za-z]+)?|[A-Z]{1,5}s?)(?:[ \t]+(?:(?:de|van|von|da|del|of)[ \t]+)?"
                  r"[A-Z](?:[a-zà-ÿ]+(?:[-'’][A-Za-z]+)?|[A-Z]{1,5}))*")


def _left_run(reverse: str, run: re.Pattern[str], end: int, limit: int) -> int | None:
    """Where the characters of `run` that end at `end` start, at most `limit`
    back; None when the character before `end` is not one. `reverse` is the
    text reversed: a forward match there replaces a search for a run ending
    at `end`, which tries every start in the window."""
    at = len(reverse) - end
    length = run.match(reverse, at).end() - at  # type: ignore[union-attr]
    return max(end - length, end - limit, 0) if length else None


def _free_left(text: str, start: int) -> bool:
    return start == 0 or not text[start - 1].isalnum()


def _free_right(text: str, end: int) -> bool:
    return end >= len(text) or not text[end].isalnum()


def _emails(text: str, low: str) -> Iterator[Hit]:
    at = text.find("@")
    reverse = text[::-1] if at != -1 else ""
    while at != -1:
        left = _left_run(reverse, _EMAIL_LEFT, at, 64)
        found = _EMAIL.match(text, left) if left is not None else None
        if found and found.end() > at:
            yield found.start(), found.end(), "email"
        at = text.find("@", max(at + 1, found.end() if found else 0))


def _urls(text: str, low: str) -> Iterator[Hit]:
    if "://" in text or "www." in low:
        for m in _URL.finditer(text):
            yield m.start(), m.start() + len(m.group(0).rstrip(".,;:!?)")), "url"


def _paths(text: str, low: str) -> Iterator[Hit]:
    seen_end = -1
    reverse = text[::-1]
    if "/" in text or "\\" in text:
        for m in _SLASH.finditer(text):
            if m.start() < seen_end:
                continue
            left = _left_run(reverse, _PATH_LEFT, m.start(), 80)
            start = left if left is not None else m.start()
            end = _PATH_RIGHT.match(text, m.end()).end()  # type: ignore[union-attr]
            seen_end = end
            found = _PATH.match(text, start, end)
            if found and found.group(0).rstrip("."):
                yield found.start(), found.start() + len(found.group(0).rstrip(".")), "path"
    for m in _EXT.finditer(text):
        if m.start() < seen_end:
            continue
        left = _left_run(reverse, _STEM_LEFT, m.start(), 60)
        if left is not None:
            yield left, m.end(), "path"


def _numbers(text: str, low: str) -> Iterator[Hit]:
    """Versions, money, percentages, numeric dates and clock times: every one holds a digit."""
    pos = 0
    for m in _NUMBER.finditer(text):
        start = m.start()
        if start < pos:
            continue
        if start > 0 and text[start - 1] in "vV" and _free_left(text, start - 1):
            start -= 1
        elif not _free_left(text, start) and text[start - 1] not in "$€£¥":
            continue
        found = _NUMBER_KIND.match(text, start)
        if found is not None and found.lastgroup == "version":
            value = found.group(0)
            if not _free_right(text, found.end()) or (
                value[0] != "v" and text[max(0, start - 8):start].lower() != "version " and value.count(".") < 2
            ):
                found = _NUMBER_KIND_NOT_VERSION.match(text, start)
        if found is not None:
            yield start, found.end(), found.lastgroup  # type: ignore[misc]
            pos = found.end()


def _date_words(low: str) -> Iterator[tuple[int, str]]:
    """(start, word) of each of `_DATE_WORDS` standing as a word of its own
    in `low`: a substring search per stem skips to the few candidates, where a
    regular expression would try every letter."""
    size = len(low)
    for stem, words in _DATE_STEMS:
        at = low.find(stem)
        while at != -1:
            for word in words:
                start = at + len(stem) - len(word) if stem == "day" else at
                end = start + len(word)
                if (start >= 0 and low.startswith(word, start) and (start == 0 or not low[start - 1].isalnum())
                        and (end == size or not (low[end].isalnum() or low[end] == "_"))):
                    yield start, word
                    break
            at = low.find(stem, at + 1)


def _dates(text: str, low: str) -> Iterator[Hit]:
    """Month and weekday names, today / tomorrow / yesterday, and the clock words noon and midnight."""
    for start, name in _date_words(low):
        end = start + len(name)
        word = text[start:end]
        # Both look-behinds end in white space: one character test skips most searches.
        spaced = start > 0 and text[start - 1].isspace()
        before = _DAY_BEFORE_MONTH.search(text, max(0, start - 12), start) if spaced else None
        if before and name == "may" and not _ORDINAL_OR_OF.search(before.group(0)):
            before = None  # "$50 may help": the verb, not the month
        at = _MONTH_AT.match(text, before.start() if before else start)
        if at and (before or at.end() > end):
            yield at.start(), at.end(), "date"
        elif name.endswith(("day", "morrow")):
            rel = _RELATIVE_BEFORE.search(text, max(0, start - 8), start) if spaced else None
            yield (rel.start() if rel else start), end, "date"
        elif word in _CAPITAL_MONTHS:
            yield start, end, "date"
    if "noon" in low or "midnight" in low:
        for m in _CLOCK_WORD.finditer(low):
            if _free_left(low, m.start()) and _free_right(low, m.end()):
                yield m.start(), m.end(), "time"


def _code(text: str, low: str) -> Iterator[Hit]:
    reverse = text[::-1]
    if "`" in text:
        for m in _BACKTICK.finditer(text):
            yield m.start(), m.end(), "code"
    if "()" in text:
        for m in _CALL.finditer(text):
            left = _CALL_LEFT.search(text, max(0, m.start() - 60), m.start())
            if left:
                yield left.start(), m.end(), "code"
    if "_" in text:
        for m in _SNAKE.finditer(text):
            stem = _left_run(reverse, _WORD_LEFT, m.start(), 40)
            word = _SNAKE_WORD.match(text, stem) if stem is not None else None
            if word and _free_left(text, word.start()) and _free_right(text, word.end()) and word.end() > m.end():
                yield word.start(), word.end(), "code"
    for m in _CAMEL.finditer(text):
        stem = _left_run(reverse, _WORD_LEFT, m.start(), 41)
        word = _CAMEL_WORD.match(text, stem) if stem is not None else None
        if word and _free_left(text, word.start()) and _free_right(text, word.end()) and not _SURNAME.match(word.group(0)):
            yield word.start(), word.end(), "code"


#: In priority order: where two hits overlap, the one that starts first wins, then the earlier pass.
PASSES: tuple[Callable[[str, str], Iterator[Hit]], ...] = (_emails, _urls, _paths, _numbers, _dates, _code)


def claim(text: str) -> tuple[list[Hit], bytearray]:
    """The non-overlapping hits of every kind but names, in order of their
    start, and the map of the characters they cover (1 where covered)."""
    low = text.lower()
    # Earlier passes claim their spans first; a later hit that overlaps a claimed span is dropped.
    hits = [(rank, start, -end, kind) for rank, scan_pass in enumerate(PASSES) for start, end, kind in scan_pass(text, low)]
    hits.sort()
    claimed = bytearray(len(text) + 1)
    out: list[Hit] = []
    for _rank, start, neg_end, kind in hits:
        end = -neg_end
        if end > start and claimed.find(1, start, end) == -1:
            out.append((start, end, kind))
            claimed[start:end] = b"\x01" * (end - start)
    out.sort()
    return out, claimed
