"""Evidence kept by `ContextEngine.optimize` on every dev set, with the
baselines measured in the same run (../shared/data).

Sets: LongMemEval-S dev (``lme``: ~100K-token histories with distractor
sessions), LongMemEval oracle (``oracle``: the evidence sessions only), BEAM
100K (``beam``: long user/assistant project chats) and REALTALK
(``realtalk``: 21-day chats between two people). Each question is asked with
its history at two budgets: 1/8 of the history's content tokens, and a fixed
budget per set (LongMemEval 2,000 tokens, BEAM 4,000, REALTALK 1,000).

``lme_mix`` (not in the default ``--sets``) is LongMemEval-S-like histories
for all the oracle set's questions, not only the dev histories': each
question's evidence sessions, in their order, at random places among
distractor sessions drawn from the dev histories' pool (not the question's
own sessions), ``MIX_SESSIONS`` sessions in all as an S history has, seeded
by the question id. It checks that what holds on 56 dev histories holds on
eight times as many questions, at 2,000 tokens like ``lme``.

Measures, as ../shared/checks/engine_*.py take them (the histories are loaded
by that folder's ``common.py``, so both read the same messages):

- ``verbatim``: the share of a question's evidence messages whose text is in
  the context word for word;
- ``coverage``: the mean, over the evidence messages, of the share of their
  content words (lowercase alphanumeric runs, stop words left out) present
  in the context; an excerpt of the right sentences counts.

Baselines take whole messages by score while they fit, each message at its
chat cost (as the engine pays it): ``recency`` (newest first), ``bm25``,
``static`` (`StaticEmbedder` cosine), ``minilm`` (`Embedder` cosine),
``bm25+minilm`` and ``bm25+static`` (reciprocal rank fusion, k = 60), and
langchain-core's ``trim_messages`` (strategy "last") when it is installed.

Each table gives every category of the set and both halves of it (its chats
or histories in file order, first half and second half): the gap between the
halves is the run-to-run spread to hold a difference against. MiniLM vectors
are kept on disk by text under ``--cache-dir`` (a SQLite file), so only the
first run embeds; ``--json`` writes every figure for comparing runs.

``ctxfold-nodates`` is the engine with ``EngineConfig(annotate_dates=False)``.
The engine writes dates on a line after a message, so an annotated evidence
message is still there word for word; contexts are measured as they are.

``--temporal`` asks only the questions about time: LongMemEval-S dev's
temporal-reasoning questions (each message stamped with its session's date),
``lme_mix``'s (dated as `_mixed_histories` says) and REALTALK's category 2,
and adds ``found``: whether the gold answer is in the context. A date in
the answer counts when the context names that day in any common form
(2023-05-07, 7 May 2023, May 7th, 05/07/2023, 7.5.2023; a year-less mention
matches any year); a month ("September 2023") when the
context names a day of it or the month and year; a duration ("3 days ago",
"4 weeks", or a bare number when the question asks "how many <days, weeks,
months, years>") when the context states that many of that unit ("3 days
ago", "3 days", "three days"), the answer's own alternative counting too
("6 days. 7 days (including the last day) is also acceptable"); any other
answer when all of its content words are in the context; answers that are
only a small number for any other question cannot be checked this way and
are left out. The engine's LongMemEval contexts count from the question's
date (``optimize(now=...)``), REALTALK's from the chat's last message. Entity
recall (`entity_recall`) of the evidence messages in the context is printed
beside it.

    python benches/eval_context.py [--sets lme,oracle,beam,realtalk] [--methods ctxfold,bm25,...]
                                   [--limit N] [--budgets eighth,fixed] [--json out.json] [--arc] [--temporal]

``--arc`` runs ctxfold with the conversation arc in the prompt
(``EngineConfig(conversation_arc=True)``).
``--config rerank=N`` turns on two-stage ranking; its MiniLM vectors come
from the same disk cache as the baselines'.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
import sqlite3
import statistics
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import ctxfold
from ctxfold.text.entities import entity_recall

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("CTXFOLD_SHARED_DATA", REPO.parent / "shared" / "data")).parent
CHECKS = SHARED / "checks"
FIXED = {"lme": 2000, "oracle": 2000, "beam": 4000, "realtalk": 1000, "lme_mix": 2000}
NAMES = {"lme": "LongMemEval-S dev", "oracle": "LongMemEval oracle", "beam": "BEAM 100K", "realtalk": "REALTALK",
         "lme_mix": "LongMemEval oracle questions among S sessions"}
# Sessions in an lme_mix history: about what a LongMemEval-S history holds (38-51).
MIX_SESSIONS = 48
METHODS = ("ctxfold", "ctxfold-nodates", "recency", "bm25", "static", "minilm", "bm25+minilm", "bm25+static", "trim_messages")
RRF_K = 60.0
# Below this a budget cannot hold a question's current turn; such pairs are left out for every method.
MIN_BUDGET = 200
# The shared checks' coverage words: lowercase alphanumeric runs minus these stop words.
WORD = re.compile(r"[a-z0-9]+")
STOP = set(
    "a an the and or of to in on at for with is are was were be been i you he she it we they my your her his our their "
    "me him them this that what when where who how why did do does have has had will would can could".split()
)


def words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if w not in STOP}


class Question:
    __slots__ = ("unit", "category", "text", "evidence", "answer", "now")

    def __init__(self, unit: str, category: str, text: str, evidence: list[str], answer: str = "",
                 now: str | None = None) -> None:
        self.unit, self.category, self.text, self.evidence, self.answer = unit, category, text, evidence, answer
        self.now = now


def load_set(name: str, limit: int | None, temporal: bool = False) -> Iterator[tuple[str, list[dict[str, Any]], list[Question]]]:
    """(unit, messages, questions) per chat or history, as the shared checks load them; `temporal`: only
    the questions about time, with their answers, and LongMemEval messages stamped with their session date."""
    sys.path.insert(0, str(CHECKS))
    import common  # type: ignore[import-not-found]  (../shared/checks/common.py)

    if name == "lme_mix":
        yield from _mixed_histories(limit, temporal)
        return
    if name in ("lme", "oracle"):
        source = common.lme_histories("longmemeval_s" if name == "lme" else "longmemeval_oracle")
        k = 0
        for d, msgs, ids in source:
            if limit is not None and k >= limit:
                return
            if temporal and d["question_type"] != "temporal-reasoning":
                continue
            k += 1
            clean = [{key: v for key, v in m.items() if key != "date"} for m in msgs]
            if temporal:
                for m, raw in zip(clean, msgs):
                    m["timestamp"] = lme_time(raw["date"])
            asked = lme_time(d["question_date"]) if temporal and d.get("question_date") else None
            yield d["question_id"], clean, [Question(d["question_id"], d["question_type"], d["question"], ids,
                                                     str(d.get("answer", "")), asked)]
        return
    chats = common.beam_chats() if name == "beam" else common.realtalk_chats()
    for k, (chat, msgs, qas) in enumerate(chats):
        if limit is not None and k >= limit:
            return
        label = "{}" if name == "beam" else "category {}"
        if temporal:
            qas = [q for q in qas if q["category"] == 2]
        yield str(chat), msgs, [Question(str(chat), label.format(q["category"]), q["question"], list(q["evidence"]),
                                         str(q.get("answer", ""))) for q in qas]


def _mixed_histories(limit: int | None, temporal: bool = False) -> Iterator[tuple[str, list[dict[str, Any]], list[Question]]]:
    """The ``lme_mix`` histories (module docstring); `temporal`: only the
    temporal-reasoning questions, each session stamped with a date (the
    evidence sessions their own, the others one drawn between a month before
    the first of those and the question's date) and the sessions in date order."""
    root = SHARED / "data" / "conversations"
    pool: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((root / "longmemeval_s").glob("*.json")):
        d = json.loads(path.read_text(encoding="utf-8"))
        for sid, session in zip(d["haystack_session_ids"], d["haystack_sessions"]):
            pool.setdefault(sid, session)
    ids = sorted(pool)
    k = 0
    for path in sorted((root / "longmemeval_oracle").glob("*.json")):
        if limit is not None and k >= limit:
            return
        d = json.loads(path.read_text(encoding="utf-8"))
        if temporal and d["question_type"] != "temporal-reasoning":
            continue
        own = list(zip(d["haystack_session_ids"], d["haystack_sessions"]))
        rng = random.Random(d["question_id"])
        others = [sid for sid in rng.sample(ids, MIX_SESSIONS + len(own)) if sid not in d["haystack_session_ids"]]
        others = others[: max(0, MIX_SESSIONS - len(own))]
        places = set(rng.sample(range(len(others) + len(own)), len(own)))
        own_left, others_left = iter(own), iter(others)
        # (date, is the question's own, session) in history order.
        sessions: list[tuple[str, bool, list[dict[str, Any]]]] = []
        for si in range(len(others) + len(own)):
            is_own = si in places
            sessions.append(("", is_own, next(own_left)[1] if is_own else pool[next(others_left)]))
        asked = None
        if temporal:
            own_dates = iter(lme_time(t) for t in d["haystack_dates"])
            asked = lme_time(d["question_date"])
            last = dt.datetime.fromisoformat(asked)
            first = min(dt.datetime.fromisoformat(lme_time(t)) for t in d["haystack_dates"]) - dt.timedelta(days=30)
            span = max((last - first).total_seconds(), 0.0)
            sessions = sorted(
                ((next(own_dates) if is_own else (first + dt.timedelta(seconds=rng.uniform(0, span))).isoformat(
                    timespec="seconds"), is_own, session) for _, is_own, session in sessions),
                key=lambda s: s[0])
        msgs: list[dict[str, Any]] = []
        evidence: list[str] = []
        for si, (date, is_own, session) in enumerate(sessions):
            for ti, turn in enumerate(session):
                mid = f"S{si}:{ti}"
                msgs.append({"role": turn["role"], "content": turn["content"], "id": mid, **({"timestamp": date} if date else {})})
                if is_own and turn.get("has_answer"):
                    evidence.append(mid)
        if evidence:
            k += 1
            yield d["question_id"], msgs, [Question(d["question_id"], d["question_type"], d["question"], evidence,
                                                    str(d.get("answer", "")), asked)]


def lme_time(date: str) -> str:
    """A LongMemEval session date ("2023/05/20 (Sat) 02:21") as ISO 8601."""
    day, _, clock = date.partition(") ")
    return f"{day.split(' ')[0].replace('/', '-')}T{clock or '00:00'}:00"


# -- date-aware answer match ------------------------------------------------------------

_MONTH_NAMES = {name: k + 1 for k, name in enumerate(
    "january february march april may june july august september october november december".split())}
_MONTH_NAMES.update({name[:3]: k for name, k in list(_MONTH_NAMES.items())})
_MONTH_NAMES["sept"] = 9
_MONTH = r"(?P<{}>" + "|".join(sorted(_MONTH_NAMES, key=len, reverse=True)) + r")\.?"
_DATE_FORMS = re.compile(
    "|".join([
        r"\b(?P<iy>\d{4})-(?P<im>\d{1,2})-(?P<id>\d{1,2})\b",
        r"\b(?P<dd>\d{1,2})\.(?P<dm>\d{1,2})\.(?P<dy>\d{2,4})\b",
        r"\b(?P<sa>\d{1,2})/(?P<sb>\d{1,2})/(?P<sy>\d{2,4})\b",
        r"\b" + _MONTH.format("mn") + r"\s+(?P<md>\d{1,2})(?:st|nd|rd|th)?\b(?!\s*:)(?:,?\s+(?P<my>\d{4})\b)?",
        r"\b(?P<nd>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH.format("nm") + r"\b(?:,?\s+(?P<ny>\d{4})\b)?",
        r"\b" + _MONTH.format("ym") + r",?\s+(?P<yy>\d{4})\b",
    ]),
    re.IGNORECASE,
)


def _year(text: str | None) -> int | None:
    if not text:
        return None
    year = int(text)
    return year + 2000 if year < 100 else year


def dates_in(text: str) -> tuple[set[tuple[int | None, int, int]], set[tuple[int, int]]]:
    """The days (year or None, month, day) and the months (year, month) `text` names, in any common form;
    a slashed date is read both ways (05/07/2023: May 7 and 5 July)."""
    days: set[tuple[int | None, int, int]] = set()
    months: set[tuple[int, int]] = set()
    for m in _DATE_FORMS.finditer(text):
        g = m.groupdict()
        found: list[tuple[int | None, int, int]] = []
        if g["iy"]:
            found.append((int(g["iy"]), int(g["im"]), int(g["id"])))
        elif g["dd"]:
            found.append((_year(g["dy"]), int(g["dm"]), int(g["dd"])))
        elif g["sa"]:
            found += [(_year(g["sy"]), int(g["sa"]), int(g["sb"])), (_year(g["sy"]), int(g["sb"]), int(g["sa"]))]
        elif g["mn"]:
            found.append((_year(g["my"]), _MONTH_NAMES[g["mn"].lower()], int(g["md"])))
        elif g["nm"]:
            found.append((_year(g["ny"]), _MONTH_NAMES[g["nm"].lower()], int(g["nd"])))
        else:
            months.add((int(g["yy"]), _MONTH_NAMES[g["ym"].lower()]))
        for year, month, day in found:
            if 1 <= month <= 12 and 1 <= day <= 31:
                days.add((year, month, day))
                if year is not None:
                    months.add((year, month))
    return days, months


_COUNTS = {w: k for k, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split())}
_COUNT = r"(\d{1,3}|" + "|".join(_COUNTS) + ")"
_UNIT = r"(day|week|month|year)s?"
# An answer that is only a duration, with the alternative LongMemEval allows beside it.
_DURATION_ANSWER = re.compile(
    rf"^\s*{_COUNT}\s+{_UNIT}(?:\s+ago)?\s*\.?(?:\s*{_COUNT}\s+{_UNIT}\s*\(including the last day\) is also "
    r"acceptable\.?)?\s*$", re.IGNORECASE)
