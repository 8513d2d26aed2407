"""Cross-references: pronouns ("it", "she", "they") and definite references
("that bug", "the file") resolved to the entity they most likely point back
to, by recency, agreement (a person for he/she, a thing for it) and salience
(how often the entity was mentioned). `annotate_references` adds the
antecedent's name in brackets after a reference whose antecedent is in a
message that was left out (`it [the payment service]`); the words themselves
never change, and an unresolved reference changes nothing."""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from ctxfold.text.entities import (CODE, LOCATION, ORG, OTHER, PATH, PERSON, PERSONAL, URL, USER, VERSION,
                              extract_mentions)
from ctxfold.text.entity_repository import message_text
from ctxfold.errors import InvalidInputError

__all__ = ["Reference", "resolve_references", "annotate_references"]

# Things a reference can point back to, beside people: named things and "the X" phrases.
_THING_TYPES = frozenset({ORG, LOCATION, CODE, PATH, URL, VERSION, OTHER, PERSONAL, "thing"})
_PERSON_TYPES = frozenset({PERSON, USER})
_PRONOUN = re.compile(r"\b(?:(?P<person>he|she|him|her|his)|(?P<thing>it|its)|(?P<group>they|them|their))\b", re.I)
# Head nouns of "the X" phrases worth tracking as things (what a later "it" or "that X" names).
_HEADS = (r"bug|file|issue|error|service|server|function|class|method|module|script|test|build|deploy|database|"
          r"table|query|endpoint|api|app|page|report|document|draft|email|invoice|meeting|call|project|plan|"
          r"ticket|branch|commit|release|feature|config|model|job|pipeline|car|house|apartment|flat|trip|flight|"
          r"hotel|booking|recipe|cake|book|laptop|phone|account|order|package|contract|budget|presentation")
_THING_PHRASE = re.compile(rf"\b(?:the|a|an|our|my|this|your)\s+((?:[a-z][\w-]*\s+){{0,2}}(?:{_HEADS}))\b", re.I)
_DEFINITE = re.compile(rf"\b(?:that|the|this)\s+(?P<head>{_HEADS})\b", re.I)
# A candidate further back than this many messages is not a likely antecedent.
MAX_DISTANCE = 12
# Below this score the reference is left unresolved.
MIN_SCORE = 0.2
# A runner-up within this share of the best score makes the reference ambiguous.
AMBIGUOUS = 0.8


class Reference(msgspec.Struct, frozen=True):
    """A reference in message ``message`` at [start, end) with the text it
    points to (``antecedent``, as first written) and the message the
    antecedent was last mentioned in before it."""

    message: int
    start: int
    end: int
    text: str
    antecedent: str
    antecedent_message: int
    score: float


class _Candidate:
    __slots__ = ("name", "kind", "message", "pos", "count", "key")

    def __init__(self, name: str, kind: str, message: int, pos: int, key: str) -> None:
        self.name, self.kind, self.message, self.pos, self.count, self.key = name, kind, message, pos, 1, key


def _candidates(text: str, message: int) -> list[tuple[int, str, str, str]]:
    """(position, name, type, key) of everything in ``text`` a later reference can point to."""
    out = [(m.start, m.text[0].lower() + m.text[1:] if m.type == PERSONAL else m.text, m.type, m.key)
           for m in extract_mentions(text) if (m.type in _PERSON_TYPES or m.type in _THING_TYPES) and not m.weak]
    taken = {pos for pos, _, _, _ in out}
    for m in _THING_PHRASE.finditer(text):
        if m.start() in taken:
            continue  # "my car" is already a personal entity
        article = m.group(0)[: m.start(1) - m.start()].strip().lower()
        name = f"{'the' if article in ('a', 'an') else article} {m.group(1)}"
        out.append((m.start(), name, "thing", m.group(1).lower()))
    return sorted(out)


def resolve_references(messages: Sequence[str | Mapping[str, Any]]) -> list[Reference]:
    """Every pronoun and definite reference of ``messages`` (texts or chat
    messages) that resolves to an antecedent in an earlier message, oldest first."""
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        raise InvalidInputError("messages: expected a list of texts or chat messages")
    known: dict[str, _Candidate] = {}
    out: list[Reference] = []
    for i, message in enumerate(messages):
        text = message_text(message, f"messages[{i}]")
        for start, end, reference, wants, head in _references(text):
            scored = sorted(
                ((math.exp(-(i - c.message) / 4) * (0.5 + 0.5 * min(c.count, 8) / 8) * fit, c)
                 for c in known.values() if i - c.message <= MAX_DISTANCE
                 for fit in (_fit(wants, c, head),) if fit > 0),
                key=lambda x: -x[0],
            )
            if not scored or scored[0][0] < MIN_SCORE:
                continue
            if len(scored) > 1 and scored[1][0] >= AMBIGUOUS * scored[0][0]:
                continue  # two antecedents about as likely: leave it
            score, best = scored[0]
            out.append(Reference(i, start, end, reference, best.name, best.message, round(score, 3)))
        for pos, name, kind, key in _candidates(text, i):
            c = known.get(key)
            if c is None:
                known[key] = _Candidate(name, kind, i, pos, key)
            else:
                c.count += 1
                c.message, c.pos = i, pos
    return out


def _references(text: str) -> Iterable[tuple[int, int, str, str, str]]:
    for m in _PRONOUN.finditer(text):
        yield m.start(), m.end(), m.group(0), m.lastgroup or "thing", ""
    for m in _DEFINITE.finditer(text):
        yield m.start(), m.end(), m.group(0), "definite", m.group("head").lower()


def _fit(wants: str, c: _Candidate, head: str) -> float:
    """How well the candidate agrees with the reference: 1, 0.5 for a
    capitalised name of unknown kind (a person or a thing), 0 not at all."""
    if wants == "definite":
        return 1.0 if c.kind == "thing" and c.key.split()[-1] == head else 0.0
    if c.kind == OTHER:
        return 0.5
    if wants == "person":
        return 1.0 if c.kind in _PERSON_TYPES else 0.0
    if wants == "group":
        return 1.0 if c.kind in (ORG, PERSON) else 0.5 if c.kind in ("thing", PERSONAL) else 0.0
    return 1.0 if c.kind in _THING_TYPES else 0.0


def annotate_references(messages: Sequence[str | Mapping[str, Any]], kept: Collection[int],
                        references: Sequence[Reference] | None = None) -> dict[int, str]:
    """The texts of the messages in ``kept`` with each reference whose
    antecedent's message is not in ``kept`` followed by the antecedent in
    brackets (`it [the payment service]`): message index -> new text, only
    for the messages that changed."""
    refs = resolve_references(messages) if references is None else references
    kept_set = set(kept)
    by_message: dict[int, list[Reference]] = {}
    for r in refs:
        if r.message in kept_set and r.antecedent_message not in kept_set:
            by_message.setdefault(r.message, []).append(r)
    out: dict[int, str] = {}
    for i, found in by_message.items():
        text = message_text(messages[i], f"messages[{i}]")
        for r in sorted(found, key=lambda r: r.end, reverse=True):
            text = f"{text[:r.end]} [{r.antecedent}]{text[r.end:]}"
        out[i] = text
    return out
