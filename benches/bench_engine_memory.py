"""A long-lived `ContextEngine` stays within its memory caps: 4,000 distinct
generated agent conversations (tool calls, large tool outputs, about 6,000
tokens each) fitted one after another into 2,000 tokens by one engine with
``archive_bytes`` and ``cache_bytes`` set small, so both bounds are reached
early and then held.

What is measured: the time of the whole stream (``engine-memory`` group) and
the process's resident memory (RSS; psutil, else /proc/self/statm; skipped
where neither exists) after a first call (models loaded), after a warm-up of
400 conversations (the caches and the archive full), and at the end.

What is asserted, and why those bounds:
- the engine's own accounting stays within the caps (`archive.nbytes`,
  `cache.nbytes`);
- RSS growth over the 3,600 conversations after the warm-up is below half
  the caps together: by then every table is at its bound, so what still
  grows is leaks and allocator fragmentation, while without bounds the
  stream would add its whole footprint (printed as ``unbounded estimate``:
  the bytes each conversation adds to the archive and caches, measured on
  the warm-up, times 3,600; over a gigabyte);
- RSS growth over the whole stream, warm-up included, is below 1.5 times the
  caps plus 32 MiB: the caps are approximate bytes of keys and values, and
  the allocator keeps some freed memory (pymalloc arenas, malloc's free
  lists) rather than returning it.

Run: python -m pytest benches/bench_engine_memory.py --benchmark-enable -p no:cacheprovider -s
(-s shows the RSS lines)."""

from __future__ import annotations

import gc
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from ctxfold import ContextEngine

CONVERSATIONS = 4_000
WARMUP = 400
BUDGET = 2_000
ARCHIVE_BYTES = 8 << 20
CACHE_BYTES = 32 << 20
CAPS = ARCHIVE_BYTES + CACHE_BYTES
WORDS = (
    "plan budget trip hotel train museum engine brakes cake guests python error test data deploy review meeting "
    "invoice schedule garden recipe flight Lisbon Maria Toyota 2024 15 300 kernel cache socket latency retry "
    "timeout parser index query vector shard replica backup restore migrate"
).split()
TOOLS = ("search_flights", "read_file", "run_tests", "query_db")


def conversation(n: int) -> list[dict[str, Any]]:
    """Conversation `n`: 8-14 user turns, half with a tool call whose output
    is 200-1,200 words; every text carries `n` and a random tag, so no two
    conversations share a message (nothing is served from another's cache)."""
    rng = random.Random(n)

    def text(words: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(words)) + f" (case {n}-{rng.randrange(10**6)})."

    messages: list[dict[str, Any]] = [{"role": "system", "content": f"You are agent {n}. Be brief."}]
    for turn in range(rng.randint(8, 14)):
        messages.append({"role": "user", "content": text(rng.randint(10, 60))})
        if rng.random() < 0.5:
            call_id = f"call_{n}_{turn}"
            arguments = json.dumps({"q": text(5)})
            messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": rng.choice(TOOLS), "arguments": arguments}}]})
            messages.append({"role": "tool", "tool_call_id": call_id, "content": text(rng.randint(200, 1200))})
        messages.append({"role": "assistant", "content": text(rng.randint(30, 200))})
    return messages


def rss_bytes() -> int | None:
    """The process's resident set size now (not the peak)."""
    try:
        import psutil
    except ImportError:
        statm = Path("/proc/self/statm")
        if not statm.exists():
            return None
        return int(statm.read_text(encoding="ascii").split()[1]) * os.sysconf("SC_PAGE_SIZE")
    return int(psutil.Process().memory_info().rss)


def peak_rss_bytes() -> int | None:
    try:
        import resource
    except ImportError:
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def mib(n: float) -> str:
    return f"{n / (1 << 20):.1f} MiB"


@pytest.mark.benchmark(group="engine-memory")
def test_long_lived_engine_stays_within_its_memory_caps(benchmark) -> None:
    if benchmark.disabled:
        pytest.skip("a long run: only with --benchmark-enable")
    if rss_bytes() is None:
        pytest.skip("no way to read the resident set size here (needs psutil or /proc)")
    engine = ContextEngine(archive_bytes=ARCHIVE_BYTES, cache_bytes=CACHE_BYTES)
    engine.optimize(conversation(-1), budget=BUDGET)  # models and tables loaded: not what is measured
    gc.collect()
    rss = {"start": rss_bytes()}
    removed = 0

    def stream(first: int, last: int) -> None:
        nonlocal removed
        for n in range(first, last):
            result = engine.optimize(conversation(n), budget=BUDGET)
            assert result.tokens <= BUDGET
            removed += sum(r.status != "kept" for r in result.items)

    archive_before = engine.archive.nbytes
    stream(0, 50)
    # What one conversation adds before any bound bites (caches not yet full after 50).
    per_conversation = (engine.archive.nbytes - archive_before + engine.cache.nbytes) / 50
    stream(50, WARMUP)
    gc.collect()
    rss["warm"] = rss_bytes()
    benchmark.pedantic(stream, args=(WARMUP, CONVERSATIONS), rounds=1, iterations=1)
    gc.collect()
    rss["end"] = rss_bytes()

    steady = rss["end"] - rss["warm"]
    total = rss["end"] - rss["start"]
    figures = {
        "rss_start": rss["start"], "rss_warm": rss["warm"], "rss_end": rss["end"], "rss_peak": peak_rss_bytes(),
        "growth_after_warmup": steady, "growth_total": total, "archive_bytes": engine.archive.nbytes,
        "cache_bytes": engine.cache.nbytes, "unbounded_estimate": per_conversation * (CONVERSATIONS - WARMUP),
        "messages_removed": removed,
    }
    benchmark.extra_info.update(figures)
    print(
        f"\n[engine-memory] {CONVERSATIONS} conversations, caps: archive {mib(ARCHIVE_BYTES)} + caches {mib(CACHE_BYTES)}"
        f"\n  RSS after the first call {mib(rss['start'])}, after {WARMUP} (warm) {mib(rss['warm'])}, "
        f"at the end {mib(rss['end'])}" + (f", peak {mib(figures['rss_peak'])}" if figures["rss_peak"] else "")
        + f"\n  growth after the warm-up {mib(steady)}, in all {mib(total)}"
        f"\n  engine accounting: archive {mib(engine.archive.nbytes)} ({len(engine.archive)} originals), "
        f"caches {mib(engine.cache.nbytes)}; {removed} messages removed"
        f"\n  unbounded estimate for the {CONVERSATIONS - WARMUP} after the warm-up: {mib(figures['unbounded_estimate'])}"
    )
    assert engine.archive.nbytes <= ARCHIVE_BYTES and engine.cache.nbytes <= CACHE_BYTES
    assert figures["unbounded_estimate"] > 4 * CAPS, "the stream must be large enough for the bounds to matter"
    assert steady < CAPS // 2, f"RSS grew {mib(steady)} after the caps were reached"
    assert total < CAPS * 3 // 2 + (32 << 20), f"RSS grew {mib(total)} in all (caps {mib(CAPS)})"
