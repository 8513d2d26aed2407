"""Decoding speed of `OnnxSeq2SeqSummarizer` on the tests' tiny Optimum-style
ONNX model (tests/seq2seq_fixture.py): generated tokens per second, greedy
and beam search (4 beams) with the KV cache (merged decoder), and greedy
without the cache as the peer. The model is tiny, so this measures the
decoding loop's own cost (session calls, cache shuffling, beam bookkeeping),
not a transformer's.

Run: python -m pytest benches/bench_seq2seq.py --benchmark-enable -p no:cacheprovider -s
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from ctxfold import OnnxSeq2SeqSummarizer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from seq2seq_fixture import EOS, PAD, UNK, V, WORDS, weights, write_model  # noqa: E402

NEW_TOKENS = 48
TEXTS = [" ".join(WORDS[(i + j) % len(WORDS)] for j in range(30)) for i in range(16)]


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory) -> dict[str, Path]:
    table = np.random.default_rng(0).normal(size=(V, V)).astype(np.float32)
    table[:, [EOS, PAD, UNK]] = -30.0  # only words, never an early stop: every text decodes NEW_TOKENS tokens
    w = weights(table, history_scale=0.1, cross_scale=0.1)
    root = tmp_path_factory.mktemp("seq2seq")
    return {layout: write_model(root / layout, w, layout=layout) for layout in ("merged", "no_cache")}


def _run(benchmark, directory: Path, beams: int, label: str) -> None:
    summarizer = OnnxSeq2SeqSummarizer(directory, always_summarize=True, num_beams=beams, max_new_tokens=NEW_TOKENS)
    out = benchmark.pedantic(lambda: summarizer.summarize(TEXTS, NEW_TOKENS), rounds=5, iterations=1, warmup_rounds=1)
    generated = sum(len(s.split()) for s in out)
    seconds = benchmark.stats.stats.mean
    print(f"\n[bench_seq2seq] {label}: {generated} tokens in {seconds * 1e3:.0f} ms = {generated / seconds:,.0f} tokens/s")
    assert generated >= len(TEXTS) * NEW_TOKENS // 2


@pytest.mark.benchmark(group="seq2seq greedy")
def test_greedy_kv_cache(benchmark, model_dirs) -> None:
    _run(benchmark, model_dirs["merged"], 1, "greedy, KV cache")


@pytest.mark.benchmark(group="seq2seq greedy")
def test_greedy_no_cache_peer(benchmark, model_dirs) -> None:
    _run(benchmark, model_dirs["no_cache"], 1, "greedy, no cache")


@pytest.mark.benchmark(group="seq2seq beam 4")
def test_beam4_kv_cache(benchmark, model_dirs) -> None:
    _run(benchmark, model_dirs["merged"], 4, "beam 4, KV cache")
