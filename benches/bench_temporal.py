"""Temporal references over a 500-message conversation, with entity
extraction, and a peer measured in the same run.

Groups (compare the rows of a group):
- ``text-500``: `resolve_dates` plus `extract_entities` on every message
  (goal: well under 100 ms together), `annotate_dates` alone, against
  dateparser's `search_dates` with each message's time as the relative base
  (skipped when dateparser is not importable);
- ``engine-annotate-500``: the engine's annotation step
  (`with_date_annotations`: annotate, count the changed messages again)
  over the same messages as parsed items: cold (no cache), warm (the
  engine's cache holds the annotations and counts of an earlier call), and
  one added message; and warm with the ``said`` notes the engine writes
  (each message's day and how long before now, not cached: they change
  with now).

The messages: the first 500 of REALTALK (real chats between two people,
each with its time) when ../shared/data is there, else a synthetic chat.

Run: python -m pytest benches/bench_temporal.py --benchmark-enable -p no:cacheprovider
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from pathlib import Path

import pytest
from ctxfold import get_tokenizer
from ctxfold.engine.messages import parse_messages, with_date_annotations
from ctxfold.engine.cache import EngineCache
from ctxfold.text.entities import extract_entities
from ctxfold.text.temporal import annotate_dates, resolve_dates

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("CTXFOLD_SHARED_DATA", REPO.parent / "shared" / "data"))  # as benches/conftest.py
COUNT = 500
TOK = get_tokenizer(encoding="cl100k_base")


def _messages() -> list[dict]:
    files = sorted((DATA / "conversations" / "realtalk").glob("Chat_*.json"))
    out: list[dict] = []
    for f in files:
        data = json.loads(f.read_text(encoding="utf-8"))
        sessions = sorted((k for k in data if k.startswith("session_") and k[8:].isdigit()), key=lambda k: int(k[8:]))
        for k in sessions:
            for t in data[k]:
                stamp = dt.datetime.strptime(t["date_time"], "%d.%m.%Y, %H:%M:%S").isoformat()
                out.append({"role": "user" if len(out) % 2 == 0 else "assistant",
                            "content": f"{t['speaker']}: {t['clean_text']}", "timestamp": stamp})
                if len(out) == COUNT:
                    return out
    rng = random.Random(7)
    phrases = ["yesterday", "last week", "two days ago", "tomorrow", "this weekend", "on Friday", "next month", "today"]
    start = dt.datetime(2023, 12, 28, 18, 0)
    return [
        {"role": "user" if k % 2 == 0 else "assistant",
         "content": f"Kate: {rng.choice(phrases)} I met Melanie at the Berlin office about the 2.3 release; "
                    f"{rng.choice(phrases)} we fixed src/app.py for $40.",
         "timestamp": (start + dt.timedelta(hours=k)).isoformat()}
        for k in range(COUNT)
    ]


MESSAGES = _messages()
TEXTS = [m["content"] for m in MESSAGES]
ANCHORS = [dt.datetime.fromisoformat(m["timestamp"]) for m in MESSAGES]


def _ours() -> int:
    found = 0
    for text, anchor in zip(TEXTS, ANCHORS):
        found += len(resolve_dates(text, anchor)) + len(extract_entities(text))
    return found


@pytest.mark.benchmark(group="text-500")
def test_ctxfold_dates_and_entities(benchmark) -> None:
    assert benchmark(_ours) > 0


@pytest.mark.benchmark(group="text-500")
def test_ctxfold_annotate_dates(benchmark) -> None:
    out = benchmark(lambda: [annotate_dates(t, a) for t, a in zip(TEXTS, ANCHORS)])
    assert any(o != t for o, t in zip(out, TEXTS))


@pytest.mark.benchmark(group="text-500")
def test_dateparser_search_dates(benchmark) -> None:
    search = pytest.importorskip("dateparser.search", reason="dateparser is not installed")

    def run() -> int:
        found = 0
        for text, anchor in zip(TEXTS, ANCHORS):
            found += len(search.search_dates(text, languages=["en"], settings={"RELATIVE_BASE": anchor}) or ())
        return found

    assert benchmark.pedantic(run, rounds=2, iterations=1, warmup_rounds=1) > 0


ITEMS = parse_messages(MESSAGES, TOK)


@pytest.mark.benchmark(group="engine-annotate-500")
def test_ctxfold_engine_annotation_cold(benchmark) -> None:
    out = benchmark(lambda: with_date_annotations(ITEMS, TOK, None))
    assert sum(a.tokens for a in out) > sum(b.tokens for b in ITEMS)


@pytest.mark.benchmark(group="engine-annotate-500")
def test_ctxfold_engine_annotation_warm(benchmark) -> None:
    cache = EngineCache()
    with_date_annotations(ITEMS, TOK, cache)
    out = benchmark(lambda: with_date_annotations(ITEMS, TOK, cache))
    assert sum(a.tokens for a in out) > sum(b.tokens for b in ITEMS)


@pytest.mark.benchmark(group="engine-annotate-500")
def test_ctxfold_engine_annotation_added_turn(benchmark) -> None:
    cache = EngineCache()
    with_date_annotations(ITEMS, TOK, cache)
    benchmark(lambda: with_date_annotations(ITEMS[-1:], TOK, cache))


@pytest.mark.benchmark(group="engine-annotate-500")
def test_ctxfold_engine_annotation_said_warm(benchmark) -> None:
    cache = EngineCache()
    now = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)
    with_date_annotations(ITEMS, TOK, cache, said=True, now=now)
    out = benchmark(lambda: with_date_annotations(ITEMS, TOK, cache, said=True, now=now))
    assert all(a.date_note.startswith("[said ") for a, b in zip(out, ITEMS) if b.timestamp is not None and b.role in ("user", "assistant"))
