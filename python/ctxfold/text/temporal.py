"""Relative time expressions ("yesterday", "last week", "three days ago")
resolved against the time a message was written, so a kept message still
says *when* after the messages around it are gone.

`resolve_dates(text, anchor)` finds every relative reference in one regular
expression pass and returns a `DateReference` per match: its span, the dates
it means (a day, or a range with inclusive ends), a granularity, a confidence
in [0, 1], or the reason it cannot be resolved. `annotate_dates(text,
anchor)` writes the resolved dates in place: ``yesterday [2023-05-07]``,
``last week [2023-04-24 to 2023-04-30]``; `with_date_note(text, anchor)`
leaves the words as written and adds one line after them,
``[dates: yesterday = 2023-05-07; last week = 2023-04-24 to 2023-04-30]``
(what the engine sends: a quote of the message stays a quote). Given a
`now`, the note also says when the message itself was written and how long
before `now` that is: ``[said 2023-06-17, 3 days ago; dates: yesterday =
2023-06-16]`` (`age_phrase`: "today", "yesterday", days under two weeks,
weeks under 60 days, calendar months under two years, then years; a message
after `now` reads "3 days after now"). The day is the message's, in its own
time zone, and `now` is read in that time zone too.

Rules:

- The anchor's calendar date is taken in the anchor's own time zone (an
  aware datetime or an ISO text with an offset); a naive datetime, an ISO
  text without an offset and epoch seconds are taken as UTC.
- Weeks start on Monday (ISO 8601). "this week" is the anchor's Monday to
  Sunday; "last week" the one before; a weekend is that week's Saturday and
  Sunday ("last weekend": the previous week's).
- "last Friday" is the latest Friday strictly before the anchor's date;
  "next Friday" the first Friday strictly after it; "this Friday" the Friday
  of the anchor's week. "on Friday" is the nearest Friday strictly before
  the anchor, or strictly after it when its sentence speaks of the future
  ("will", "going to", "have to", "plan to", ...).
- "last May" is the latest May before the anchor's month, "next May" the
  first after it, "this May" the anchor year's. "May" must be capitalised
  (the verb is not a month); other month names may be lower case.
- "N days ago" / "in N days" is a day; weeks count as 7 days (about that
  day); months and years give the whole calendar month or year.
- "a few", "several", "some", "many" are vague: unresolved, with the reason.
- "the last week" / "the next month" (past or coming stretches, not calendar
  units) and absolute dates are left alone, and a reference that an absolute
  date already follows ("yesterday (May 7)") is not annotated again.

`asked_days(question, now)` gives the periods a question asks about: its
relative references and the absolute dates it names (`named_days`:
"16.01.2024", "2024-01-16", "1/16/2024", "January 16, 2024", "16th of
January", a date without a year being the latest one on or before `now`).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from ctxfold._core import date_reference_starts
from ctxfold.errors import InvalidInputError, InvalidTypeError

__all__ = [
    "DateReference", "resolve_dates", "annotate_dates", "date_note", "with_date_note", "anchor_date",
    "strip_date_annotations", "split_date_note", "asks_about_time", "age_phrase", "said_note", "said_day",
    "without_said", "note_with_said", "text_without_said", "asked_days", "named_days",
    "noted_days",
]

# Confidence of each kind of resolution: words that name one day exactly,
# then rules that pick among readings (which Friday, about which day).
EXACT = 0.95
CALENDAR_UNIT = 0.9
COUNTED_DAYS = 0.9
COUNTED_UNITS = 0.8
NAMED_DAY = 0.8
ABOUT = 0.6
PART_OF_UNIT = 0.7
#: "a couple" is read as two, with the count's sureness scaled by this.
COUPLE = 0.6
#: `annotate_dates` writes only references at least this confident.
MIN_ANNOTATE_CONFIDENCE = 0.5

NO_TIMESTAMP = "no timestamp on the message"
VAGUE = "vague quantity"
OUT_OF_RANGE = "outside the calendar's range (years 1 to 9999)"
NOTHING_EARLIER = "the message is at the start of that week, month or year"
NOTHING_LATER = "the message is at the end of that week, month or year"

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december")
_NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40,
    "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100,
}
_VAGUE_WORDS = ("few", "several", "some", "many", "couple")
# Any word before a unit; `_number` keeps the number words (a generic word
# here is far cheaper for the regex engine than an alternation of them all).
_NUM = r"(?:\d{1,4}|a\s+couple(?:\s+of)?|couple(?:\s+of)?|a\s+few|[a-z]+)"
_UNIT = r"(?:day|week|fortnight|month|year)s?"
_WEEKDAY = "(?:" + "|".join(_WEEKDAYS) + ")"
_MONTH = "(?:" + "|".join(_MONTHS) + ")"
_END = r"(?:'s|s'|')?(?!\w)"
# Words one of which every reference holds (today, tonight, fortnight and
# the weekdays contain one): substring search finds them far faster than a
# regular expression scan of the whole text.
_HEADS = ("day", "week", "month", "year", "night", "tomorrow", "morning", "evening", "afternoon", *_MONTHS)
# What `starts_python` looks for: every reference but those opened by last / next / this holds one of these words
# (the weekdays, today, yesterday, tonight and fortnight contain one) and those three open the rest.
_START_HEADS = ("day", "week", "month", "year", "night", "tomorrow")
_OPENERS = ("last", "next", "this")
# A reference starts at most four words before its head ("in a couple of days"):
# matched on the reversed text, the groups end where the head's word and the four words before it start.
_WORDS_BEFORE = re.compile(r"(\w*)(?:\s+(\w+)(?:\s+(\w+)(?:\s+(\w+)(?:\s+(\w+))?)?)?)?")

# Matched against the lower-cased text (case-insensitive matching is slower).
_PATTERN = re.compile(
    rf"""
    (?<!\w)(?:
        (?P<fixed>the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday|today|tonight|tomorrow
            |last\s+night|this\s+(?:morning|afternoon|evening))
      | (?P<ago_n>{_NUM})\s+(?P<ago_unit>{_UNIT})\s+ago
      | (?P<from_n>{_NUM})\s+(?P<from_unit>{_UNIT})\s+from\s+(?:now|today)
      | in\s+(?P<in_n>{_NUM})\s+(?P<in_unit>{_UNIT})(?:'?\s+time)?
      | (?P<part>earlier|later)\s+this\s+(?P<part_unit>week|month|year)
      | (?<!the\s)(?P<mod>last|next|this\s+past|this\s+coming|this)\s+
            (?P<what>weekend|week|month|year|{_WEEKDAY}|{_MONTH})
      | (?P<on>on)\s+(?P<on_day>{_WEEKDAY})(?!s)
    ){_END}
    """,
    re.VERBOSE,
)
_PATTERN_ANY_CASE = re.compile(_PATTERN.pattern, re.VERBOSE | re.IGNORECASE)
_FUTURE = re.compile(
    r"\b(?:will|won't|shall|going\s+to|gonna|plan(?:s|ning)?\s+to|(?:have|has|need|needs|hope|want)\s+to|"
    r"can't\s+wait|looking\s+forward|scheduled|tomorrow|next|soon)\b|'ll\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?\n]")
# An absolute date right after a reference ("yesterday (May 7)") already says when.
_DATE_AFTER = re.compile(
    rf"""^[\s,(\-–—:]{{0,3}}(?:\d{{4}}-\d{{2}}-\d{{2}}|\d{{1,2}}[./]\d{{1,2}}(?:[./]\d{{2,4}})?
        |(?:{_MONTH}|(?:jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\.?)\s+\d{{1,2}}\b
        |\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTH}|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)\b)""",
    re.IGNORECASE | re.VERBOSE,
)
_ANNOTATION = re.compile(r" \[\d{4}-\d{2}-\d{2}(?: to \d{4}-\d{2}-\d{2})?\]")
# The line `with_date_note` adds at the end of a text: when it was said, the dates it names, or both.
_NOTE = re.compile(r"\n\[(?:said \d{4}-\d{2}-\d{2}[^\n\];]*(?:; dates: [^\n\]]*)?|dates: [^\n\]]*)\]\Z")
_SAID = re.compile(r"\[said (\d{4}-\d{2}-\d{2})[^\n\];]*(?:; |(?=\]))")
# Spans shorter than these read in the smaller unit ("13 days ago", "8 weeks ago").
AGE_DAYS, AGE_WEEKS_DAYS, AGE_MONTHS = 14, 60, 24


@dataclass(frozen=True, slots=True)
class DateReference:
    """One relative time expression in a text and what it resolves to."""

    text: str
    """The expression as written."""
    start: int
    end: int
    """Its span in the text (``text[start:end]``)."""
    first: dt.date | None
    last: dt.date | None
    """The dates it means, both ends inclusive (equal for a single day); None when unresolved."""
    granularity: str
    """``day``, ``week``, ``weekend``, ``month`` or ``year``."""
    confidence: float
    """How sure the resolution is, in [0, 1]; 0 when unresolved."""
    reason: str = ""
    """Why it is unresolved ("" when resolved)."""

    @property
    def resolved(self) -> bool:
        """Whether the reference was resolved to dates (else `reason` says why not)."""
        return self.first is not None

    @property
    def label(self) -> str:
        """The dates in ISO form: ``2023-05-07`` or ``2023-04-24 to 2023-04-30`` ("" when unresolved)."""
        if self.first is None or self.last is None:
            return ""
        if self.first == self.last:
            return self.first.isoformat()
        return f"{self.first.isoformat()} to {self.last.isoformat()}"


def anchor_date(anchor: Any) -> dt.date | None:
    """The calendar date of `anchor` in its own time zone: a datetime (naive:
    UTC), a date, an ISO 8601 text, epoch seconds (UTC), or None."""
    if anchor is None:
        return None
    if isinstance(anchor, dt.date) and not isinstance(anchor, dt.datetime):
        return anchor
    if isinstance(anchor, bool) or not isinstance(anchor, (dt.datetime, str, int, float)):
        raise InvalidTypeError(f"anchor: expected a datetime, date, ISO 8601 str, epoch seconds or None, got {type(anchor).__name__}")
    # An aware time keeps its own zone, so its date is the one its writer saw.
    return _moment(anchor, "anchor").date()


def resolve_dates(text: str, anchor: Any) -> list[DateReference]:
    """Every relative time expression in `text`, in order, resolved against
    `anchor` (see `anchor_date`); with no anchor each is unresolved with the
    reason "no timestamp on the message"."""
    if not isinstance(text, str):
        raise InvalidTypeError(f"text: expected str, got {type(text).__name__}")
    day = anchor_date(anchor)
    lower = text.lower()
    # Lower-casing keeps offsets unless a character changes length ("İ").
    if len(lower) != len(text):
        if not any(head in lower for head in _HEADS):
            return []
        return _resolve_all(text, day, _PATTERN_ANY_CASE, text, None)
    return _resolve_all(text, day, _PATTERN, lower, date_reference_starts(lower))


def asked_days(question: str, now: Any) -> list[tuple[dt.date, dt.date]]:
    """The periods a question asks about ("What did I buy 10 days ago?",
    "last Saturday", "last month", "on 16.01.2024", "on March 3"), first and
    last day, resolved against `now`: those that end on or before now's day
    (a question about the coming weekend asks about no past message); []
    without `now`."""
    day = anchor_date(now)
    if day is None:
        return []
    relative = [(ref.first, ref.last) for ref in resolve_dates(question, now)
                if ref.first is not None and ref.last is not None]
    return [(first, last) for first, last in [*relative, *named_days(question, day)] if last <= day]


_MONTH_ABBREVIATIONS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_MONTH_NAME = r"(?P<{}>(?:" + "|".join(_MONTHS) + r"|sept|" + "|".join(_MONTH_ABBREVIATIONS) + r")\.?)"
_ORDINAL = r"(?:st|nd|rd|th)?"
_YEAR = r"(?:,?\s+(?P<{}>\d{{4}}))?"
# Absolute dates as people write them: ISO (2024-01-16), day first with dots
# (16.01.2024), month first with slashes (1/16/2024, day first when the first
# number cannot be a month), "January 16(, 2024)", "16(th of) January( 2024)",
# and a range of days in one month ("April 6-7"). Numeric forms need a
# four-digit year: "11/22/63" is as often a title as a date.
_NAMED_DATE = re.compile(
    r"(?<![\d.\-/])(?P<iso_y>\d{4})-(?P<iso_m>\d{1,2})-(?P<iso_d>\d{1,2})(?![\d\-])"
    r"|(?<![\d.])(?P<dot_d>\d{1,2})\.(?P<dot_m>\d{1,2})\.(?P<dot_y>\d{4})(?!\d)"
    r"|(?<![\d/])(?P<sl_a>\d{1,2})/(?P<sl_b>\d{1,2})/(?P<sl_y>\d{4})(?![\d/])"
    r"|\b" + _MONTH_NAME.format("md_m") + r"\s+(?P<md_d>\d{1,2})" + _ORDINAL
    + r"(?:\s*[-–]\s*(?P<md_to>\d{1,2})" + _ORDINAL + r")?(?!\d|:)" + _YEAR.format("md_y")
    + r"|\b(?P<dm_d>\d{1,2})" + _ORDINAL + r"(?:\s*[-–]\s*(?P<dm_to>\d{1,2})" + _ORDINAL + r")?\s+(?:of\s+)?"
    + _MONTH_NAME.format("dm_m") + r"(?!\w)" + _YEAR.format("dm_y"),
    re.IGNORECASE,
)


def named_days(text: str, today: dt.date) -> list[tuple[dt.date, dt.date]]:
    """The absolute dates `text` names (see `_NAMED_DATE`), first and last day
    each; a date without a year is the latest such day on or before `today`.
    "May" counts only capitalised (the verb is not a month); impossible
    dates (February 30) are left out."""
    out: list[tuple[dt.date, dt.date]] = []
    for m in _NAMED_DATE.finditer(text):
        g = m.groupdict()
        try:
            if g["iso_y"]:
                first = last = dt.date(int(g["iso_y"]), int(g["iso_m"]), int(g["iso_d"]))
            elif g["dot_y"]:
                first = last = dt.date(int(g["dot_y"]), int(g["dot_m"]), int(g["dot_d"]))
            elif g["sl_y"]:
                a, b = int(g["sl_a"]), int(g["sl_b"])
                month, day = (b, a) if a > 12 else (a, b)
                first = last = dt.date(int(g["sl_y"]), month, day)
            else:
                key = "md" if g["md_m"] else "dm"
                name = g[f"{key}_m"]
                if name.lower().rstrip(".") == "may" and not name.startswith("May"):
                    continue
                month = _MONTH_ABBREVIATIONS.index(name.lower()[:3]) + 1
                day, to = int(g[f"{key}_d"]), int(g[f"{key}_to"] or g[f"{key}_d"])
                year = int(g[f"{key}_y"]) if g[f"{key}_y"] else None
                if year is None:
                    year = today.year if (month, day) <= (today.month, today.day) else today.year - 1
                first, last = dt.date(year, month, day), dt.date(year, month, to)
        except ValueError:
            continue
        if first <= last:
            out.append((first, last))
    return out


def starts_python(lower: str) -> list[int]:
    """Every position where a reference can start, in order: the starts of
    the word holding each head and of the four words before it, and where
    last, next or this occurs. The pure-Python reference of the core's
    `date_reference_starts`, which `resolve_dates` runs."""
    heads = []
    for head in _START_HEADS:
        at = lower.find(head)
        while at != -1:
            heads.append(at)
            at = lower.find(head, at + 1)
    starts = set()
    for opener in _OPENERS:
        at = lower.find(opener)
        while at != -1:
            starts.add(at)
            at = lower.find(opener, at + 1)
    if heads:
        reverse = lower[::-1]
        n = len(lower)
        for at in heads:
            for start, end in _WORDS_BEFORE.match(reverse, n - at).regs[1:]:  # type: ignore[union-attr]
                if start != -1:
                    starts.add(n - end)
    return sorted(starts)


def _resolve_all(
    text: str, day: dt.date | None, pattern: re.Pattern[str], source: str, starts: list[int] | None
) -> list[DateReference]:
    """The references `pattern.search` finds from the left, trying only `starts` when given (every position
    where a match can begin, so the result is the same)."""
    out: list[DateReference] = []
    at = 0
    candidates = iter(starts) if starts is not None else None
    while True:
        if candidates is None:
            match = pattern.search(source, at)
        else:
            match = None
            for start in candidates:
                if start >= at and (match := pattern.match(source, start)) is not None:
                    break
        if match is None:
            return out
        found = _resolve(match, text, day)
        if found is None:
            at = match.start() + 1  # not a reference ("in the day before ..."): a shorter one may start inside
            continue
        out.append(found)
        at = match.end()


def annotate_dates(text: str, anchor: Any, *, min_confidence: float = MIN_ANNOTATE_CONFIDENCE) -> str:
    """`text` with the dates of each resolved reference (at least
    `min_confidence`) written after it in brackets, once per sentence for
    the same dates ("today ... today's" annotates the first). Already annotated
    text comes back unchanged, as does any text when `anchor` is None."""
    if anchor is None:
        if not isinstance(text, str):
            raise InvalidTypeError(f"text: expected str, got {type(text).__name__}")
        return text
    parts: list[str] = []
    written: set[str] = set()
    at = 0
    for ref in resolve_dates(text, anchor):
        if _SENTENCE_END.search(text, at, ref.start):
            written.clear()  # a summary may keep any one sentence: each says its own dates
        if not ref.resolved or ref.confidence < min_confidence or ref.label in written:
            continue  # the same dates twice in one sentence say nothing new
        rest = text[ref.end:ref.end + 40]
        if _ANNOTATION.match(rest) or _DATE_AFTER.match(rest):
            continue
        written.add(ref.label)
        parts.append(text[at:ref.end])
        parts.append(f" [{ref.label}]")
        at = ref.end
    if not parts:
        return text
    parts.append(text[at:])
    return "".join(parts)


def date_note(text: str, anchor: Any, *, min_confidence: float = MIN_ANNOTATE_CONFIDENCE) -> str:
    """The dates of `text`'s resolved references (at least `min_confidence`)
    as one bracketed line, each phrase once: ``[dates: yesterday =
    2023-05-07; last week = 2023-04-24 to 2023-04-30]``; "" when there is
    none, or when `anchor` is None."""
    if anchor is None:
        if not isinstance(text, str):
            raise InvalidTypeError(f"text: expected str, got {type(text).__name__}")
        return ""
    phrases: dict[tuple[str, str], str] = {}
    for ref in resolve_dates(text, anchor):
        if not ref.resolved or ref.confidence < min_confidence:
            continue
        rest = text[ref.end:ref.end + 40]
        if _ANNOTATION.match(rest) or _DATE_AFTER.match(rest):
            continue  # the text already says the date
        phrases.setdefault((ref.text.lower(), ref.label), f"{ref.text} = {ref.label}")
    return f"[dates: {'; '.join(phrases.values())}]" if phrases else ""


def with_date_note(text: str, anchor: Any, *, min_confidence: float = MIN_ANNOTATE_CONFIDENCE,
                   said: bool = False, now: Any = None) -> str:
    """`text` as written, followed by its `date_note` on a line of its own
    (`text` itself when it has no dates to add or already ends with a note).
    `said`: the note also names the anchor's day, and with a `now` how long
    before it (`said_note`), as in ``[said 2023-06-17, 3 days ago; dates:
    yesterday = 2023-06-16]``."""
    if isinstance(text, str) and _NOTE.search(text):
        return text
    note = date_note(text, anchor, min_confidence=min_confidence)
    when = said_note(anchor, now) if said and anchor is not None else ""
    if when:
        note = note_with_said(when, note)
    return f"{text}\n{note}" if note else text


def age_phrase(then: dt.date, now: dt.date) -> str:
    """How long before the day `now` the day `then` is: "today",
    "yesterday", "N days ago" under two weeks, "N weeks ago" under 60 days,
    "N months ago" (whole calendar months) under two years, then "N years
    ago"; a day after `now` takes the same units, "N days after now"."""
    if not isinstance(then, dt.date) or not isinstance(now, dt.date):
        raise InvalidTypeError(f"then, now: expected dates, got {type(then).__name__} and {type(now).__name__}")
    then, now = _day(then), _day(now)
    days = (now - then).days
    if days == 0:
        return "today"
    if days == 1:
        return "yesterday"
    early, late = (then, now) if days > 0 else (now, then)
    span = abs(days)
    if span < AGE_DAYS:
        n, unit = span, "day"
    elif span < AGE_WEEKS_DAYS:
        n, unit = span // 7, "week"
    else:
        months = (late.year - early.year) * 12 + late.month - early.month - (late.day < early.day)
        n, unit = (months, "month") if months < AGE_MONTHS else (months // 12, "year")
    amount = f"{n} {unit}{'s' if n != 1 else ''}"
    return f"{amount} ago" if days > 0 else f"{amount} after now"


def said_note(anchor: Any, now: Any = None) -> str:
    """When a message written at `anchor` was said: ``said 2023-06-17`` (its
    day in its own time zone), with ``, 3 days ago`` (`age_phrase`) when
    `now` (a datetime, ISO 8601 text or epoch seconds, naive: UTC; or a
    date) is given, `now` read in the anchor's time zone. "" when `anchor` is None."""
    if anchor is None:
        return ""
    day = anchor_date(anchor)
    if day is None:
        return ""
    if now is None:
        return f"said {day.isoformat()}"
    if isinstance(now, dt.date) and not isinstance(now, dt.datetime):
        today = now  # a day is the same day in any zone
    else:
        zone = _zone(anchor)
        moment = _moment(now, "now")
        today = moment.astimezone(zone).date() if zone is not None else moment.date()
    return f"said {day.isoformat()}, {age_phrase(day, today)}"


def said_day(note: str) -> str:
    """The ISO day a note's ``said`` part names ("" when it has none)."""
    found = _SAID.match(note)
    return found.group(1) if found else ""


def without_said(note: str) -> str:
    """`note` without its ``said`` part: ``[dates: ...]``, or "" when that was all of it."""
    found = _SAID.match(note)
    if not found:
        return note
    rest = note[found.end():]
    return f"[{rest}" if rest != "]" else ""


def note_with_said(when: str, note: str) -> str:
    """The note that says `when` (`said_note`) before the dates of `note`
    (a `date_note`, or "" for none): ``[said 2023-06-17; dates: ...]``."""
    return f"[{when}; {note[1:]}" if note else f"[{when}]"


def text_without_said(text: str) -> str:
    """`text` with the ``said`` part of its closing note taken out; the
    note's dates stay (`without_said`)."""
    body, note = split_date_note(text)
    rest = without_said(note)
    return f"{body}\n{rest}" if rest else body


def _day(value: dt.date) -> dt.date:
    return value.date() if isinstance(value, dt.datetime) else value


def _zone(anchor: Any) -> dt.tzinfo | None:
    """The time zone a message's day is taken in (as `anchor_date` takes it)."""
    if isinstance(anchor, dt.datetime):
        return anchor.tzinfo or dt.timezone.utc
    if isinstance(anchor, str):
        return _moment(anchor, "anchor").tzinfo
    if isinstance(anchor, (int, float)) and not isinstance(anchor, bool):
        return dt.timezone.utc
    return None


def _moment(value: Any, name: str) -> dt.datetime:
    """`value` (a datetime, ISO 8601 text or epoch seconds) as an aware datetime (naive: UTC)."""
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return dt.datetime.fromtimestamp(value, dt.timezone.utc)
        except (OverflowError, OSError, ValueError):
            raise InvalidInputError(f"{name}: epoch seconds {value!r} are outside the calendar") from None
    if isinstance(value, str):
        try:
            found = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidInputError(
                f"{name}: {value!r} is not ISO 8601; use e.g. '2023-06-20T16:30:00Z', a datetime, or epoch seconds"
            ) from None
        return found if found.tzinfo else found.replace(tzinfo=dt.timezone.utc)
    raise InvalidTypeError(f"{name}: expected a datetime, ISO 8601 str or epoch seconds, got {type(value).__name__}")


_NOTED_DAYS = re.compile(r"= (\d{4}-\d{2}-\d{2})(?: to (\d{4}-\d{2}-\d{2}))?")


def noted_days(note: str) -> list[tuple[dt.date, dt.date]]:
    """The periods (first, last day) a message's date note resolves its own
    references to: ``[dates: yesterday = 2023-12-28]`` gives that one day."""
    return [(dt.date.fromisoformat(a), dt.date.fromisoformat(b or a)) for a, b in _NOTED_DAYS.findall(note)]


def split_date_note(text: str) -> tuple[str, str]:
    """`text` without the note `with_date_note` added, and that note ("" when
    there is none)."""
    found = _NOTE.search(text)
    return (text[:found.start()], found.group()[1:]) if found else (text, "")


_ABOUT_TIME = re.compile(
    r"\b(when|(the|what|which) date|how long ago|how long since|what (day|date|time|year|month|week)|which (day|date|year|month|week)"
    r"|how many (days|weeks|months|years)|yesterday|today|tomorrow|tonight|ago"
    r"|(last|next|this) (night|week|weekend|month|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b",
    re.IGNORECASE,
)


def asks_about_time(question: str) -> bool:
    """Whether `question` asks when, how long ago, or about a day it names relatively."""
    return bool(_ABOUT_TIME.search(question))


def strip_date_annotations(text: str) -> str:
    """`text` without the brackets `annotate_dates` wrote and the line
    `with_date_note` added (and without any bracketed ISO date or range of
    the same form that was there before)."""
    return _ANNOTATION.sub("", _NOTE.sub("", text))


# -- resolution ----------------------------------------------------------------------


def _resolve(match: re.Match[str], text: str, day: dt.date | None) -> DateReference | None:
    groups = match.groupdict()
    what = (groups["what"] or "").lower()
    if what == "may" and text[match.start("what"):match.end("what")] != "May":
        return None  # "this may be", "next may": the verb
    span = (text[match.start():match.end()], match.start(), match.end())
    if groups["ago_n"] is not None or groups["in_n"] is not None or groups["from_n"] is not None:
        raw_n, unit, sign = (
            (groups["ago_n"], groups["ago_unit"], -1) if groups["ago_n"] is not None
            else (groups["in_n"], groups["in_unit"], 1) if groups["in_n"] is not None
            else (groups["from_n"], groups["from_unit"], 1)
        )
        if _number(raw_n) is None:
            return None  # "many more days", "the three": not a count
        return _counted(span, raw_n, unit, sign, day)
    granularity = _granularity(groups)
    if day is None:
        return _unresolved(span, granularity, NO_TIMESTAMP)
    try:
        first, last, confidence = _calendar(groups, text, match, day)
    except _Unresolvable as why:
        return _unresolved(span, granularity, str(why))
    except (OverflowError, ValueError):
        return _unresolved(span, granularity, OUT_OF_RANGE)
    return DateReference(*span, first=first, last=last, granularity=granularity, confidence=confidence)


class _Unresolvable(Exception):
    """A reference the anchor leaves without a date; the message is the reason."""


def _unresolved(span: tuple[str, int, int], granularity: str, reason: str) -> DateReference:
    return DateReference(*span, first=None, last=None, granularity=granularity, confidence=0.0, reason=reason)


def _granularity(groups: dict[str, str | None]) -> str:
    unit = (groups["part_unit"] or groups["what"] or "").lower()
    if unit in ("week", "weekend", "month", "year"):
        return unit
    if unit in _MONTHS:
        return "month"
    return "day"


def _number(raw: str) -> tuple[int | None, float] | None:
    """The count a number phrase says and how sure it is (count None: vague;
    None: the word is no number at all)."""
    words = raw.lower().split()
    if "couple" in words:
        return 2, COUPLE
    if any(w in _VAGUE_WORDS for w in words):
        return None, 0.0
    word = words[-1]
    if word.isdigit():
        return int(word), 1.0
    if word in _NUMBER_WORDS:
        return _NUMBER_WORDS[word], 1.0
    return None


def _counted(span: tuple[str, int, int], raw_n: str, unit: str, sign: int, day: dt.date | None) -> DateReference:
    unit = unit.lower().rstrip("s")
    granularity = unit if unit in ("month", "year") else "day"
    n, sureness = _number(raw_n) or (None, 0.0)
    if n is None:
        return _unresolved(span, granularity, VAGUE)
    if day is None:
        return _unresolved(span, granularity, NO_TIMESTAMP)
    try:
        if unit in ("day", "week", "fortnight"):
            days = n * {"day": 1, "week": 7, "fortnight": 14}[unit]
            when = day + dt.timedelta(days=sign * days)
            confidence = COUNTED_DAYS if unit == "day" else ABOUT
            return DateReference(*span, first=when, last=when, granularity="day", confidence=confidence * sureness)
        if unit == "month":
            first, last = _month_range(*_shift_month(day.year, day.month, sign * n))
        else:
            first, last = _year_range(day.year + sign * n)
    except (OverflowError, ValueError):
        return _unresolved(span, granularity, OUT_OF_RANGE)
    return DateReference(*span, first=first, last=last, granularity=granularity, confidence=COUNTED_UNITS * sureness)


def _calendar(
    groups: dict[str, str | None], text: str, match: re.Match[str], day: dt.date
) -> tuple[dt.date, dt.date, float]:
    """(first, last, confidence) of a reference named by calendar words."""
    if groups["fixed"] is not None:
        word = " ".join(groups["fixed"].lower().split())
        offset = {"the day before yesterday": -2, "the day after tomorrow": 2, "yesterday": -1, "tomorrow": 1,
                  "last night": -1}.get(word, 0)
        when = day + dt.timedelta(days=offset)
        return when, when, NAMED_DAY if word == "last night" else EXACT
    monday = day - dt.timedelta(days=day.weekday())
    if groups["part"] is not None:
        later = groups["part"].lower() == "later"
        unit = (groups["part_unit"] or "").lower()
        first, last = ((monday, monday + dt.timedelta(days=6)) if unit == "week"
                       else _month_range(day.year, day.month) if unit == "month" else _year_range(day.year))
        if later:
            if day >= last:
                raise _Unresolvable(NOTHING_LATER)
            return day + dt.timedelta(days=1), last, PART_OF_UNIT
        if day <= first:
            raise _Unresolvable(NOTHING_EARLIER)
        return first, day - dt.timedelta(days=1), PART_OF_UNIT
    if groups["on"] is not None:
        target = _WEEKDAYS.index((groups["on_day"] or "").lower())
        sentence = _sentence(text, match.start(), match.end())
        if _FUTURE.search(sentence):
            when = day + dt.timedelta(days=(target - day.weekday() - 1) % 7 + 1)
        else:
            when = day - dt.timedelta(days=(day.weekday() - target - 1) % 7 + 1)
        return when, when, ABOUT
    mod = " ".join((groups["mod"] or "").lower().split())
    what = (groups["what"] or "").lower()
    step = {"last": -1, "this past": -1, "next": 1, "this coming": 1, "this": 0}[mod]
    if what in ("week", "weekend"):
        start = monday + dt.timedelta(days=7 * step)
        if what == "weekend":
            return start + dt.timedelta(days=5), start + dt.timedelta(days=6), CALENDAR_UNIT
        return start, start + dt.timedelta(days=6), CALENDAR_UNIT
    if what == "month":
        return (*_month_range(*_shift_month(day.year, day.month, step)), CALENDAR_UNIT)
    if what == "year":
        return (*_year_range(day.year + step), CALENDAR_UNIT)
    if what in _WEEKDAYS:
        target = _WEEKDAYS.index(what)
        if step < 0:
            when = day - dt.timedelta(days=(day.weekday() - target - 1) % 7 + 1)
        elif step > 0:
            when = day + dt.timedelta(days=(target - day.weekday() - 1) % 7 + 1)
        else:
            when = monday + dt.timedelta(days=target)
        return when, when, NAMED_DAY
    month = _MONTHS.index(what) + 1
    year = day.year + (step if step < 0 and month >= day.month else step if step > 0 and month <= day.month else 0)
    return (*_month_range(year, month), NAMED_DAY)


def _sentence(text: str, start: int, end: int) -> str:
    """The sentence around a span (from the last stop before it to the next one after)."""
    left = max((m.end() for m in _SENTENCE_END.finditer(text, max(0, start - 200), start)), default=max(0, start - 200))
    right = _SENTENCE_END.search(text, end, end + 200)
    return text[left:right.start() if right else end + 200]


def _shift_month(year: int, month: int, by: int) -> tuple[int, int]:
    k = year * 12 + (month - 1) + by
    return k // 12, k % 12 + 1


def _month_range(year: int, month: int) -> tuple[dt.date, dt.date]:
    first = dt.date(year, month, 1)
    following = dt.date(year + 1, 1, 1) if month == 12 else dt.date(year, month + 1, 1)
    return first, following - dt.timedelta(days=1)


def _year_range(year: int) -> tuple[dt.date, dt.date]:
    return dt.date(year, 1, 1), dt.date(year, 12, 31)
