"""The conversation arc: a compact model of where a conversation stands.

- topics: contiguous topic segments of the messages (``segment_dialogue``:
  ``ctxfold.segment`` over the similarity of their vectors, with a prior on
  where a dialogue changes topic), each with its span and key terms;
- open questions: a question the user asked that no later message from
  someone else addresses (rule in `open_questions`);
- decisions: sentences in decision language ("we decided", "let's go with",
  "I'll use", "agreed", ...);
- actions: commitments ("I will X", "TODO: X") pending until a later
  completion ("done", "I fixed X") is matched to them;
- focus: the last topic, its key terms and its entities.

`build_arc` makes it from messages; `ConversationArc.to_text` renders it as
the engine's ``conversation_arc`` layer. Regular expressions, term overlap
and one segmentation; per-message facts are cached by the engine, which
builds the arc when its report's ``arc`` is first read.
"""

from __future__ import annotations

import functools
import heapq
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import msgspec
import numpy as np

from ctxfold.text.entities import extract_entities
from ctxfold.errors import InvalidInputError, InvalidTypeError

__all__ = [
    "Topic", "Question", "Decision", "Action", "Focus", "ConversationArc", "build_arc",
    "MessageFacts", "message_facts", "split_sentences", "content_terms", "arc_of", "MESSAGES_PER_TOPIC",
]

#: Messages per topic when the caller does not say how many topics there are.
MESSAGES_PER_TOPIC = 12
# Longest quoted sentence in the rendered arc, in characters.
_QUOTE_CHARS = 160

_STOP = frozenset(
    """a about above after again against all also am an and any are aren't as at be because been before being
    below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during
    each few for from further get got had hadn't has hasn't have haven't having he he'd he'll he's her here
    here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself
    just let let's like me more most much must my myself no nor not now of off ok okay on once one only or other
    ought our ours ourselves out over own really same shall she she'd she'll she's should shouldn't so some such
    sure than thank thanks that that's the their theirs them themselves then there there's these they they'd
    they'll they're they've this those though through to too under until up us use used using very want was
    wasn't we we'd we'll we're we've well were weren't what what's when when's where where's which while who
    who's whom why why's will with won't would wouldn't yeah yes yet you you'd you'll you're you've your yours
    yourself yourselves hi hello hey great good know think going go make need also maybe something things thing
    would like lot really way want still even back right new first last time see say said tell please""".split()
)
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_'+#.-]*[A-Za-z0-9+#]|[A-Za-z]")
# A sentence ends at . ! ? followed by a space or the end ("render.com" and "v1.2" stay whole), or at a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\s*\n\s*")
_CODE_BLOCK = re.compile(r"```.*?(?:```|$)", re.S)

