"""`EntityRepository`: the entities of one conversation, built message by
message from `extract_mentions`, with aliases merged ("Mel" and "Melanie",
"Melanie" and "Melanie Smith", "Melanie's"), mention spans, first and last
turn, importance, an active flag and co-occurrence relationships."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxfold.text.entities import (CRITICAL_TYPES, ENTITY_TYPES, OTHER, PERSON, USER, clause_mentions, extract_mentions,
                              normalise)
from ctxfold.errors import InvalidInputError, InvalidTypeError

__all__ = ["EntityRecord", "EntityRepository", "message_text", "critical_messages"]

# How much an entity of each type matters next to a mention count (the critical types first).
_TYPE_WEIGHT = {t: 0.5 for t in ENTITY_TYPES} | {
    "user_identity": 1.0, "task_goal": 1.0, "temporal_constraint": 0.9, "commitment": 0.9,
    "person": 0.7, "organisation": 0.6, "location": 0.6, "date": 0.6, "money": 0.6,
}
# Names that can stand for one another: a shorter form of a person's or proper noun's name.
_NAME_TYPES = (PERSON, OTHER)
_MIN_SHORT_FORM = 3


@dataclass
class EntityRecord:
    """One entity of a conversation. ``mentions`` are (message index, start,
    end) spans; ``aliases`` every key it was mentioned by."""

    id: str
    name: str
    type: str
    aliases: set[str] = field(default_factory=set)
    mentions: list[tuple[int, int, int]] = field(default_factory=list)
    first_turn: int = 0
    last_turn: int = 0

    @property
    def count(self) -> int:
        return len(self.mentions)

    def messages(self) -> list[int]:
        """The indices of the messages that mention it, oldest first, once each."""
        return sorted({m for m, _, _ in self.mentions})


def message_text(message: str | Mapping[str, Any], where: str = "message") -> str:
    """The text of a message: a string, or an OpenAI-style dict's string
    content or text parts (tool calls and images carry no entity text)."""
    if isinstance(message, str):
        return message
    if not isinstance(message, Mapping):
        raise InvalidTypeError(f"{where}: expected str or a message dict, got {type(message).__name__}")
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content or ""
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, Mapping) and isinstance(p.get("text"), str))
    raise InvalidTypeError(f"{where}['content']: expected str, a list of parts or None, got {type(content).__name__}")


class EntityRepository:
    """The entities of one conversation. ``add`` one message per turn (or
    build it with ``from_messages``); lookups take any alias.

    - ``active_turns``: an entity mentioned within this many of the latest
      turns is active;
    - ``ner``: an `OnnxNer` whose people, organisations and places replace
      the rule-based names (None: rules only).
    """

    def __init__(self, active_turns: int = 10, ner: Any = None) -> None:
        if not isinstance(active_turns, int) or active_turns < 1:
            raise InvalidInputError(f"active_turns: must be an int >= 1, got {active_turns!r}")
        if ner is not None and not callable(ner):
            raise InvalidTypeError(f"ner: expected an OnnxNer (callable on a text) or None, got {type(ner).__name__}")
        self.active_turns = active_turns
        self.ner = ner
        self.turns = 0
        self._records: dict[str, EntityRecord] = {}
        self._by_key: dict[str, str] = {}
        # Name aliases by their first three letters: where shorter and longer forms of a name meet.
        self._by_stem: dict[str, set[str]] = {}
        self._pairs: Counter[tuple[str, str]] = Counter()
        self._pairs_of: dict[str, set[tuple[str, str]]] = {}
        self._roles: list[str] = []
        self._made = 0

    @classmethod
    def from_messages(cls, messages: Iterable[str | Mapping[str, Any]], active_turns: int = 10,
                      ner: Any = None) -> EntityRepository:
        repo = cls(active_turns, ner)
        for i, message in enumerate(messages):
            repo.add(message, where=f"messages[{i}]")
        return repo

    # ---- building ----------------------------------------------------------------------

    def add(self, message: str | Mapping[str, Any], *, where: str = "message") -> list[str]:
        """Record the entities of the next message (turn ``self.turns``);
        the ids it mentions, in order of first mention."""
        text = message_text(message, where)
        turn = self.turns
        self.turns += 1
        self._roles.append(message.get("role", "") if isinstance(message, Mapping) else "")
        seen: dict[str, None] = {}
        if self.ner is None:
            mentions = extract_mentions(text)
        else:
            from ctxfold.text.ner import extract_mentions_with

            mentions = extract_mentions_with(text, self.ner)
        for m in mentions:
            if m.weak and m.key not in self._by_key and self._alias_of(m.key) is None:
                continue
            record = self._resolve(m.key, m.type, m.text)
            if m.type == PERSON and record.type == OTHER:
                record.type = PERSON  # a person cue anywhere types the entity
            record.mentions.append((turn, m.start, m.end))
            record.last_turn = turn
            self._remember(m.key, record)
            seen[record.id] = None
        ids = list(seen)
        for a in range(len(ids)):
            for b in range(a + 1, len(ids)):
                self._pair(ids[a], ids[b], 1)
        return ids

    def _pair(self, a: str, b: str, n: int) -> None:
        pair = (a, b) if a < b else (b, a)
        self._pairs[pair] += n
        self._pairs_of.setdefault(a, set()).add(pair)
        self._pairs_of.setdefault(b, set()).add(pair)

    def _remember(self, key: str, record: EntityRecord) -> None:
        record.aliases.add(key)
        self._by_key[key] = record.id
        if record.type in _NAME_TYPES and len(key) >= _MIN_SHORT_FORM:
            self._by_stem.setdefault(key[:_MIN_SHORT_FORM], set()).add(key)

    def _name_aliases(self, key: str) -> list[tuple[str, str]]:
        """(alias, id) of the known names that share ``key``'s first three letters."""
        return [(a, self._by_key[a]) for a in self._by_stem.get(key[:_MIN_SHORT_FORM], ())
                if self._records[self._by_key[a]].type in _NAME_TYPES]

    def _resolve(self, key: str, kind: str, text: str) -> EntityRecord:
        found = self._by_key.get(key)
        if found is not None:
            return self._records[found]
        if kind in _NAME_TYPES:
            alias = self._alias_of(key)
            if alias is not None:
                return alias
        self._made += 1
        record = EntityRecord(id=f"e{self._made}", name=text, type=kind, first_turn=self.turns - 1)
        self._records[record.id] = record
        if kind in _NAME_TYPES:
            self._absorb_shorter(record, key)
        return record

    def _alias_of(self, key: str) -> EntityRecord | None:
        """The one known person ``key`` is a shorter form of: the first name
        of a full name, or a prefix of a single name ("mel" of "melanie")."""
        if " " in key or len(key) < _MIN_SHORT_FORM:
            return None
        candidates = {
            rid for alias, rid in self._name_aliases(key)
            if alias != key and (alias.split(" ", 1)[0] == key or (" " not in alias and alias.startswith(key)))
        }
        if len(candidates) != 1:
            return None
        found = self._records[candidates.pop()]
        return found if found.type == PERSON else None

    def _absorb_shorter(self, record: EntityRecord, key: str) -> None:
        """A longer name arrives after its short form: the short form's entity
        joins it ("Mel" seen, then "Melanie"), when exactly one matches and
        one of the two is known to be a person (not "Mark" and "Markdown")."""
        first = key.split(" ", 1)[0]
        shorter = {
            rid for alias, rid in self._name_aliases(first)
            if rid != record.id and " " not in alias and (alias == first or first.startswith(alias))
        }
        if len(shorter) != 1 or PERSON not in (record.type, self._records[next(iter(shorter))].type):
            return
        old = self._records.pop(shorter.pop())
        record.mentions = old.mentions + record.mentions
        record.aliases |= old.aliases
        record.first_turn = old.first_turn
        if old.type == PERSON:
            record.type = PERSON
        for alias in old.aliases:
            self._remember(alias, record)
        for a, b in self._pairs_of.pop(old.id, set()):
            n = self._pairs.pop((a, b), 0)
            other = b if a == old.id else a
            self._pairs_of.get(other, set()).discard((a, b))
            if other != record.id and n:
                self._pair(other, record.id, n)

    # ---- reading -----------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(list(self._records.values()))

    def get(self, name_or_id: str) -> EntityRecord | None:
        """The entity with this id, or mentioned by this name or alias (any
        case), or the one person this is the first name or short form of."""
        if name_or_id in self._records:
            return self._records[name_or_id]
        key = normalise(name_or_id)
        found = self._by_key.get(key)
        return self._records[found] if found is not None else self._alias_of(key)

    def is_active(self, record: EntityRecord) -> bool:
        return record.last_turn >= self.turns - self.active_turns

    def importance(self, record: EntityRecord) -> float:
        """In [0, 1]: the type's weight, raised with the mention count (up to
        ten mentions), halved when the entity is no longer active."""
        weight = _TYPE_WEIGHT.get(record.type, 0.5) * (0.5 + 0.5 * math.log1p(min(record.count, 10)) / math.log1p(10))
        return weight if self.is_active(record) else weight * 0.5

    def active(self) -> list[EntityRecord]:
        return [r for r in self._records.values() if self.is_active(r)]

    def related(self, name_or_id: str) -> list[tuple[EntityRecord, int]]:
        """The entities mentioned in the same messages as this one, with how often, most often first."""
        record = self.get(name_or_id)
        if record is None:
            return []
        out = [(self._records[b if a == record.id else a], n) for (a, b), n in self._pairs.items()
               if record.id in (a, b)]
        return sorted(out, key=lambda x: (-x[1], x[0].id))

    def relationships(self) -> dict[tuple[str, str], int]:
        """Co-occurrence counts by pair of ids (the smaller id first)."""
        return dict(self._pairs)

    def critical_messages(self, roles: Sequence[str] | None = ("user", "")) -> dict[int, list[str]]:
        """For each active entity of a critical type (user identity, task
        goal, commitment, temporal constraint; user identity even when no
        longer active), the latest message that
        mentions it (only messages of ``roles``; None for any role): message
        index -> entity ids."""
        out: dict[int, list[str]] = {}
        for record in self._records.values():
            # Who the user is stays critical however long ago it was said.
            if record.type not in CRITICAL_TYPES or not (self.is_active(record) or record.type == "user_identity"):
                continue
            turns = [t for t in record.messages() if roles is None or self._roles[t] in roles]
            if turns:
                out.setdefault(turns[-1], []).append(record.id)
        return out


def critical_messages(messages: Sequence[str | Mapping[str, Any]], active_turns: int = 10,
                      roles: Sequence[str] | None = ("user", "")) -> dict[int, list[str]]:
    """`EntityRepository.critical_messages` from the clause patterns alone
    (no names, no aliases): what the engine calls on every request. Keys are
    the critical mentions' normalised texts instead of entity ids."""
    latest: dict[str, int] = {}
    last_seen: dict[str, int] = {}
    kinds: dict[str, str] = {}
    for i, message in enumerate(messages):
        role = message.get("role", "") if isinstance(message, Mapping) else ""
        for m in clause_mentions(message_text(message, f"messages[{i}]")):
            if m.type not in CRITICAL_TYPES:
                continue
            last_seen[m.key] = i
            kinds[m.key] = m.type
            if roles is None or role in roles:
                latest[m.key] = i
    out: dict[int, list[str]] = {}
    for key, i in latest.items():
        if last_seen[key] >= len(messages) - active_turns or kinds[key] == USER:
            out.setdefault(i, []).append(key)
    return out