_HOW_MANY = re.compile(r"\bhow many " + _UNIT + r"\b", re.IGNORECASE)
_STATED = re.compile(rf"\b{_COUNT}\s+{_UNIT}\b", re.IGNORECASE)


def durations_asked(answer: str, question: str) -> set[tuple[int, str]] | None:
    """The (count, unit) durations an answer accepts: "3 days ago", "6 days. 7 days (including the last day)
    is also acceptable", or a bare number when `question` asks how many of a unit; None for any other answer."""
    found = _DURATION_ANSWER.match(answer)
    if found:
        n, unit, alt_n, alt_unit = found.groups()
        out = {(_count(n), unit.lower())}
        return out | {(_count(alt_n), alt_unit.lower())} if alt_n else out
    asked = _HOW_MANY.search(question)
    if asked and re.fullmatch(r"\s*\d{1,3}\s*\.?\s*", answer):
        return {(int(answer.strip().rstrip(".")), asked.group(1).lower())}
    return None


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _COUNTS[word.lower()]


def answer_found(answer: str, context: str, question: str = "") -> tuple[str, bool] | None:
    """(kind of answer, whether the context holds it): ``date`` (every day the answer names is named in the
    context; a year-less mention on either side matches any year), ``month``, ``duration`` (the context states
    one of the answer's durations, `durations_asked`), or ``text`` (every content word); None for an answer
    that is only a small number the question does not make a duration, which no context check can confirm."""
    wanted_durations = durations_asked(answer, question)
    if wanted_durations:
        stated = {(_count(n), unit.lower()) for n, unit in _STATED.findall(context)}
        return "duration", bool(wanted_durations & stated)
    days, months = dates_in(answer)
    if days or months:
        have_days, have_months = dates_in(context)
        loose = {(m, d) for y, m, d in have_days if y is None}
        ok = all((y, m, d) in have_days or (m, d) in loose or (y is None and any((m, d) == (hm, hd) for _, hm, hd in have_days))
                 for y, m, d in days)
        ok = ok and all(ym in have_months for ym in months)
        return ("date" if days else "month"), ok
    wanted = words(answer)
    if not wanted or all(w.isdigit() and len(w) <= 3 for w in wanted):
        return None
    return "text", wanted <= words(context)


