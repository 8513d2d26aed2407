"""`ContextEngine.optimize` on a 500-message, ~100,000-token conversation to a
12,000-token budget (against the speed targets), with the peer measured in the
same run.

Groups (compare the rows of a group):
- ``optimize-cold``: a fresh engine each round, nothing cached (goal < 2 s):
  token counts, BM25, the static embedder and the summaries all computed,
  and MiniLM loaded to embed the question and the openings of the first
  stage's 100 best messages (as in a new process);
- ``optimize-warm``: the same engine and conversation again (goal < 200 ms):
  per-message token counts, embeddings and summaries come from the caches;
- ``optimize-incremental``: the warm engine given the conversation plus one
  new 500-token turn (goal < 50 ms);
- ``rerank-*``: the same three with the preset that reads more
  (``EngineConfig.reranked()``: MiniLM over the first 256 tokens of the first
  stage's 150 best messages, where the default reads 64 of 100), the default
  beside it in the group; cold loads the model too;
- the peer, in each group: langchain-core's `trim_messages` (recency only,
  exact o200k counts via the same tokenizer) when langchain-core is installed.

The conversation: the first LongMemEval-S history cut to 500 turns (about
100K tokens) with its question as the query when ../shared/data is there,
else a synthetic chat of the same size.

Run: python -m pytest benches/bench_engine.py --benchmark-enable -p no:cacheprovider
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from ctxfold import ContextEngine, EngineConfig, count_messages, get_tokenizer
from ctxfold.embed.projected import _encoder_in

from conftest import SHARED_DATA

MESSAGES = 500
BUDGET = 12_000
TOK = get_tokenizer()


def conversation() -> tuple[list[dict[str, Any]], str]:
    files = sorted((SHARED_DATA / "conversations" / "longmemeval_s").glob("*.json"))
    if files:
        turns: list[dict[str, Any]] = []
        for path in files[:2]:  # one history has ~450 turns: the second one's older sessions come first
            data = json.loads(path.read_text(encoding="utf-8"))
            turns = [
                {"role": t["role"], "content": t["content"],
                 "timestamp": date.split(" (")[0].replace("/", "-") + "T" + date.split(") ")[-1] + ":00"}
                for date, session in zip(data["haystack_dates"], data["haystack_sessions"])
                for t in session
            ] + turns
        return turns[-MESSAGES:], data["question"]
    print("\n[bench_engine] LongMemEval-S not found: using a synthetic chat")
    return synthetic(), "What did we decide about the Lisbon hotel budget?"


def synthetic(seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    words = ("plan budget trip hotel train museum engine brakes cake guests python error test data deploy "
             "review meeting invoice schedule garden recipe flight Lisbon Maria Toyota 2024 15 300").split()
    out = []
    for i in range(MESSAGES):
        n = rng.randint(20, 60) if i % 2 == 0 else rng.randint(200, 560)
        out.append({"role": "user" if i % 2 == 0 else "assistant",
                    "content": " ".join(rng.choice(words) for _ in range(n)) + "."})
    return out


MESSAGES_IN, QUERY = conversation()
NEW_TURN = {"role": "user", "content": TOK.truncate(" ".join(m["content"] for m in MESSAGES_IN[:20]), 500)}


def test_conversation_size() -> None:
    tokens = count_messages(MESSAGES_IN, tokenizer=TOK)
    print(f"\n[bench_engine] {len(MESSAGES_IN)} messages, {tokens} tokens, budget {BUDGET}")
    assert len(MESSAGES_IN) == MESSAGES and tokens > 8 * BUDGET


def _check(result) -> None:
    assert result.tokens <= BUDGET


@pytest.mark.benchmark(group="optimize-cold")
def test_optimize_cold(benchmark) -> None:
    def run():
        # The MiniLM session that embeds questions is shared by a process's engines: dropped
        # here, so each round is a new process's first call and loads the model.
        _encoder_in.cache_clear()
        return ContextEngine(model="gpt-4o").optimize(MESSAGES_IN, query=QUERY, budget=BUDGET)

    _check(benchmark.pedantic(run, rounds=3, iterations=1, warmup_rounds=1))


def _warm_engine(config: EngineConfig | None = None) -> ContextEngine:
    engine = ContextEngine(model="gpt-4o", config=config)
    engine.optimize(MESSAGES_IN, query=QUERY, budget=BUDGET)
    return engine


@pytest.mark.benchmark(group="optimize-warm")
def test_optimize_warm(benchmark) -> None:
    engine = _warm_engine()
    _check(benchmark.pedantic(lambda: engine.optimize(MESSAGES_IN, query=QUERY, budget=BUDGET), rounds=10, iterations=1))


@pytest.mark.benchmark(group="optimize-incremental")
def test_optimize_incremental(benchmark) -> None:
    engine = _warm_engine()
    grown = [*MESSAGES_IN, NEW_TURN]
    _check(benchmark.pedantic(lambda: engine.optimize(grown, query=QUERY, budget=BUDGET), rounds=10, iterations=1))


RERANK = EngineConfig.reranked()


@pytest.mark.benchmark(group="rerank-cold")
def test_rerank_cold(benchmark) -> None:
    def run():
        _encoder_in.cache_clear()  # the shared session reads the short list too: a new process loads it
        return ContextEngine(model="gpt-4o", config=RERANK).optimize(MESSAGES_IN, query=QUERY, budget=BUDGET)

    _check(benchmark.pedantic(run, rounds=2, iterations=1, warmup_rounds=1))


@pytest.mark.benchmark(group="rerank-cold")
def test_rerank_cold_default(benchmark) -> None:
    test_optimize_cold(benchmark)


@pytest.mark.benchmark(group="rerank-warm")
def test_rerank_warm(benchmark) -> None:
    engine = _warm_engine(RERANK)
    _check(benchmark.pedantic(lambda: engine.optimize(MESSAGES_IN, query=QUERY, budget=BUDGET), rounds=10, iterations=1))


@pytest.mark.benchmark(group="rerank-warm")
def test_rerank_warm_default(benchmark) -> None:
    test_optimize_warm(benchmark)


@pytest.mark.benchmark(group="rerank-incremental")
def test_rerank_incremental(benchmark) -> None:
    engine = _warm_engine(RERANK)
    grown = [*MESSAGES_IN, NEW_TURN]
    _check(benchmark.pedantic(lambda: engine.optimize(grown, query=QUERY, budget=BUDGET), rounds=10, iterations=1))


@pytest.mark.benchmark(group="rerank-incremental")
def test_rerank_incremental_default(benchmark) -> None:
    test_optimize_incremental(benchmark)


def _trim_peer(benchmark) -> None:
    core = pytest.importorskip("langchain_core.messages")
    lc = [core.HumanMessage(m["content"]) if m["role"] == "user" else core.AIMessage(m["content"]) for m in MESSAGES_IN]

    def counter(msgs) -> int:
        return sum(TOK.count(str(m.content)) + 4 for m in msgs) + 3

    benchmark.pedantic(
        lambda: core.trim_messages(lc, max_tokens=BUDGET, token_counter=counter, strategy="last"), rounds=10, iterations=1
    )


@pytest.mark.benchmark(group="optimize-cold")
def test_trim_messages_cold(benchmark) -> None:
    _trim_peer(benchmark)


@pytest.mark.benchmark(group="optimize-warm")
def test_trim_messages_warm(benchmark) -> None:
    _trim_peer(benchmark)


@pytest.mark.benchmark(group="optimize-incremental")
def test_trim_messages_incremental(benchmark) -> None:
    _trim_peer(benchmark)