_QUESTION_WORD = re.compile(
    r"^\s*(who|whom|whose|what|when|where|which|why|how|did|do|does|was|were|is|are|has|have|had|can|could|"
    r"should|would|will|shall|may|might)\b",
    re.I,
)
# The cue patterns run on lower-cased text: case-insensitive matching costs several times more.
# Decision language: a choice made, by either side.
_DECISION = re.compile(
    r"\b(we(?:'ve| have)? decided|i(?:'ve| have)? decided|decided to|decision(?: is|:)|let'?s go with|let'?s use|"
    r"let'?s stick with|we(?:'ll| will) (?:go with|use|stick with)|i(?:'ll| will) (?:go with|use|stick with)|"
    r"(?:we|i) (?:chose|picked(?! up)|settled on|went with|opted for)|going with|agreed|we agree|settled on|"
    r"the plan is)\b",
)
# A commitment to do something later ("I will X", "TODO: X"), not a choice.
_PENDING = re.compile(
    r"\b(?:i|we)(?:'ll| will| shall|'m going to| am going to|'re going to| are going to| need to| have to| must)"
    r"\s+(?!be\b|have\b|see\b|let\b|go with\b|use\b|stick with\b|the\b|a\b|an\b|my\b|our\b|your\b|"
    # what an answer does as it is written ("I'll explain", "I'll provide an example") is no promise
    r"(?:also\s+|now\s+)?(?:provide|show|explain|give|walk|outline|help|guide|break|cover|focus|answer|share|suggest|"
    r"recommend|highlight|list|summari[sz]e|describe|demonstrate|illustrate|assume|start by|begin)\b)(\w+)|"
    r"\b(?:todo|to-do|action item)s?\b\s*[:\-]",
)
# From the user a note to self; from the assistant advice ("Next steps: keep practising").
_REMINDER = re.compile(r"\b(?:remind me to|don't forget to|remember to)\b|\bnext steps?\b\W*:")
# Past tenses that report a state of mind, not a finished task ("I needed", "we tried").
_NOT_DONE = (
    r"need|want|us|lik|lov|hat|tri|hop|wonder|notic|start|ask|plann|expect|decid|prefer|realiz|realis|enjoy|"
    r"seem|wish|hear|learn|mention|talk|consider|look|feel|stay|play|watch|visit|work|live|travel|agre"
)
_COMPLETED = re.compile(
    r"^\W*(?:done|fixed|finished|completed|resolved|sorted|all set)\b|"
    r"\b(?:i|we)(?:'ve| have)?\s+(?:just\s+|already\s+|finally\s+|now\s+)?"
    rf"(?:(?!(?:{_NOT_DONE})ed\b)[a-z]{{3,}}ed|did|done|sent|wrote|written|ran|bought|built|made|paid|put|"
    r"set up|got it|took care)\b|"
    r"\b(?:is|are|has been|have been|was|were)\s+(?:now\s+)?(?:done|fixed|finished|completed|resolved|"
    r"merged|deployed|sent|booked|submitted|sorted)\b",
)
# Completions that stand on their own, without a matching commitment.
_PLAINLY_DONE = re.compile(
    r"^\W*(?:done|fixed|finished|completed|resolved|all set)\b(?!\W*:)|"
    r"\b(?:i|we)(?:'ve| have)?\s+(?:just\s+|already\s+|finally\s+|now\s+)?"
    r"(?:fixed|finished|completed|merged|deployed|submitted|resolved|implemented|shipped)\b|"
    r"\b(?:is|are|has been|have been)\s+(?:now\s+)?(?:done|fixed|finished|completed|resolved|merged|deployed)\b",
)
# "once the issues are resolved", "you should be able to ensure it is deployed": a condition, not a report.
_CONDITIONAL = re.compile(r"\b(?:if|until|unless|when|whenever|once|after|before|should|would|could|can|make sure|ensure)\b")
_BARE_DONE = re.compile(r"^\W*(?:done|fixed|finished|completed|all set|sorted)\W*$")


class Topic(msgspec.Struct, frozen=True, kw_only=True):
    """A contiguous run of messages about one thing."""

    start: int
    """Index of its first message."""
    end: int
    """Index one past its last message."""
    first_id: str
    last_id: str
    terms: tuple[str, ...]
    """Its key terms: frequent in it, rare in the other topics."""


class Question(msgspec.Struct, frozen=True, kw_only=True):
    """A question no later message addresses; `index` is its message's position in the input."""

    index: int
    id: str
    text: str


class Decision(msgspec.Struct, frozen=True, kw_only=True):
    """A sentence (or clause) in decision language, and the message it is in."""

    index: int
    id: str
    role: str
    text: str


class Action(msgspec.Struct, kw_only=True):
    """A commitment and, once a later message reports it done, that message;
    or a completion reported plainly with no commitment before it."""

    index: int
    id: str
    role: str
    text: str
    status: str
    """"pending" or "completed"."""
    done_index: int | None = None
    """For a completed action: the message that reported it done."""
    done_text: str = ""


class Focus(msgspec.Struct, frozen=True, kw_only=True):
    """What the conversation is about now: the last topic and its entities."""

    topic: int
    terms: tuple[str, ...]
    entities: tuple[str, ...]