class SqliteVectors:
    """An `EmbeddingCache` on disk: one row per text key (the key already names the model)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path))
        self.db.execute("CREATE TABLE IF NOT EXISTS v (k TEXT PRIMARY KEY, b BLOB)")

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        for start in range(0, len(keys), 500):
            part = list(keys[start:start + 500])
            marks = ",".join("?" * len(part))
            for k, b in self.db.execute(f"SELECT k, b FROM v WHERE k IN ({marks})", part):
                found[k] = np.frombuffer(b, dtype=np.float32)
        return found

    def put_many(self, items: Mapping[str, np.ndarray]) -> None:
        rows = [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items.items()]
        self.db.executemany("INSERT OR REPLACE INTO v VALUES (?, ?)", rows)
        self.db.commit()


def rrf(*score_lists: np.ndarray) -> np.ndarray:
    fused = np.zeros(len(score_lists[0]))
    for scores in score_lists:
        ranks = np.empty(len(scores))
        ranks[np.argsort(-scores, kind="stable")] = np.arange(1, len(scores) + 1)
        fused += 1.0 / (RRF_K + ranks)
    return fused


def fit_in_order(order: Sequence[int], costs: Sequence[int], budget: int) -> list[int]:
    """Greedy: take messages in `order` while they fit (reply priming counted), in original order."""
    used, keep = 3, []
    for i in order:
        if used + costs[i] <= budget:
            keep.append(int(i))
            used += costs[i]
    return sorted(keep)


class Baselines:
    def __init__(self, methods: Sequence[str], tokenizer: Any, cache_dir: Path) -> None:
        self.methods = list(methods)
        self.tokenizer = tokenizer
        self.static = ctxfold.StaticEmbedder() if {"static", "bm25+static"} & set(self.methods) else None
        self.minilm = None
        if {"minilm", "bm25+minilm"} & set(self.methods):
            self.minilm = ctxfold.Embedder(cache=SqliteVectors(cache_dir / "minilm-vectors.sqlite"))
        self.trim = None
        if "trim_messages" in self.methods:
            try:
                from langchain_core.messages import AIMessage, HumanMessage
                from langchain_core.messages.utils import trim_messages
            except ImportError:
                print("note: langchain-core is not installed; trim_messages skipped", file=sys.stderr)
                self.methods.remove("trim_messages")
            else:
                self.trim = (trim_messages, HumanMessage, AIMessage)

    def prepare(self, msgs: list[dict[str, Any]]) -> dict[str, Any]:
        """What does not depend on the question: costs, the BM25 index, message vectors."""
        texts = [m["content"] for m in msgs]
        state: dict[str, Any] = {
            "costs": ctxfold.tokens.message_costs([{"role": m["role"], "content": m["content"]} for m in msgs],
                                                  self.tokenizer),
            "bm25": ctxfold.Bm25(texts),
        }
        if self.static is not None:
            state["static"] = np.asarray(self.static.embed(texts))
        if self.minilm is not None:
            state["minilm"] = np.asarray(self.minilm.embed(texts))
        return state

    def run(self, msgs: list[dict[str, Any]], state: dict[str, Any], question: str, budget: int) -> dict[str, list[int]]:
        """The indices each baseline keeps."""
        n, costs, out = len(msgs), state["costs"], {}
        scores: dict[str, np.ndarray] = {"bm25": np.asarray(state["bm25"].scores(question), dtype=np.float64)}
        if self.static is not None:
            scores["static"] = (state["static"] @ np.asarray(self.static.embed(question))).astype(np.float64)
        if self.minilm is not None:
            scores["minilm"] = (state["minilm"] @ np.asarray(self.minilm.embed(question))).astype(np.float64)
        for method in self.methods:
            if method == "recency":
                out[method] = fit_in_order(range(n - 1, -1, -1), costs, budget)
            elif method == "trim_messages":
                out[method] = self._trim(msgs, budget)
            else:
                parts = method.split("+")
                s = scores[parts[0]] if len(parts) == 1 else rrf(*(scores[p] for p in parts))
                out[method] = fit_in_order(np.argsort(-s, kind="stable"), costs, budget)
        return out

    def _trim(self, msgs: list[dict[str, Any]], budget: int) -> list[int]:
        trim_messages, human, ai = self.trim  # type: ignore[misc]
        lc = [human(m["content"], id=str(k)) if m["role"] == "user" else ai(m["content"], id=str(k))
              for k, m in enumerate(msgs)]

        def counter(ms: Sequence[Any]) -> int:
            return int(ctxfold.count_messages(
                [{"role": "user" if m.type == "human" else "assistant", "content": m.content} for m in ms],
                tokenizer=self.tokenizer))

        kept = trim_messages(lc, max_tokens=budget, token_counter=counter, strategy="last")
        return sorted(int(m.id) for m in kept)


def budgets(name: str, total: int, names: str) -> Iterator[tuple[str, int]]:
    """(label, budget) for each of the comma-separated `names`: "eighth" is 1/8
    of the history's `total` tokens, "fixed" the set's own budget; a budget
    below MIN_BUDGET is left out."""
    for budget_name in names.split(","):
        budget = total // 8 if budget_name == "eighth" else FIXED[name]
        if budget >= MIN_BUDGET:
            yield ("1/8" if budget_name == "eighth" else f"{budget:,}"), budget


def measure(context: str, by_id: Mapping[str, str], evidence: Sequence[str], with_coverage: bool) -> tuple[float, float]:
    verbatim = sum(by_id[i] in context for i in evidence) / len(evidence)
    if not with_coverage:
        return verbatim, float("nan")
    have = words(context)
    coverage = statistics.mean(len(words(by_id[i]) & have) / max(1, len(words(by_id[i]))) for i in evidence)
    return verbatim, coverage


def context_text(messages: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(m["content"] if isinstance(m.get("content"), str) else str(m.get("content")) for m in messages)


def evaluate_set(name: str, args: argparse.Namespace, engines: dict[str, Any], baselines: Baselines) -> dict[str, Any]:
    """Every question of the set at both budgets: one record per (question, budget, method)."""
    units = list(load_set(name, args.limit, args.temporal))
    half = (len(units) + 1) // 2
    records: list[dict[str, Any]] = []
    times: list[float] = []
    over = too_small = failed = 0
    for k, (unit, msgs, questions) in enumerate(units):
        by_id = {m["id"]: m["content"] for m in msgs}
        total = int(sum(ctxfold.count_tokens([m["content"] for m in msgs], encoding="cl100k_base")))
        state = baselines.prepare(msgs) if baselines.methods else None
        for q in questions:
            measured = list(budgets(name, total, args.budgets))
            # 1/8 of a short oracle history: below what the current turn alone needs.
            too_small += len(args.budgets.split(",")) - len(measured)
            for label, budget in measured:
                kept: dict[str, list[dict[str, Any]]] = {}
                for method, engine in engines.items():
                    t0 = time.perf_counter()
                    try:
                        res = engine.optimize(msgs, query=q.text, budget=budget, now=q.now)
                    except ctxfold.BudgetError:
                        failed += 1  # counted as keeping nothing
                        kept[method] = []
                    else:
                        times.append(time.perf_counter() - t0)
                        over += res.tokens > budget
                        kept[method] = res.messages
                if state is not None:
                    for method, idx in baselines.run(msgs, state, q.text, budget).items():
                        kept[method] = [msgs[i] for i in idx]
                for method, messages in kept.items():
                    context = context_text(messages)
                    v, c = measure(context, by_id, q.evidence, True)
                    record = {"budget": label, "method": method, "category": q.category,
                              "half": 1 if k < half else 2, "verbatim": v, "coverage": c}
                    if args.temporal:
                        found = answer_found(q.answer, context, q.text)
                        record["answer"] = found[0] if found else None
                        record["found"] = float(found[1]) if found else None
                        record["entity_recall"] = entity_recall([by_id[i] for i in q.evidence], context)
                    records.append(record)
        if args.progress:
            print(f"  {name} [{k + 1}/{len(units)}] {unit}: {len(msgs)} messages, {len(questions)} questions",
                  file=sys.stderr, flush=True)
    return {"records": records, "units": len(units),
            "questions": sum(len(q) for _, _, q in units),
            "median_ms": 1e3 * statistics.median(times) if times else None, "over_budget": over,
            "too_small": too_small, "failed": failed}


def print_found(records: Sequence[dict[str, Any]], present: Sequence[str]) -> None:
    """The share of questions whose answer is in the context, by the kind of answer."""
    print("\nfound (answer in the context)")
    print(f"{'budget':>6} {'answers':<28}" + "".join(f"{m:>16}" for m in present))
    for budget in dict.fromkeys(r["budget"] for r in records):
        rows = [r for r in records if r["budget"] == budget and r.get("answer")]
        for label, kinds in (("date", {"date"}), ("month", {"month"}), ("duration", {"duration"}), ("text", {"text"}),
                             ("all checkable", {"date", "month", "duration", "text"})):
            cells, count = [], 0
            for m in present:
                vals = [r["found"] for r in rows if r["method"] == m and r["answer"] in kinds]
                count = len(vals) or count
                cells.append(f"{statistics.mean(vals):>16.3f}" if vals else f"{'-':>16}")
            print(f"{budget:>6} {f'{label} ({count})':<28}" + "".join(cells))
    print("\nentity recall (the evidence messages' entities found in the context, annotations taken out)")
    for budget in dict.fromkeys(r["budget"] for r in records):
        cells = [statistics.mean(r["entity_recall"] for r in records if r["budget"] == budget and r["method"] == m)
                 for m in present]
        print(f"{budget:>6} {'all':<28}" + "".join(f"{c:>16.3f}" for c in cells))
    unchecked = sum(1 for r in records if r.get("answer") is None and r["method"] == present[0])
    print(f"(answers that are only a small number and no duration, not checkable: {unchecked} question-budget pairs)")


def print_tables(name: str, result: dict[str, Any], methods: Sequence[str]) -> None:
    records = result["records"]
    present = [m for m in methods if any(r["method"] == m for r in records)]
    timing = f"; optimize median {result['median_ms']:.0f} ms, {result['over_budget']} over budget" \
        if result["median_ms"] is not None else ""
    if result.get("failed"):
        timing += f"; {result['failed']} BudgetError (scored as nothing kept)"
    if result["too_small"]:
        timing += f"; {result['too_small']} (question, budget) pairs under {MIN_BUDGET} tokens left out"
    print(f"\n## {NAMES[name]}: {result['units']} chats/histories, {result['questions']} questions{timing}")
    for measure_name in ("verbatim", "coverage"):
        print(f"\n{measure_name}")
        head = f"{'budget':>6} {'rows':<28}" + "".join(f"{m:>14}" for m in present)
        print(head)
        for budget in dict.fromkeys(r["budget"] for r in records):
            rows = [r for r in records if r["budget"] == budget]
            groups: list[tuple[str, Any]] = [("all", lambda r: True)]
            groups += [(f"half {h}", (lambda h: lambda r: r["half"] == h)(h)) for h in (1, 2)]
            groups += [(f"  {c}", (lambda c: lambda r: r["category"] == c)(c))
                       for c in sorted(dict.fromkeys(r["category"] for r in rows))]
            for label, keep in groups:
                cells = []
                count = 0
                for m in present:
                    vals = [r[measure_name] for r in rows if r["method"] == m and keep(r)]
                    count = len(vals) or count
                    cells.append(f"{statistics.mean(vals):>14.3f}" if vals else f"{'-':>14}")
                print(f"{budget:>6} {f'{label} ({count})':<28}" + "".join(cells))
    if any("found" in r for r in records):
        print_found(records, present)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sets", default="lme,oracle,beam,realtalk", help="any of lme, oracle, beam, realtalk, lme_mix")
    parser.add_argument("--methods", default=",".join(METHODS), help=f"any of {', '.join(METHODS)}")
    parser.add_argument("--limit", type=int, default=None, help="the first N chats or histories of each set")
    parser.add_argument("--budgets", default="eighth,fixed", help="eighth (1/8 of the history), fixed, or both")
    parser.add_argument("--cache-dir", type=Path, default=Path.home() / ".cache" / "ctxfold-eval")
    parser.add_argument("--json", type=Path, default=None, help="write every record here")
    parser.add_argument("--progress", action="store_true")
    parser.add_argument("--temporal", action="store_true",
                        help="only the questions about time (lme, realtalk), with the answer found in the context")
    parser.add_argument("--config", default="", help="EngineConfig fields for the engine, ';'-separated JSON values: protect_last=1;summary_ratio=0.2")
    parser.add_argument("--arc", action="store_true", help="ctxfold with EngineConfig(conversation_arc=True)")
    args = parser.parse_args()
    args.methods = [m for m in args.methods.split(",") if m]
    unknown = set(args.methods) - set(METHODS)
    if unknown:
        parser.error(f"--methods: unknown {sorted(unknown)}; use {', '.join(METHODS)}")
    sets = [s for s in args.sets.split(",") if s]
    if set(sets) - set(FIXED):
        parser.error(f"--sets: unknown {sorted(set(sets) - set(FIXED))}; use {', '.join(FIXED)}")
    if set(args.budgets.split(",")) - {"eighth", "fixed"}:
        parser.error("--budgets: use eighth, fixed or eighth,fixed")
    if not (CHECKS / "common.py").is_file() or not (SHARED / "data" / "conversations").is_dir():
        print(f"skipped: evaluation data or its loaders not found under {SHARED} (set CTXFOLD_SHARED_DATA)")
        return 0
    if args.temporal and set(sets) - {"lme", "realtalk", "lme_mix"}:
        parser.error("--temporal: only lme, lme_mix and realtalk have questions about time")
    overrides = {k: json.loads(v) for k, v in (pair.split("=", 1) for pair in args.config.split(";") if pair)}
    if args.arc:
        overrides["conversation_arc"] = True
    # The reranker (EngineConfig rerank > 0) reads and keeps its MiniLM vectors in the disk cache the baselines use.
    reranker = ctxfold.Embedder(cache=SqliteVectors(args.cache_dir / "minilm-vectors.sqlite")) \
        if overrides.get("rerank") else "minilm"
    engines = {m: ctxfold.ContextEngine(encoding="cl100k_base", reranker=reranker,
                                        config=ctxfold.EngineConfig(**{**overrides, "annotate_dates": False}
                                                                    if m == "ctxfold-nodates" else overrides))
               for m in args.methods if m in ("ctxfold", "ctxfold-nodates")}
    baselines = Baselines([m for m in args.methods if m not in engines], ctxfold.get_tokenizer(encoding="cl100k_base"),
                          args.cache_dir)
    out: dict[str, Any] = {}
    for name in sets:
        start = time.perf_counter()
        out[name] = evaluate_set(name, args, engines, baselines)
        print_tables(name, out[name], args.methods)
        print(f"({time.perf_counter() - start:.0f} s)", flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(out), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
