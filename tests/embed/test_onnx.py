"""Embedder: the shipped MiniLM against a direct onnxruntime computation, the
cache (hits skip inference), batching, arguments and model errors."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import ctxfold
import numpy as np
import onnxruntime as ort
import pytest
from ctxfold import (
    Embedder,
    InvalidInputError,
    InvalidTypeError,
    MemoryEmbeddingCache,
    ModelError,
    ModelNotFoundError,
    models,
)
from ctxfold.embed.onnx import ATTENTION_LENGTH, RUN_COST, length_buckets
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

TEXTS = [
    "",
    "Hello world.",
    "The meeting with Dr. Alvarez moved to 3 March 2024 at 14:30.",
    "I adopted a rescue greyhound named Pixel last spring; she loves the beach.",
    "Naïve café owners in Zürich serve crème brûlée — 4,50 CHF. 東京 and 🚀 too.",
    " ".join(["A long message about budgets, deadlines and the quarterly roadmap."] * 40),  # > 256 tokens
    "ok",
    "Could you summarise the trade-offs between PostgreSQL and SQLite for a small fleet of agents?",
]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder()


@pytest.fixture(scope="module")
def direct() -> Any:
    """all-MiniLM-L6-v2 by hand: one text per run, no padding at all."""
    directory = models.locate_model()
    session = ort.InferenceSession(str(directory / "model.onnx"), providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(256)

    def embed(text: str) -> np.ndarray:
        e = tokenizer.encode(text)
        ids = np.array([e.ids], dtype=np.int64)
        mask = np.array([e.attention_mask], dtype=np.int64)
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0][
            0
        ]
        v = hidden.mean(axis=0)
        return v / np.linalg.norm(v)

    return embed


class CountingSession:
    """Wraps an onnxruntime session and counts `run` calls."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.runs = 0
        self.rows = 0

    def run(self, names: Any, feed: Mapping[str, np.ndarray]) -> Any:
        self.runs += 1
        self.rows += len(feed["input_ids"])
        return self.session.run(names, feed)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)


def counted(e: Embedder) -> CountingSession:
    counter = CountingSession(e._session)
    e._session = counter
    return counter


class DictStore:
    """A stand-in for a persistent store: anything with get_many/put_many."""

    def __init__(self) -> None:
        self.data: dict[str, np.ndarray] = {}
        self.gets = 0

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        self.gets += 1
        return {k: self.data[k] for k in keys if k in self.data}

    def put_many(self, items: Mapping[str, np.ndarray]) -> None:
        self.data.update({k: np.asarray(v).copy() for k, v in items.items()})


def test_matches_a_direct_onnxruntime_computation(embedder: Embedder, direct: Any) -> None:
    got = Embedder(cache=None, batch_size=3).embed(TEXTS)  # padded, sorted, several batches
    want = np.stack([direct(t) for t in TEXTS])
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(embedder.embed(TEXTS), want, atol=1e-5)


def test_shape_dtype_and_unit_norm(embedder: Embedder) -> None:
    out = embedder.embed(TEXTS)
    assert out.shape == (len(TEXTS), 384) and out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    assert embedder.dim == 384


def test_single_text_and_empty_list(embedder: Embedder) -> None:
    one = embedder.embed("Hello world.")
    assert one.shape == (384,)
    np.testing.assert_allclose(one, embedder.embed(["Hello world."])[0], atol=1e-6)
    empty = embedder.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    assert embedder(("a tuple works",)).shape == (1, 384)


def test_order_and_batching_do_not_change_vectors() -> None:
    sorted_e = Embedder(cache=None, batch_size=2)
    plain_e = Embedder(cache=None, batch_size=5, sort_by_length=False)
    forward = sorted_e.embed(TEXTS)
    np.testing.assert_allclose(sorted_e.embed(TEXTS[::-1])[::-1], forward, atol=1e-5)
    np.testing.assert_allclose(plain_e.embed(TEXTS), forward, atol=1e-5)


def test_similar_sentences_are_closer(embedder: Embedder) -> None:
    a, b, c = embedder.embed(
        ["A man is eating food.", "A man is eating a piece of bread.", "The stock market fell today."]
    )
    assert a @ b > 0.6 > a @ c