class ConversationArc(msgspec.Struct, kw_only=True):
    """Topic stack, open questions, decisions, actions and focus of a conversation."""

    message_count: int
    topics: list[Topic] = msgspec.field(default_factory=list)
    open_questions: list[Question] = msgspec.field(default_factory=list)
    decisions: list[Decision] = msgspec.field(default_factory=list)
    actions: list[Action] = msgspec.field(default_factory=list)
    focus: Focus | None = None

    @property
    def pending(self) -> list[Action]:
        """The actions not yet reported done."""
        return [a for a in self.actions if a.status == "pending"]

    @property
    def completed(self) -> list[Action]:
        """The actions a later message reports done."""
        return [a for a in self.actions if a.status == "completed"]

    def to_dict(self) -> dict[str, Any]:
        """The arc as plain JSON-ready values."""
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]

    def to_text(self, *, limit: int = 6) -> str:
        """The arc as a few short lines, most useful first (focus, open
        questions, pending actions, decisions, completed actions, earlier
        topics), so a layer cut to its budget loses the least useful. At most
        `limit` entries per kind, the most recent."""
        lines: list[str] = []
        if self.focus is not None and self.topics:
            t = self.topics[self.focus.topic]
            what = ", ".join(self.focus.terms) or "(no key terms)"
            lines.append(f"Current focus (messages {t.start}-{t.end - 1}): {what}")
            if self.focus.entities:
                lines.append(f"  entities: {', '.join(self.focus.entities)}")
        sections = (
            ("Open questions", [f"[{q.index}] {_quote(q.text)}" for q in self.open_questions]),
            ("Pending actions", [f"[{a.index} {a.role}] {_quote(a.text)}" for a in self.pending]),
            ("Decisions", [f"[{d.index} {d.role}] {_quote(d.text)}" for d in self.decisions]),
            ("Completed", [f"[{a.index}->{a.done_index}] {_quote(a.text)}" for a in self.completed]),
        )
        for title, entries in sections:
            if entries:
                more = f" ({len(entries) - limit} earlier not shown)" if len(entries) > limit else ""
                lines.append(f"{title}{more}:")
                lines += [f"- {e}" for e in entries[-limit:]]
        earlier = self.topics[:-1]
        if earlier:
            shown = earlier[-limit:]
            more = f" ({len(earlier) - len(shown)} earlier not shown)" if len(earlier) > len(shown) else ""
            lines.append(f"Earlier topics, newest last{more}:")
            lines += [f"- messages {t.start}-{t.end - 1}: {', '.join(t.terms)}" for t in shown]
        return "\n".join(lines)


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _QUOTE_CHARS else text[: _QUOTE_CHARS - 3].rstrip() + "..."


