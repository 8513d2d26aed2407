"""Relevance scoring: six layers, each in [0, 1], mixed by `EngineConfig.weights`.

- semantic: BM25 of the message against the query's topic (the query
  without the words that frame it: "Can you give me a summary of ...",
  "throughout our conversations", "did she mention", "can we assume that";
  Rust index), scaled by the best match;
  fused with embedding cosine when an embedder is configured (a message is
  relevant when either signal is strong: the larger of the two
  standardised scores; between two people each message is also read after
  the one it follows; each clause of a long question is also read alone);
  with `EngineConfig.rerank`, the best messages of that first stage also get
  the reranker's (MiniLM's) cosine as a third signal;
- entity: share of the query's entities (names, numbers, dates) the message
  mentions, each weighted by its rarity in the conversation;
- recency: core decay weights by turns ago (and importance), for the current
  task; a question about the past gets none;
- intent: whether the message's role fits what the query asks about (the
  user's own statements for "I/my" questions, the assistant's for "you said",
  "remind me", "our previous conversation"); in a chat between two people,
  whether its speaker is a person the query names (by any name the chat
  calls them, or spelled another way: `ctxfold.engine.people`), the other
  person's messages getting none;
- structure: role, questions, code, errors, decisions and action items (none
  in a chat between two people);
- cross_reference: a message answered or referred to by a relevant message is
  lifted with it (an assistant turn lifts the user turn it answers, a tool
  result lifts its call; in a chat between two people, each message lifts
  the ones before and after it).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ctxfold._core import Bm25, decay_weights
from ctxfold.engine.cache import EngineCache
from ctxfold.engine.messages import said_on
from ctxfold.engine.people import what_is_said, with_speakers_named, without_speakers
from ctxfold.text.entities import extract_entities
from ctxfold.text.temporal import asked_days, noted_days
from ctxfold.engine.results import LAYER_NAMES, STATE_KINDS, Item
from ctxfold.engine.run import RunContext

__all__ = [
    "score_items", "recency_applies", "recalls_the_conversation", "topic_of", "clauses_of", "rerank", "time_layer",
    "LAYER_NAMES",
]

# How fast closeness to a day a question names falls off, in days.
TIME_WIDTH_DAYS = 2.0
# A longer period ("last year") says when something happened more than when it was said.
TIME_MAX_DAYS = 31
_ROLE_WEIGHT = {"system": 1.0, "developer": 1.0, "user": 0.6, "assistant": 0.5, "tool": 0.4}
_STRUCTURE_CUES = [
    (re.compile(r"\?"), 0.1),
    (re.compile(r"```|^\s{4}\S", re.M), 0.15),
    (re.compile(r"\b(error|exception|traceback|failed|failure|bug)\b", re.I), 0.15),
    (re.compile(r"\b(decided|decision|we will|let's go with|agreed|chose|must)\b", re.I), 0.2),
    (re.compile(r"\b(todo|next step|action item|remember|deadline|don't forget)\b", re.I), 0.1),
]
_FIRST_PERSON = re.compile(r"\b(i|me|my|mine|i'm|i've|i'd|myself)\b", re.I)
# Questions about what the assistant said: "you said/mentioned/gave...", "did
# you recommend...", and requests to recall the earlier conversation ("remind
# me what/of...", not "remind me to..."; "our previous conversation", "we
# discussed"; a summary, overview or recap of how something went): their
# answer is in the assistant's turns, not the user's.
_ABOUT_ASSISTANT = re.compile(
    r"\b(did you|you (said|told|recommended|suggested|mentioned|gave|provided|listed|shared|explained|wrote)"
    r"|your (answer|suggestion|recommendation|list|advice)"
    r"|remind me (of|what|which|who|whom|where|when|how|why|about|again)"
    r"|our (previous|last|earlier|past) (conversation|chat|discussion)|we (talked|discussed|spoke|chatted)"
    r"|summar\w*|overview|recap)\b",
    re.I,
)
# A question ("?", or opening with a question word) asks for facts wherever
# they are in the history: no recency pull, unless it points at the present
# or at what was just said ("now", "currently", "this error", "above") and
# does not recall the conversation ("the order in which I brought up these").
_QUESTION = re.compile(
    r"\?|^\s*(who|whom|whose|what|when|where|which|why|how|did|do|does|was|were|is|are|has|have|had|can|could)\b",
    re.I,
)
_PRESENT = re.compile(
    r"\b(now|current|currently|latest|most recent|recently|still|today|these days|at the moment|so far|anymore"
    r"|this|these|that one|above|here|just|last (message|answer|reply|step|error|output))\b",
    re.I,
)

# A question that recalls the conversation itself: what either side said, did
# or decided before, the order things came up or happened in ("the order of
# the trips I took"), or a short question, standing alone, about the user's
# own facts or about something in the past tense ("When is my call?", "What
# was the total?"). A long message that mentions "as you suggested" is a new
# request, not a recall.
_RECALLS = re.compile(
    r"\b(did|have|had) I\b|\bI (mentioned|said|told|brought up|asked|shared|noted|talked about)\b"
    r"|\bwe (discussed|talked|covered|decided|agreed)\b|\byou (said|told|suggested|recommended|mentioned)\b"
    r"|\b(remind me|previously|last time|throughout our|in our (previous|earlier|last)|over time|the order in which)\b"
    r"|\bthe order of\b[^?.!]{0,80}\b(I|we)\b",
    re.I,
)
_SHORT_RECALL = re.compile(
    r"^\s*(when|where|who|how many|how much|how long|what|which)\b[^.!\n]{0,80}\b(my|I|me)\b[^.!\n]{0,80}\?\s*$"
    r"|^\s*(what|when|where|who|which|how \w+)\s+(was|were|did|had)\b[^.!\n]{0,120}\?\s*$",
    re.I,
)

# Words that frame a question (the request, the form of the answer, the
# conversation as a whole) rather than say what it is about: rare in a chat,
# so BM25 would weigh them most, and they pull the dense query towards
# messages about summaries and conversations.
_FRAMING = re.compile(
    r"\b(can|could|would|will) you\b|\b(please|give me|tell me|show me|provide|remind me( of| about)?)\b"
    r"|\b(a |an )?(clear|comprehensive|detailed|brief|short|quick|complete|full)?\s*"
    r"(summary|summari[sz]e|recap|overview|rundown)( of)?\b"
    r"|\b((throughout|across|over|during|in|of) )?(all )?(of )?our (previous |past |earlier )?(conversations?|discussions?|chats?|sessions?)\b"
    r"|\b(over time|so far|over the past (few )?(days|weeks|months))\b"
    r"|\bmention only( and only)? \w+ items\b|\bin order\b|\bthe order in which\b"
    r"|\b((I|we|we'?ve) )?(first )?(brought up|mention(s|ed|ing)?|discuss(es|ed|ing)?|talk(s|ed|ing)? about)\b"
    r"|\b(I|we|we'?ve) (first )?covered\b"
    r"|\b(in|during) (their|our|the|a|this) (conversations?|discussions?|chats?)( with \w+)?\b"
    r"|\b(their|our) discussions?( (on|about|of))?\b"
    # The words of a question that asks for an inference: "Based on the
    # conversation, can we assume that ...", "What can be inferred about ...".
    r"|\bbased on( (the |our |this )?(conversations?|discussions?|chats?))?\b"
    r"|\b(can|could) (we|you|I) (assume|infer|conclude|say)( that)?\b"
    r"|\b(can|could) (it )?be (inferred|concluded|said|considered)( (as|that|from))?\b"
    r"|\bis it (likely|fair to say|safe to assume)( that)?\b",
    re.I,
)


# A question of several clauses ("how my tracker progressed, the key features,
# security enhancements and documentation") blurs them in one vector: each
# clause is also read alone, its matches counting at this share.
CLAUSE_SHARE = 0.8
_CLAUSE_BREAK = re.compile(r"\s*,\s*(?:(?:and|including|as well as)\s+)?|\s+(?:including|as well as)\s+", re.I)


def clauses_of(topic: str) -> list[str]:
    """The clauses of `topic` (split at commas, "including", "as well as")
    that have two words or more, when there are two such or more; else none."""
    parts = [part.strip(" ?.!") for part in _CLAUSE_BREAK.split(topic)]
    parts = [part for part in parts if len(re.findall(r"\w+", part)) >= 2]
    return parts if len(parts) >= 2 else []


def topic_of(query: str) -> str:
    """`query` without the words that frame it ("Can you give me a summary
    of ... throughout our conversations"), or `query` itself when nothing
    else is left."""
    rest = " ".join(_FRAMING.sub(" ", query).split())
    return rest if len(re.findall(r"\w+", rest)) >= 2 else query


def score_items(items: Sequence[Item], run: RunContext) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Total scores and each layer's scores (arrays aligned with `items`) for
    `run.query`. `run.embedder` adds dense similarity to the semantic layer;
    None leaves it lexical (BM25) only. `run.cache` keeps what does not
    depend on the query (BM25 term counts, structure scores) from one call
    to the next."""
    query, cache, half_life_turns = run.query, run.cache, run.config.half_life_turns
    texts = [it.text for it in items]
    people = run.people
    dense_query = dense_texts = exchanges = None
    if people is not None:
        query = with_speakers_named(query, items, people, cache)
        # Who asks and who is asked about are the intent layer's to find; the
        # dense view reads what is asked and what is said.
        dense_query, dense_texts = without_speakers(query, people), [what_is_said(it) for it in items]
        # A short reply says little alone ("Vegetable soup"): it is also read
        # after the message it follows ("What are you having for dinner?").
        exchanges = [*dense_texts[:1], *(f"{before} {text}" for before, text in zip(dense_texts, dense_texts[1:]))]
    layers = {
        "semantic": semantic_layer(texts, query, run.embedder, cache, reranker=run.reranker, shortlist=run.config.rerank,
                                   rerank_question=run.rerank_question, model_view=run.model_view,
                                   dense_query=dense_query, dense_texts=dense_texts, dense_exchanges=exchanges),
        "entity": entity_layer(texts, query),
        "recency": recency_layer(items, half_life_turns, query, run.now),
        "intent": intent_layer(items, query, people),
        # Roles, code, errors and decisions are cues of work with an
        # assistant; between two people they single out nothing.
        "structure": structure_layer(items, cache) if people is None else np.zeros(len(items)),
    }
    layers["cross_reference"] = cross_reference_layer(items, layers["semantic"], between_people=people is not None)
    total = sum(run.config.weights.get(name, 0.0) * layers[name] for name in LAYER_NAMES)
    return np.asarray(total, dtype=np.float64), layers


def _standardised(x: np.ndarray) -> np.ndarray:
    spread = x.std()
    return (x - x.mean()) / spread if spread > 0 else np.zeros_like(x)


def bm25_scores(terms: Sequence[tuple[dict[str, int], int]], query: str, k1: float = 1.5, b: float = 0.75) -> np.ndarray:
    """Okapi BM25 exactly as the core's `Bm25` computes it (same terms, Lucene
    idf, each distinct query term once), over term counts that the engine
    caches per text: a conversation grown by one turn tokenises one text."""
    n = len(terms)
    scores = np.zeros(n)
    if n == 0:
        return scores
    lengths = np.array([length for _, length in terms], dtype=np.float64)
    norm = 1.0 - b + b * lengths / max(float(lengths.mean()), 1e-9)
    for term in sorted(set(Bm25.tokenize(query))):
        tf = np.array([counts.get(term, 0) for counts, _ in terms], dtype=np.float64)
        df = int(np.count_nonzero(tf))
        if df:
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            scores += idf * tf * (k1 + 1.0) / (tf + k1 * norm)
    return scores


def semantic_layer(
    texts: list[str], query: str, embedder: Any = None, cache: EngineCache | None = None, *,
    reranker: Any = None, shortlist: int = 0, rerank_question: Any = None, model_view: Any = None,
    dense_query: str | None = None, dense_texts: list[str] | None = None, dense_exchanges: list[str] | None = None,
) -> np.ndarray:
    """BM25 of `topic_of(query)`, fused with embedding cosine when an
    embedder is given: the larger of the two scores, each standardised over
    the conversation, clipped at 0 and scaled so the best message scores 1.

    The maximum (either signal suffices) rather than the sum (both must
    agree): a memory question is often answered in other words ("doctors" ->
    "Dr. Patel", "an ENT specialist"), where BM25 finds nothing and the sum
    buries the dense match under BM25's heavy tail of incidental term hits.
    (For plain top-10 retrieval the sum ranks better; the planner, which
    keeps many short turns, gains from the maximum: docs/benchmarks.md.)

    A `model_view` (`ctxfold.embed.ModelView`: the question read by MiniLM,
    the embedder's vectors mapped into MiniLM's space) gives the question a
    second dense score beside the embedder's own, and again the larger
    counts: the model reads the question's words in context ("hobbies" near
    "I play a lot of games"), which a table of token vectors cannot, while
    the messages stay embedded by the fast table.

    With a `reranker` (a stronger, slower embedder) and `shortlist` > 0, the
    `shortlist` best messages of that first stage are scored again (`rerank`):
    a third signal, and again either one suffices. `rerank_question`, when
    given, embeds the question in the reranker's space in its place (the
    same model reading more of a long question).

    `dense_query` and `dense_texts`, when given, are what the embedders read
    in place of `query` and `texts` (BM25 still reads those);
    `dense_exchanges`, when given, a second text per message (the message
    after the one it follows) that the embedder reads too, the larger dense
    score counting. Each clause of a question of several (`clauses_of`) is
    also read alone, its dense scores counting at CLAUSE_SHARE."""
    if not texts or not query:
        return np.zeros(len(texts))
    query, dense_query = topic_of(query), topic_of(dense_query or query)
    dense_texts = texts if dense_texts is None else dense_texts
    cache = cache if cache is not None else EngineCache()
    scores = bm25_scores(cache.terms_of(texts, Bm25.tokenize), query)
    dense_on = embedder is not None and len(texts) > 1
    rerank_on = reranker is not None and shortlist > 0 and len(texts) > 1
    if dense_on or rerank_on:
        lexical = _standardised(scores)
        dense = np.full(len(texts), -np.inf)
        if dense_on:
            vectors = np.asarray(embedder.embed([dense_query, *dense_texts]), dtype=np.float32)
            dense = _dense_scores(dense_query, vectors[0], vectors[1:], model_view)
            if dense_exchanges is not None:
                read_after = np.asarray(embedder.embed(dense_exchanges), dtype=np.float32)
                dense = np.maximum(dense, _dense_scores(dense_query, vectors[0], read_after, model_view))
            clauses = clauses_of(dense_query)
            if clauses:
                clause_vectors = np.asarray(embedder.embed(clauses), dtype=np.float32)
                for clause, vector in zip(clauses, clause_vectors):
                    dense = np.maximum(dense, CLAUSE_SHARE * _dense_scores(clause, vector, vectors[1:], model_view))
        scores = np.maximum(lexical, dense)
        if rerank_on:
            scores = rerank(dense_texts, dense_query, scores, dense, reranker, shortlist, rerank_question)
        scores = np.clip(scores, 0, None)
    best = scores.max()
    return scores / best if best > 0 else scores


def _dense_scores(query: str, query_vector: np.ndarray, vectors: np.ndarray, model_view: Any) -> np.ndarray:
    """The embedder's cosines of `vectors` with the query's, standardised, or
    the `model_view`'s where that is larger."""
    dense = _standardised((vectors @ query_vector).astype(np.float64))
    if model_view is not None:
        dense = np.maximum(dense, _standardised(model_view.cosines(query, vectors).astype(np.float64)))
    return dense


def rerank(
    texts: list[str], query: str, first: np.ndarray, dense: np.ndarray, reranker: Any, shortlist: int,
    question_embedder: Any = None,
) -> np.ndarray:
    """`first` (standardised BM25 and dense scores, their maximum) with its
    `shortlist` best messages scored again: the larger of their first score
    and the reranker's cosine. Only the short list is embedded, so that
    cosine is standardised within it and put on the scale the embedder's
    scores have there (their mean and spread), to compare with them. The
    question is embedded by `question_embedder` (default: the reranker)."""
    top = np.argsort(-first, kind="stable")[:shortlist]
    reads_question = reranker if question_embedder is None else question_embedder
    question = np.asarray(reads_question.embed([query]), dtype=np.float32)[0]
    vectors = np.asarray(reranker.embed([texts[i] for i in top]), dtype=np.float32)
    again = _standardised((vectors @ question).astype(np.float64))
    base = dense[top]
    if np.isfinite(base).all():
        again = base.mean() + again * base.std()
    out: np.ndarray = first.copy()
    out[top] = np.maximum(first[top], again)
    return out


def entity_layer(texts: list[str], query: str) -> np.ndarray:
    """Share of the query's entities each message mentions, each entity
    weighted by how rare it is in the conversation (log(n / df) / log(n)): a
    name found in every message of one speaker (a chat between two people,
    each message starting with its speaker's name) singles out nothing."""
    wanted = sorted(extract_entities(query))
    n = len(texts)
    if not wanted or n == 0:
        return np.zeros(n)
    lowered = [text.lower() for text in texts]
    hits = np.array([[e in text for text in lowered] for e in wanted], dtype=np.float64)
    df = hits.sum(axis=1)
    rarity = np.log(n / np.maximum(df, 1.0)) / math.log(max(n, 2))
    return np.asarray((rarity[:, None] * hits).sum(axis=0) / len(wanted))


def recency_applies(query: str) -> bool:
    """Whether the recency layer counts for `query`: not for a question about
    the past (the conversation's facts, either person's statements), which
    is answered wherever its evidence is; yes for the current task."""
    return not _QUESTION.search(query) or bool(_PRESENT.search(query) and not _RECALLS.search(query))


def recalls_the_conversation(query: str) -> bool:
    """Whether `query` asks what the conversation itself holds ("Have I
    mentioned...", "the order in which I brought up...", "When is my call?"):
    narrower than a question without recency pull, as its answer lies in
    older messages wherever they are, and rarely in the last few."""
    return bool(_RECALLS.search(query) or _SHORT_RECALL.search(query))


def recency_layer(
    items: Sequence[Item], half_life_turns: float, query: str = "", now: dt.datetime | None = None
) -> np.ndarray:
    """How near each message is to the time the query is about: for a
    question that names a past day, week or month ("What did I buy 10 days
    ago?", "last Saturday", counted from `now`), closeness to it
    (`time_layer`) when messages carry timestamps; for the current task, closeness to now,
    decaying with the turns since (half-life `half_life_turns`); nothing for
    another question about the past (`recency_applies`)."""
    n = len(items)
    if n == 0:
        return np.zeros(0)
    days = [(first, last) for first, last in (asked_days(query, now) if now is not None else [])
            if (last - first).days < TIME_MAX_DAYS]
    if days and any(it.timestamp is not None for it in items):
        return time_layer(items, days)
    if query and not recency_applies(query):
        return np.zeros(n)
    turns_ago = np.arange(n - 1, -1, -1, dtype=np.float64)
    importance = np.array([it.importance for it in items])
    return decay_weights(turns_ago, "exponential", half_life=half_life_turns, importance=importance)


def time_layer(items: Sequence[Item], days: Sequence[tuple[dt.date, dt.date]]) -> np.ndarray:
    """Each message's closeness to the periods `days` (first, last day): 1
    when it was said within one, or names a day within one (its date note:
    "yesterday = 2023-12-28"), exp(-days off / TIME_WIDTH_DAYS) otherwise
    (people say "10 days ago" of what was said 9 or 11 days ago), 0 without
    a timestamp."""
    out = np.zeros(len(items))
    for i, it in enumerate(items):
        day = said_on(it)
        if day is None:
            continue
        spoken = [(day, day), *noted_days(it.date_note)]
        off = min(0 if first <= end and start <= last else min(abs((start - last).days), abs((end - first).days))
                  for first, last in days for start, end in spoken)
        out[i] = math.exp(-off / TIME_WIDTH_DAYS)
    return out


def intent_layer(items: Sequence[Item], query: str, people: tuple[str, str] | None = None) -> np.ndarray:
    """Whether each message comes from whom the query asks about: between two
    `people`, the messages of each person the query names (1), and not the
    other's (0), or 0.5 for all when it names neither; of two named apart,
    the second (the object: "advice Nebraas gave Nicolas") gets 0.5; with
    an assistant, the user's for "I/my" questions, the assistant's for "you
    said", "remind me" or "our previous conversation"."""
    if people is not None:
        # A person is named by their whole name or its first word ("Fahim" for "Fahim Khan").
        found = {p: m for p in people
                 if (m := re.search(r"\b(" + re.escape(p) + "|" + re.escape(p.split()[0]) + r")\b", query, re.I))}
        if not found:
            return np.full(len(items), 0.5)
        weight: dict[str | None, float] = dict.fromkeys(found, 1.0)
        if len(found) == 2:
            # Named apart ("What advice did Nebraas give to Nicolas?"), the
            # second is the object: the answer is mostly in the first one's
            # words. Named together ("Fahim and Muhammad") both are asked about.
            first, second = sorted(found, key=lambda p: found[p].start())
            rest = first[len(found[first].group(0)):].strip()
            between = query[found[first].end():found[second].start()]
            if not re.fullmatch(r"\s*(" + re.escape(rest) + r")?\s*(['’]s)?\s*(and|&|,)\s*", between, re.I):
                weight[second] = 0.5
        # What a person does, likes or says is in their own words, rarely in the other's.
        return np.array([weight.get(it.speaker, 0.0) for it in items])
    about_user = bool(_FIRST_PERSON.search(query))
    about_assistant = bool(_ABOUT_ASSISTANT.search(query))
    out = np.full(len(items), 0.5)
    for i, it in enumerate(items):
        if it.role == "user" and about_user and not about_assistant:
            out[i] = 1.0
        elif it.role == "assistant" and about_assistant:
            out[i] = 1.0
        elif it.role in ("system", "developer"):
            out[i] = 1.0
    return out


def structure_layer(items: Sequence[Item], cache: EngineCache | None = None) -> np.ndarray:
    out = np.empty(len(items))
    for i, it in enumerate(items):
        key = (it.role, it.kind, it.text)
        found = cache.structure.get(key) if cache is not None else None
        if found is None:
            found = _structure_score(it)
            if cache is not None:
                cache.structure.put(key, found)
        out[i] = found
    return out


def _structure_score(it: Item) -> float:
    value = _ROLE_WEIGHT.get(it.role, 0.5)
    if it.kind in STATE_KINDS:
        value = 1.0
    for pattern, bonus in _STRUCTURE_CUES:
        if pattern.search(it.text):
            value += bonus
    return min(value, 1.0)


# Between two people, how many messages on a reply may come: the other
# person's first message among the next three answers a message, after the
# one or two lines its writer often adds (docs/benchmarks.md).
REPLY_REACH = 3


def cross_reference_layer(items: Sequence[Item], semantic: np.ndarray, between_people: bool = False) -> np.ndarray:
    """For each message, the semantic score of the messages that answer or
    complete it: the next assistant turn for a user turn, the results of a
    tool call, the call of a tool result; `between_people`, the message
    before and the one after, whoever says them ("Vegetable soup" answers
    "What did you have for dinner?" from either side), and the reply: the
    other person's first message among the next REPLY_REACH, as people
    often add a line or two before the other answers."""
    out = np.zeros(len(items))
    if between_people and len(items) > 1:
        out[1:] = semantic[:-1]
        out[:-1] = np.maximum(out[:-1], semantic[1:])
        for i, it in enumerate(items):
            reply = next((j for j in range(i + 1, min(len(items), i + 1 + REPLY_REACH))
                          if items[j].speaker != it.speaker), None)
            if reply is not None:
                out[reply] = max(out[reply], semantic[i])
                out[i] = max(out[i], semantic[reply])
    by_call: dict[str, list[int]] = {}
    for i, it in enumerate(items):
        for call_id in it.tool_call_ids:
            by_call.setdefault(call_id, []).append(i)
    for i, it in enumerate(items):
        if it.role == "user" and i + 1 < len(items) and items[i + 1].role == "assistant":
            out[i] = max(out[i], semantic[i + 1])
            out[i + 1] = max(out[i + 1], semantic[i])
        result_of = it.message.get("tool_call_id")
        for j in by_call.get(result_of, []) if isinstance(result_of, str) else []:
            out[j] = max(out[j], semantic[i])
            out[i] = max(out[i], semantic[j])
    return out