def test_length_bucketing_cuts_padding() -> None:
    texts = [f"short {i}" for i in range(4)] + [f"long {i} " + " ".join(["word"] * 200) for i in range(4)]
    mixed = [t for pair in zip(texts[:4], texts[4:]) for t in pair]  # short, long, short, long...
    sorted_e = Embedder(cache=None, batch_size=4)
    plain_e = Embedder(cache=None, batch_size=4, sort_by_length=False)
    sorted_e.embed(mixed)
    plain_e.embed(mixed)
    assert sorted_e.stats.tokens_encoded == plain_e.stats.tokens_encoded
    assert sorted_e.stats.padded_tokens < 0.6 * plain_e.stats.padded_tokens


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 256), max_size=120), st.integers(1, 40))
def test_length_buckets_cover_everything_within_the_batch_size(lengths: list[int], batch_size: int) -> None:
    sorted_lengths = np.sort(np.array(lengths, dtype=np.int64))
    bounds = length_buckets(sorted_lengths, batch_size)
    assert [i for s, e in bounds for i in range(s, e)] == list(range(len(lengths)))
    assert all(0 < e - s <= batch_size for s, e in bounds)
    n = len(lengths)
    fixed = [(s, min(s + batch_size, n)) for s in range(0, n, batch_size)]

    def cost(cuts: list[tuple[int, int]]) -> float:
        widths = [(e - s, float(sorted_lengths[e - 1])) for s, e in cuts]
        return sum(RUN_COST + k * w * (1 + w / ATTENTION_LENGTH) for k, w in widths)

    assert cost(bounds) <= cost(fixed) + 1e-6  # never worse than fixed-size chunks of the sorted texts


def test_cache_hits_skip_inference() -> None:
    e = Embedder(batch_size=4)
    session = counted(e)
    first = e.embed(TEXTS)
    runs = session.runs
    assert 2 <= runs <= len(TEXTS) and session.rows == len(TEXTS)
    again = e.embed(TEXTS)
    assert session.runs == runs  # all hits: no inference
    np.testing.assert_array_equal(first, again)
    e.embed(TEXTS + ["one new text"])
    assert session.runs == runs + 1 and session.rows == len(TEXTS) + 1
    assert e.stats.cache_hits == 2 * len(TEXTS) and e.stats.texts_encoded == len(TEXTS) + 1


def test_duplicates_in_one_call_are_encoded_once() -> None:
    e = Embedder(cache=None)
    session = counted(e)
    out = e.embed(["same", "other", "same", "same"])
    assert session.rows == 2
    np.testing.assert_array_equal(out[0], out[2])


def test_no_cache_always_runs() -> None:
    e = Embedder(cache=None)
    session = counted(e)
    e.embed(["a", "b"])
    e.embed(["a", "b"])
    assert session.runs == 2 and e.cache is None


def test_returned_arrays_do_not_alias_the_cache() -> None:
    e = Embedder()
    out = e.embed(["mutable?"])
    out[:] = 0.0
    assert np.linalg.norm(e.embed(["mutable?"])[0]) == pytest.approx(1.0, abs=1e-5)


def test_a_pluggable_store_is_shared_between_embedders() -> None:
    store = DictStore()
    e1 = Embedder(cache=store)
    v = e1.embed(["persist me", "and me"])
    assert len(store.data) == 2
    e2 = Embedder(cache=store)
    session = counted(e2)
    np.testing.assert_array_equal(e2.embed(["and me", "persist me"]), v[::-1])
    assert session.runs == 0


def test_cache_keys_depend_on_model_settings_and_text(embedder: Embedder) -> None:
    assert embedder.key("a") == embedder.key("a") != embedder.key("b")
    assert Embedder(max_length=128, cache=None).key("a") != embedder.key("a")
    assert len(embedder.key("a")) == 32


def test_another_cut_shares_the_session_and_never_the_vectors() -> None:
    texts = ["The lighthouse keeper logged every ship that passed the rocky point during the long storm. " * 4]
    base = Embedder(cache=True)
    short = base.with_max_length(16)
    assert short._session is base._session and short.max_length == 16 and base.max_length == 256
    assert short.key(texts[0]) != base.key(texts[0]) and short.model_id != base.model_id
    np.testing.assert_allclose(short.embed(texts), Embedder(max_length=16, cache=None).embed(texts), atol=1e-6)
    assert not np.allclose(short.embed(texts), base.embed(texts), atol=1e-3)
    assert short.stats.texts_encoded == 1 and base.stats.texts_encoded == 1
    with pytest.raises(InvalidInputError, match="max_length"):
        base.with_max_length(0)


def test_memory_cache_evicts_least_recently_used() -> None:
    cache = MemoryEmbeddingCache(max_entries=2)
    v = np.ones(3, dtype=np.float32)
    cache.put_many({"a": v, "b": v})
    cache.get_many(["a"])
    cache.put_many({"c": v})
    assert set(cache.get_many(["a", "b", "c"])) == {"a", "c"} and len(cache) == 2
    cache.clear()
    assert len(cache) == 0
    with pytest.raises(InvalidInputError, match="max_entries"):
        MemoryEmbeddingCache(0)