def split_sentences(text: str) -> list[str]:
    """Sentences of `text` (code blocks left out), stripped, non-empty."""
    text = _CODE_BLOCK.sub(" ", text)
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def content_terms(text: str) -> list[str]:
    """Lower-cased words of `text` that carry meaning (no stop words), lightly stemmed."""
    return [_stem(w) for w in _words(text)]


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in _STOP]


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    # Enough to match "fix" / "fixed" / "fixing" between a promise and its report.
    for suffix in ("ing", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


def _is_question(sentence: str) -> bool:
    return sentence.rstrip().endswith("?") or (bool(_QUESTION_WORD.match(sentence)) and len(sentence.split()) > 2
                                                and not sentence.rstrip().endswith("."))


def _speaker(message: dict[str, Any]) -> tuple[str, str]:
    return str(message.get("role", "")), str(message.get("name") or "")


class MessageFacts(NamedTuple):
    """What the arc reads from one message's text (independent of the rest,
    so the engine caches it by text)."""

    words: tuple[str, ...]
    """Content words, lower-cased, in order."""
    stems: tuple[str, ...]
    """The same words stemmed."""
    questions: tuple[str, ...]
    """Its question sentences."""
    cues: tuple[tuple[str, str], ...]
    """(kind, sentence) in order; kind: decision, completed, pending or reminder
    (decision:we and pending:we when the cue is "we will" and the like)."""


def message_facts(text: str) -> MessageFacts:
    """The words, questions and cue sentences of one message's text."""
    words = tuple(_words(text))
    questions: list[str] = []
    cues: list[tuple[str, str]] = []
    low = _lower(text)
    maybe_question = "?" in text or _QUESTION_START.search(low) is not None
    maybe_cue = any(p.search(low) for p in _CUES)
    if maybe_question or maybe_cue:
        for sentence in split_sentences(text):
            if _is_question(sentence):
                questions.append(sentence)
                continue
            if not maybe_cue:
                continue
            s = _lower(sentence)
            if (m := _DECISION.search(s)) is not None:
                cues.append(("decision" + _we(m.group(0)), _clause(sentence, s, m)))
            elif (m := _COMPLETED.search(s)) is not None:
                cues.append(("completed", _clause(sentence, s, m)))
            elif (m := _pending(s)) is not None:
                cues.append(("pending" + _we(m.group(0)), _clause(sentence, s, m)))
            elif (m := _REMINDER.search(s)) is not None:
                cues.append(("reminder", _clause(sentence, s, m)))
    return MessageFacts(words, tuple(map(_stem, words)), tuple(questions), tuple(cues))


def _clause(sentence: str, low: str, match: re.Match[str]) -> str:
    """A long run-on sentence cut to the clause around the cue (between
    commas or semicolons); `match` is on `low`, the sentence lower-cased."""
    if len(sentence) <= _QUOTE_CHARS or len(low) != len(sentence):
        return sentence
    start = max(low.rfind(", ", 0, match.start()), low.rfind("; ", 0, match.start()))
    ends = [e for e in (low.find(", ", match.end()), low.find("; ", match.end())) if e >= 0]
    clause = sentence[start + 2 if start >= 0 else 0 : min(ends) if ends else len(sentence)].strip()
    return re.sub(r"^(?:and|but|so|or)\s+", "", clause, flags=re.I)


def _we(cue: str) -> str:
    # "we'll use X", "let's use X" from an assistant is a tutorial's voice ("we'll add a route"), not a choice or a promise.
    return ":we" if cue.startswith(
        ("we'll", "we will", "we're going", "we are going", "we need", "we have", "we must", "we shall", "let's", "lets")
    ) else ""


def open_questions(facts: Sequence[MessageFacts], speakers: Sequence[tuple[str, str]], ids: Sequence[str]) -> list[Question]:
    """User questions that no later message addresses.

    A question is a sentence ending in "?" (or opening with a question word
    and not ending in "."), asked in a user message before the last one (the
    last user message is the current turn, not history). A later message
    from another speaker addresses it when it shares at least half of the
    question's content terms, or when it is the first reply from another
    speaker and shares at least one. A question without content terms
    ("really?", "how are you?") is addressed by any later reply."""
    last_user = max((i for i, (role, _) in enumerate(speakers) if role == "user"), default=-1)
    terms: list[set[str] | None] = [None] * len(facts)

    def terms_of(j: int) -> set[str]:
        found = terms[j]
        if found is None:
            found = terms[j] = set(facts[j].stems)
        return found

    found: list[Question] = []
    for i, f in enumerate(facts):
        if speakers[i][0] != "user" or i >= last_user or not f.questions:
            continue
        replies = [j for j in range(i + 1, len(facts)) if speakers[j] != speakers[i]]
        for q in f.questions:
            wanted = set(content_terms(q))
            need = max(1, math.ceil(len(wanted) / 2))
            answered = bool(replies) and (
                not wanted
                or bool(wanted & terms_of(replies[0]))
                or any(len(wanted & terms_of(j)) >= need for j in replies)
            )
            if not answered:
                found.append(Question(index=i, id=ids[i], text=q))
    return found


# Whether a message can hold any decision, commitment or completion at all (most cannot).
_CUES = (
    _DECISION, _REMINDER, _COMPLETED,
    re.compile(r"\b(?:i|we)(?:'ll| will| shall|'m going to| am going to|'re going to| are going to| need to| have to| must)\b"
               r"|\b(?:todo|to-do|action item|done|fixed|finished|completed|resolved|sorted|all set)\b"),
)
_QUESTION_START = re.compile(_QUESTION_WORD.pattern.replace("^\\s*", "(?:^|[.!?\\n]\\s*)"), re.M)
# "do I need to", "if we have to": asked or supposed, not promised.
_NOT_PROMISED_AFTER = frozenset("do did should would could can what if whether".split())


def _pending(sentence: str) -> re.Match[str] | None:
    for m in _PENDING.finditer(sentence):
        before = sentence[: m.start()].split()[-1:]
        if not before or before[0] not in _NOT_PROMISED_AFTER:
            return m
    return None


def _lower(text: str) -> str:
    return text.lower().replace("\u2019", "'")


def decisions_and_actions(
    facts: Sequence[MessageFacts], roles: Sequence[str], ids: Sequence[str]
) -> tuple[list[Decision], list[Action]]:
    """Decision sentences, and actions.

    A commitment ("I will X", "TODO: X"; "remember to X" from the user only,
    from the assistant it is advice) is pending until a later completion
    sentence shares at least two of its content terms (or all, if it has
    one): the latest such commitment is marked completed. A bare "done"
    completes the latest pending action. A completion matching none is listed
    on its own only when it says so plainly ("fixed", "I finished X", "X is
    done"), not for any past tense ("I pruned the roses")."""
    decisions: list[Decision] = []
    actions: list[Action] = []
    for i, f in enumerate(facts):
        for kind, sentence in f.cues:
            if kind.endswith(":we"):
                if roles[i] == "assistant":
                    continue
                kind = kind[:-3]
            if kind == "decision":
                decisions.append(Decision(index=i, id=ids[i], role=roles[i], text=sentence))
            elif kind == "completed":
                _complete(actions, i, ids[i], roles[i], sentence)
            elif kind == "pending" or (kind == "reminder" and roles[i] == "user"):
                actions.append(Action(index=i, id=ids[i], role=roles[i], text=sentence, status="pending"))
    return decisions, actions


def _complete(actions: list[Action], index: int, item_id: str, role: str, sentence: str) -> None:
    pending = [a for a in actions if a.status == "pending" and a.index < index]
    match: Action | None = None
    low = _lower(sentence)
    if _BARE_DONE.match(low):
        match = pending[-1] if pending else None
    else:
        said = set(content_terms(sentence))
        best = 0
        for a in pending:
            promised = set(content_terms(a.text))
            shared = len(said & promised)
            if shared >= min(2, len(promised)) and shared >= best and shared > 0:  # ties: the latest commitment
                best, match = shared, a
    if match is not None:
        match.status, match.done_index, match.done_text = "completed", index, sentence
    elif _PLAINLY_DONE.search(low) and not _CONDITIONAL.search(low):
        actions.append(Action(index=index, id=item_id, role=role, text=sentence, status="completed",
                              done_index=index, done_text=sentence))


def _topics(texts: Sequence[str], facts: Sequence[MessageFacts], ids: Sequence[str], vectors: np.ndarray | None,
            n_topics: int | None) -> list[Topic]:
    # Imported here: the dialogue module reads words with this module's helpers.
    from ctxfold.text.dialogue import segment_dialogue

    n = len(facts)
    if n == 0:
        return []
    k = n_topics if n_topics is not None else max(1, round(n / MESSAGES_PER_TOPIC))
    k = max(1, min(k, n))
    bounds: list[int] = []
    if k > 1 and vectors is not None:
        bounds = segment_dialogue(texts, vectors, k, terms=[f.stems for f in facts]).tolist()
    edges = [0, *bounds, n]
    spans = [(a, b) for a, b in zip(edges, edges[1:]) if b > a]
    counts = []
    df: Counter[str] = Counter()
    for a, b in spans:
        c: Counter[str] = Counter()
        for i in range(a, b):
            c.update(facts[i].stems)
        counts.append(c)
        df.update(c.keys())
    topics = []
    for (a, b), c in zip(spans, counts):
        # Key terms: frequent here (more than once, unless the topic is one message), rare in other topics.
        candidates = [(t, f) for t, f in c.items() if f > 1 or b - a == 1]
        best = heapq.nsmallest(
            5, candidates, key=lambda tf: (-(1 + math.log(tf[1])) * math.log(1 + len(spans) / df[tf[0]]), tf[0])
        )
        topics.append(Topic(start=a, end=b, first_id=ids[a], last_id=ids[b - 1], terms=_spellings([t for t, _ in best], facts[a:b])))
    return topics


def _spellings(stems: list[str], facts: Sequence[MessageFacts]) -> tuple[str, ...]:
    """Each stem as first written in the topic ("postgres", not "postgre")."""
    wanted = dict.fromkeys(stems, "")
    missing = len(wanted)
    for f in facts:
        for w, t in zip(f.words, f.stems):
            if wanted.get(t) == "":
                wanted[t] = w
                missing -= 1
                if not missing:
                    return tuple(wanted.values())
    return tuple(w or t for t, w in wanted.items())


_LOWER_WORD = re.compile(r"(?<![\w.])[a-z]+(?![\w.])")
_BULLET = re.compile(r"^[\W\d_]+")


def _focus(texts: Sequence[str], topics: list[Topic], top: int = 6) -> Focus | None:
    if not topics:
        return None
    last = topics[-1]
    mentions: Counter[str] = Counter()
    for i in range(last.start, last.end):
        # Without each sentence's first word: a capitalised opener ("Agreed", "Next") is no name.
        inside = " | ".join(" ".join(_BULLET.sub("", s).split()[1:]) for s in split_sentences(texts[i]))
        mentions.update(e for e in extract_entities(inside) if not e.replace(".", "").replace(",", "").isdigit())
    # A word also written in lower case in the topic ("Implement", "Ensure" opening a bullet) is no name.
    lower = {w for i in range(last.start, last.end) for w in _LOWER_WORD.findall(texts[i])}
    ranked = sorted(mentions.items(), key=lambda x: (-x[1], x[0]))
    entities = tuple(e for e, _ in ranked if not (e.isalpha() and e in lower))[:top]
    return Focus(topic=len(topics) - 1, terms=last.terms, entities=entities)


def build_arc(
    messages: Sequence[dict[str, Any]],
    *,
    embedder: Any = "static",
    n_topics: int | None = None,
) -> ConversationArc:
    """The arc of `messages` (OpenAI-style dicts; system and tool messages
    take part in topics only). `embedder`: anything with ``encode(texts)``
    (default the static MiniLM table; None: one topic); `n_topics`: how many
    topics (default one per `MESSAGES_PER_TOPIC` messages)."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidTypeError(f"messages: expected a list of message dicts, got {type(messages).__name__}")
    if n_topics is not None and (isinstance(n_topics, bool) or not isinstance(n_topics, int) or n_topics < 1):
        raise InvalidInputError(f"n_topics: expected a positive int or None, got {n_topics!r}")
    texts, speakers, ids = [], [], []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise InvalidTypeError(f"messages[{i}]: expected a dict, got {type(m).__name__}")
        texts.append(_text(m.get("content")))
        speakers.append(_speaker(m))
        ids.append(str(m.get("id") or i))
    if embedder == "static":
        from ctxfold.embed.static import StaticEmbedder

        embedder = StaticEmbedder(weighted=True)
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32) if embedder is not None and len(texts) > 1 else None
    return arc_of(texts, speakers, ids, vectors, n_topics)


def arc_of(
    texts: Sequence[str],
    speakers: Sequence[tuple[str, str]],
    ids: Sequence[str],
    vectors: np.ndarray | None,
    n_topics: int | None = None,
    facts_of: Callable[[str], MessageFacts] = message_facts,
) -> ConversationArc:
    """The arc from already extracted texts, (role, name) speakers, ids and
    vectors (the engine's path: its items, its cached embeddings, and
    `facts_of` reading each text through its cache)."""
    facts = [facts_of(t) for t in texts]
    chat = [i for i, (role, _) in enumerate(speakers) if role in ("user", "assistant")]
    c_facts = [facts[i] for i in chat]
    c_ids = [ids[i] for i in chat]
    questions = open_questions(c_facts, [speakers[i] for i in chat], c_ids)
    decisions, actions = decisions_and_actions(c_facts, [speakers[i][0] for i in chat], c_ids)
    # Indices in the arc are positions in the input.
    questions = [msgspec.structs.replace(q, index=chat[q.index]) for q in questions]
    decisions = [msgspec.structs.replace(d, index=chat[d.index]) for d in decisions]
    for a in actions:
        a.index = chat[a.index]
        a.done_index = chat[a.done_index] if a.done_index is not None else None
    # System prompts and layers are not part of what was talked about.
    said = [i for i, (role, _) in enumerate(speakers) if role not in ("system", "developer")]
    topics = [
        msgspec.structs.replace(t, start=said[t.start], end=said[t.end - 1] + 1)
        for t in _topics([texts[i] for i in said], [facts[i] for i in said], [ids[i] for i in said],
                         vectors[said] if vectors is not None and len(said) > 1 else None, n_topics)
    ]
    return ConversationArc(
        message_count=len(texts), topics=topics, open_questions=questions, decisions=decisions,
        actions=actions, focus=_focus(texts, topics),
    )


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""
