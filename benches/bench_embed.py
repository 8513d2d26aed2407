"""Embedder vs a plain onnxruntime + tokenizers loop over the same model file,
same batch size (32), same truncation (256), padding to the longest text of
each batch, texts in the order given (no sorting). Both sides run uncached.

Groups (compare the two rows of a group; the README quotes the ratios):
- ``embed-mixed``: chat messages in conversation order (LongMemEval oracle
  sessions when ../shared/data is there, else a synthetic chat-like mix),
  where length bucketing pays;
- ``embed-uniform``: texts of nearly equal length, where it cannot (checks
  that the bookkeeping costs nothing);
- ``embed-cached``: the mixed set again with a warm cache (a hit costs a hash).

Run: python -m pytest benches/bench_embed.py --benchmark-enable -p no:cacheprovider
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
import onnxruntime as ort
import pytest
from ctxfold import Embedder
from ctxfold.models import locate_model
from tokenizers import Tokenizer

BATCH = 32
MAX_LENGTH = 256
MIXED_COUNT = 96
UNIFORM_COUNT = 64
REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("CTXFOLD_SHARED_DATA", REPO.parent / "shared" / "data"))  # as benches/conftest.py
ORACLE = DATA / "conversations" / "longmemeval_oracle"


def mixed_messages() -> tuple[str, list[str]]:
    """Chat messages in conversation order, no duplicates."""
    if ORACLE.is_dir():
        messages: list[str] = []
        for path in sorted(ORACLE.glob("*.json")):
            item = json.loads(path.read_text(encoding="utf-8"))
            for session in item["haystack_sessions"]:
                messages.extend(turn["content"] for turn in session if turn["content"].strip())
            if len(messages) >= 4 * MIXED_COUNT:
                break
        unique = list(dict.fromkeys(messages))
        return "longmemeval_oracle", unique[:MIXED_COUNT]
    print(f"\n[bench_embed] {ORACLE} not found: using a synthetic chat-like mix of lengths")
    return "synthetic", synthetic_mix(MIXED_COUNT)


def synthetic_mix(count: int) -> list[str]:
    """Short user turns alternating with long assistant answers (lognormal lengths)."""
    rng = random.Random(0)
    vocabulary = (
        "the project budget meeting Alice Bob deadline Tuesday invoice 2024 server database migration "
        "recipe travel Paris hotel booking flight gym schedule doctor appointment kids school garden"
    ).split()
    texts = []
    for i in range(count):
        words = int(rng.lognormvariate(2.3, 0.6)) if i % 2 == 0 else int(rng.lognormvariate(4.6, 0.7))
        texts.append(f"{i} " + " ".join(rng.choice(vocabulary) for _ in range(max(1, words))))
    return texts


def uniform_texts(count: int) -> list[str]:
    rng = random.Random(1)
    base = "Please remind me about the dentist appointment next week and the report for the team"
    return [f"{i}: {base} {' '.join(rng.sample(base.split(), 6))}." for i in range(count)]


class PlainLoop:
    """What one writes without ctxfold: tokenize a batch, pad to its longest, run, pool."""

    def __init__(self, threads: int | None = None) -> None:
        directory = locate_model()
        options = ort.SessionOptions()
        if threads is not None:
            options.intra_op_num_threads = threads
        self.session = ort.InferenceSession(
            str(directory / "model.onnx"), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_LENGTH)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest of each batch

    def embed(self, texts: list[str]) -> np.ndarray:
        out = []
        for start in range(0, len(texts), BATCH):
            encodings = self.tokenizer.encode_batch(texts[start : start + BATCH])
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self.session.run(None, feed)[0]
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / m.sum(axis=1)
            out.append(pooled / np.linalg.norm(pooled, axis=1, keepdims=True))
        return np.concatenate(out)


@pytest.fixture(scope="module")
def mixed() -> list[str]:
    source, texts = mixed_messages()
    e = Embedder(cache=None)
    lengths = np.array([len(x.ids) for x in e._tokenizer.encode_batch(texts)])
    print(
        f"\n[bench_embed] mixed set: {len(texts)} messages from {source}; tokens per message "
        f"p10/median/p90 = {np.percentile(lengths, [10, 50, 90]).astype(int).tolist()}, "
        f"{(lengths >= MAX_LENGTH).mean():.0%} cut at {MAX_LENGTH}"
    )
    return texts


@pytest.fixture(scope="module")
def plain() -> PlainLoop:
    return PlainLoop()


def _run(
    benchmark: Callable[..., object], fn: Callable[[list[str]], np.ndarray], texts: list[str], rounds: int
) -> None:
    benchmark.pedantic(fn, args=(texts,), rounds=rounds, iterations=1, warmup_rounds=1)  # type: ignore[attr-defined]


def test_same_vectors(mixed: list[str], plain: PlainLoop) -> None:
    sample = mixed[:BATCH]
    np.testing.assert_allclose(Embedder(cache=None).embed(sample), plain.embed(sample), atol=1e-5)


@pytest.mark.benchmark(group="embed-mixed")
def test_mixed_ctxfold(benchmark: Callable[..., object], mixed: list[str]) -> None:
    e = Embedder(cache=None, batch_size=BATCH)
    _run(benchmark, e.embed, mixed, rounds=2)
    print(f"\n[bench_embed] padding: {e.stats.padded_tokens / e.stats.tokens_encoded - 1:.0%} extra token slots")


@pytest.mark.benchmark(group="embed-mixed")
def test_mixed_plain_loop(benchmark: Callable[..., object], mixed: list[str], plain: PlainLoop) -> None:
    _run(benchmark, plain.embed, mixed, rounds=2)


@pytest.mark.benchmark(group="embed-uniform")
def test_uniform_ctxfold(benchmark: Callable[..., object]) -> None:
    _run(benchmark, Embedder(cache=None, batch_size=BATCH).embed, uniform_texts(UNIFORM_COUNT), rounds=5)


@pytest.mark.benchmark(group="embed-uniform")
def test_uniform_plain_loop(benchmark: Callable[..., object], plain: PlainLoop) -> None:
    _run(benchmark, plain.embed, uniform_texts(UNIFORM_COUNT), rounds=5)


@pytest.mark.benchmark(group="embed-cached")
def test_cached_ctxfold(benchmark: Callable[..., object], mixed: list[str]) -> None:
    e = Embedder(batch_size=BATCH)
    e.embed(mixed)  # warm
    benchmark(e.embed, mixed)


def test_mixed_paired_ratio(mixed: list[str]) -> None:
    """The speed-up measured in alternating pairs, one ONNX Runtime thread on
    each side, in wall time and in process CPU time: on a machine shared with
    other jobs the CPU-time ratio is the stable figure (printed, not asserted)."""
    plain = PlainLoop(threads=1)
    e = Embedder(cache=None, batch_size=BATCH, threads=1)
    wall, cpu = [], []
    for _ in range(3):
        c0, t0 = time.process_time(), time.perf_counter()
        plain.embed(mixed)
        c1, t1 = time.process_time(), time.perf_counter()
        e.embed(mixed)
        c2, t2 = time.process_time(), time.perf_counter()
        wall.append((t1 - t0) / (t2 - t1))
        cpu.append((c1 - c0) / (c2 - c1))
    tokens = e.stats.tokens_encoded // len(wall)
    print(
        f"\n[bench_embed] mixed, 1 thread, alternating pairs, plain loop / ctxfold: "
        f"CPU time {statistics.median(cpu):.2f}x ({', '.join(f'{r:.2f}' for r in cpu)}), "
        f"wall time {statistics.median(wall):.2f}x ({', '.join(f'{r:.2f}' for r in wall)}); "
        f"ctxfold {tokens / (c2 - c1):,.0f} tokens per CPU-second"
    )
