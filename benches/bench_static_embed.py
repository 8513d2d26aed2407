"""StaticEmbedder against the ONNX MiniLM it was distilled from, and against
the same computation in numpy (the `tokenizers` package + a table lookup).

Groups (compare the rows of a group; the README quotes the ratios):
- ``static-vs-onnx``: the same chat turns (the first ``ONNX_TURNS`` of a
  LongMemEval-S history, or a synthetic mix when ../shared/data is absent)
  through `StaticEmbedder` and through `Embedder` (int8 MiniLM, uncached);
- ``static-history``: a whole history (~110K tokens) through `StaticEmbedder`
  and through the numpy reference.

``test_tokens_per_second`` prints the figure the issue asks for: tokens per
second of each side in alternating runs, wall time and process CPU time
(static: tokens without special tokens, all of them; MiniLM: the tokens it
runs, ``[CLS]``/``[SEP]`` included, texts cut at 256).

Run: python -m pytest benches/bench_static_embed.py --benchmark-enable -p no:cacheprovider
"""

from __future__ import annotations

import json
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from ctxfold import Embedder, StaticEmbedder
from tokenizers import Tokenizer

ONNX_TURNS = 48
REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("CTXFOLD_SHARED_DATA", REPO.parent / "shared" / "data"))  # as benches/conftest.py
LONGMEMEVAL_S = DATA / "conversations" / "longmemeval_s"


@pytest.fixture(scope="module")
def history() -> list[str]:
    """The turns of one long chat history, in order."""
    files = sorted(LONGMEMEVAL_S.glob("*.json")) if LONGMEMEVAL_S.is_dir() else []
    if files:
        item = json.loads(files[0].read_text(encoding="utf-8"))
        turns = [t["content"] for session in item["haystack_sessions"] for t in session]
        print(f"\n[bench_static_embed] history: {files[0].name}, {len(turns)} turns")
        return turns
    print(f"\n[bench_static_embed] {LONGMEMEVAL_S} not found: using a synthetic chat-like history")
    rng = random.Random(0)
    words = ["the", "project", "budget", "meeting", "Alice", "Bob", "deadline", "Tuesday", "invoice", "2024", "server", "database", "migration", "recipe", "travel", "Paris", "hotel", "booking", "flight", "gym", "schedule", "doctor", "appointment", "kids", "school", "garden,", "."]
    return [
        " ".join(rng.choice(words) for _ in range(int(rng.lognormvariate(2.3 if i % 2 == 0 else 5.2, 0.6)) + 1))
        for i in range(400)
    ]


@pytest.fixture(scope="module")
def static() -> StaticEmbedder:
    return StaticEmbedder()


@pytest.fixture(scope="module")
def onnx() -> Embedder:
    return Embedder(cache=None)


class NumpyReference:
    """What one writes without the core: `tokenizers` batch encoding, then a
    numpy weighted mean of the table rows per text."""

    def __init__(self, static: StaticEmbedder) -> None:
        self.tokenizer = Tokenizer.from_file(str(static.tokenizer_path))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.table = np.load(static.path / "table.npy").astype(np.float32)
        self.weights = np.load(static.path / "weights.npy").astype(np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        out = np.zeros((len(texts), self.table.shape[1]), dtype=np.float32)
        for i, e in enumerate(encodings):
            if e.ids:
                ids = np.asarray(e.ids)
                out[i] = self.weights[ids] @ self.table[ids]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)


def _run(benchmark: Callable[..., object], fn: Callable[[list[str]], np.ndarray], texts: list[str], rounds: int) -> None:
    benchmark.pedantic(fn, args=(texts,), rounds=rounds, iterations=1, warmup_rounds=1)  # type: ignore[attr-defined]


def test_reference_agrees(history: list[str], static: StaticEmbedder) -> None:
    sample = history[:64]
    np.testing.assert_allclose(static.embed(sample), NumpyReference(static).embed(sample), atol=1e-5)


@pytest.mark.benchmark(group="static-vs-onnx")
def test_turns_ctxfold_static(benchmark: Callable[..., object], history: list[str], static: StaticEmbedder) -> None:
    _run(benchmark, static.embed, history[:ONNX_TURNS], rounds=50)


@pytest.mark.benchmark(group="static-vs-onnx")
def test_turns_onnx_minilm(benchmark: Callable[..., object], history: list[str], onnx: Embedder) -> None:
    _run(benchmark, onnx.embed, history[:ONNX_TURNS], rounds=2)


@pytest.mark.benchmark(group="static-history")
def test_history_ctxfold_static(benchmark: Callable[..., object], history: list[str], static: StaticEmbedder) -> None:
    _run(benchmark, static.embed, history, rounds=10)


@pytest.mark.benchmark(group="static-history")
def test_history_numpy_reference(benchmark: Callable[..., object], history: list[str], static: StaticEmbedder) -> None:
    _run(benchmark, NumpyReference(static).embed, history, rounds=3)


def test_tokens_per_second(history: list[str], static: StaticEmbedder, onnx: Embedder) -> None:
    """Alternating runs; the static side repeats its pass until it has run
    about as long as one ONNX pass, so both are timed over comparable spans."""
    turns = history[:ONNX_TURNS]
    static_tokens = int(static.count_tokens(turns).sum())
    static.embed(turns)
    onnx.embed(turns[:2])
    rates: dict[str, list[tuple[float, float]]] = {"static": [], "onnx": []}
    for _ in range(3):
        before = onnx.stats.tokens_encoded
        c0, t0 = time.process_time(), time.perf_counter()
        onnx.embed(turns)
        c1, t1 = time.process_time(), time.perf_counter()
        onnx_tokens = onnx.stats.tokens_encoded - before
        rates["onnx"].append((onnx_tokens / (t1 - t0), onnx_tokens / (c1 - c0)))
        repeats = 0
        c2, t2 = time.process_time(), time.perf_counter()
        while time.perf_counter() - t2 < min(t1 - t0, 2.0) or repeats < 3:
            static.embed(turns)
            repeats += 1
        c3, t3 = time.process_time(), time.perf_counter()
        rates["static"].append((repeats * static_tokens / (t3 - t2), repeats * static_tokens / (c3 - c2)))
    wall = {k: statistics.median(r[0] for r in v) for k, v in rates.items()}
    cpu = {k: statistics.median(r[1] for r in v) for k, v in rates.items()}
    print(
        f"\n[bench_static_embed] {len(turns)} turns, {os.cpu_count()} cores: "
        f"static {wall['static']:,.0f} tokens/s ({cpu['static']:,.0f} per CPU-second), "
        f"MiniLM ONNX {wall['onnx']:,.0f} tokens/s ({cpu['onnx']:,.0f} per CPU-second); "
        f"static / ONNX = {wall['static'] / wall['onnx']:.0f}x wall, {cpu['static'] / cpu['onnx']:.0f}x CPU"
    )
    big = int(static.count_tokens(history).sum())
    t0 = time.perf_counter()
    static.embed(history)
    dt = time.perf_counter() - t0
    print(f"[bench_static_embed] whole history: {big:,} tokens in {dt * 1e3:.0f} ms = {big / dt:,.0f} tokens/s")