def test_threads_and_batch_size_are_configurable() -> None:
    e = Embedder(threads=1, batch_size=3, cache=None)
    session = counted(e)
    e.embed([f"text number {i}" for i in range(10)])  # all the same length: full batches
    assert session.runs == 4


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"batch_size": 0}, InvalidInputError, "batch_size"),
        ({"batch_size": 2.0}, InvalidTypeError, "batch_size"),
        ({"max_length": 0}, InvalidInputError, "max_length"),
        ({"threads": 0}, InvalidInputError, "threads"),
        ({"threads": True}, InvalidTypeError, "threads"),
        ({"cache": "yes"}, InvalidTypeError, "cache"),
        ({"model_dir": 3}, InvalidTypeError, "model_dir"),
        ({"model_dir": ".", "models_dir": "."}, InvalidInputError, "model_dir"),
    ],
)
def test_bad_constructor_arguments(kwargs: dict[str, Any], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        Embedder(**kwargs)


@pytest.mark.parametrize(
    ("texts", "match"),
    [
        (["ok", 3], r"texts\[1\]: expected str, got int"),
        ([None], r"texts\[0\]"),
        (b"bytes", "texts"),
        (42, "texts"),
        ({"a": 1}, "texts"),
    ],
)
def test_non_str_input_is_a_type_error(embedder: Embedder, texts: Any, match: str) -> None:
    with pytest.raises(InvalidTypeError, match=match):
        embedder.embed(texts)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=6))
def test_any_text_embeds_to_unit_vectors(texts: list[str]) -> None:
    out = _shared().embed(texts)
    assert out.shape == (len(texts), 384)
    if texts:
        np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-4)


_SHARED: list[Embedder] = []


def _shared() -> Embedder:
    if not _SHARED:
        _SHARED.append(Embedder())
    return _SHARED[0]


def test_aembed(embedder: Embedder) -> None:
    out = asyncio.run(embedder.aembed(["async text"]))
    np.testing.assert_allclose(out, embedder.embed(["async text"]), atol=1e-6)


def test_models_dir_and_env_var_are_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / models.DEFAULT_EMBEDDING_MODEL
    shutil.copytree(models.locate_model(), target)
    assert Embedder(models_dir=tmp_path).model_dir == target
    monkeypatch.setenv(models.MODELS_ENV, str(tmp_path))
    assert Embedder().model_dir == target


def test_missing_model_names_the_path_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError) as e:
        Embedder(models_dir=tmp_path)
    assert str(tmp_path) in str(e.value) and "CTXFOLD_MODELS" in str(e.value)
    (tmp_path / "tokenizer.json").write_text("{}", encoding="utf-8")
    with pytest.raises(FileNotFoundError, match="model.onnx"):
        Embedder(model_dir=tmp_path)


def test_corrupt_shipped_model_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / models.DEFAULT_EMBEDDING_MODEL
    shutil.copytree(models.locate_model(), target)
    data = bytearray((target / "model.onnx").read_bytes())
    data[len(data) // 2] ^= 0x01
    (target / "model.onnx").write_bytes(bytes(data))
    monkeypatch.setenv(models.MODELS_ENV, str(tmp_path))
    with pytest.raises(ModelError, match="corrupt or a different version") as e:
        Embedder()
    assert str(target / "model.onnx") in str(e.value) and "Fix" in str(e.value)


def test_unloadable_user_model_is_a_model_error(tmp_path: Path) -> None:
    shutil.copyfile(models.locate_model() / "tokenizer.json", tmp_path / "tokenizer.json")
    (tmp_path / "model.onnx").write_bytes(b"not an onnx file")
    with pytest.raises(ModelError, match="cannot be loaded by onnxruntime") as e:
        Embedder(model_dir=tmp_path)
    assert str(tmp_path / "model.onnx") in str(e.value)
    (tmp_path / "tokenizer.json").write_text("not json", encoding="utf-8")
    with pytest.raises(ModelError, match="tokenizer.json"):
        Embedder(model_dir=tmp_path)


def test_user_model_dir_with_checksums(tmp_path: Path) -> None:
    for name in ("model.onnx", "tokenizer.json"):
        shutil.copyfile(models.locate_model() / name, tmp_path / name)
    spec = models.KNOWN_MODELS[models.DEFAULT_EMBEDDING_MODEL]
    sums = "".join(f"{f.sha256}  {f.name}\n" for f in spec.files)
    (tmp_path / "SHA256SUMS").write_text(sums, encoding="utf-8")
    assert Embedder(model_dir=tmp_path).embed(["x"]).shape == (1, 384)
    (tmp_path / "SHA256SUMS").write_text(sums.replace(spec.files[0].sha256, "0" * 64), encoding="utf-8")
    with pytest.raises(ModelError, match="SHA256SUMS"):
        Embedder(model_dir=tmp_path)


def test_public_names() -> None:
    for name in ("Embedder", "EmbeddingCache", "MemoryEmbeddingCache"):
        assert name in ctxfold.__all__ and hasattr(ctxfold, name)
    assert isinstance(MemoryEmbeddingCache(), ctxfold.EmbeddingCache)
    assert "dim=384" in repr(Embedder(cache=None))
