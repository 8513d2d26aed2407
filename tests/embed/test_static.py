"""StaticEmbedder: the Rust embedding against a numpy computation from the
shipped table, the direct tokenizer path against the `tokenizers` package,
shapes and semantics shared with `Embedder`, every error path, and the build
script reproducing the shipped table (slow: runs the ONNX model over the
whole vocabulary)."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from ctxfold import (
    CtxFoldError,
    InvalidInputError,
    InvalidTypeError,
    ModelError,
    ModelNotFoundError,
    StaticEmbedder,
)
from ctxfold.models import locate_model, read_checksums
from ctxfold.embed.static import STATIC_MODEL_SPEC
from hypothesis import given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO / "scripts" / "build_static_table.py"
#: The corpus the shipped table is fitted to (Debian's fortunes and fortunes-min packages).
FORTUNES = Path("/usr/share/games/fortunes")

TEXTS = [
    "Hello world.",
    "The meeting with Dr. Alvarez moved to 3 March 2024 at 14:30.",
    "I adopted a rescue greyhound named Pixel last spring; she loves the beach.",
    "Naïve café owners in Zürich serve crème brûlée — 4,50 CHF. 東京 and 🚀 too.",
    " ".join(["A long message about budgets, deadlines and the quarterly roadmap."] * 400),
    "ok",
    "[CLS] special [SEP] tokens typed as text, a[MASK]b, and [not-special]",
    "tabs\tand\nnewlines\r\nand a\x0bvertical tab, a zero\u200bwidth space, a NUL \x00 here",
    "snake_case, path/to/file.rs:42, https://example.com/?q=1&r=2, x**2 + y^3 ~ z",
    "antidisestablishmentarianism supercalifragilisticexpialidocious " + "x" * 101,
]


@pytest.fixture(scope="module")
def embedder() -> StaticEmbedder:
    return StaticEmbedder()


@pytest.fixture(scope="module")
def reference(embedder: StaticEmbedder):
    """The embedding by hand: `tokenizers` ids (no special tokens), float16
    table rows as float32, weighted mean, L2 normalisation."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(embedder.tokenizer_path))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    table = np.load(embedder.path / "table.npy").astype(np.float64)
    weights = np.load(embedder.path / "weights.npy").astype(np.float64)

    def embed(text: str) -> tuple[list[int], np.ndarray]:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        pooled = (weights[ids, None] * table[ids]).sum(axis=0) / max(weights[ids].sum(), 1e-30)
        norm = np.linalg.norm(pooled)
        return ids, (pooled / norm if norm > 0 else pooled)

    return embed


def test_shipped_table_shape_and_config(embedder: StaticEmbedder) -> None:
    assert embedder.vocab_size == 30522
    assert embedder.dim == embedder.config["dim"]
    assert embedder.tokenizer_path == locate_model("all-MiniLM-L6-v2") / "tokenizer.json"
    table = np.load(embedder.path / "table.npy")
    assert table.dtype == np.float16 and table.shape == (30522, embedder.dim)


def test_pinned_checksums_match_the_shipped_files(embedder: StaticEmbedder) -> None:
    sums = read_checksums(embedder.path)
    for f in STATIC_MODEL_SPEC.files:
        digest = hashlib.sha256((embedder.path / f.name).read_bytes()).hexdigest()
        assert digest == f.sha256 == sums[f.name], f.name
        assert (embedder.path / f.name).stat().st_size == f.size


@pytest.mark.parametrize("text", TEXTS)
def test_rust_embedding_equals_numpy_from_the_table(embedder: StaticEmbedder, reference, text: str) -> None:
    ids, want = reference(text)
    assert embedder.token_ids(text) == ids
    got = embedder.embed(text)
    assert got.dtype == np.float32 and got.shape == (embedder.dim,)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)


def test_batch_rows_equal_single_texts(embedder: StaticEmbedder, reference) -> None:
    batch = embedder.embed(TEXTS)
    assert batch.dtype == np.float32 and batch.shape == (len(TEXTS), embedder.dim)
    assert batch.flags.c_contiguous
    for row, text in zip(batch, TEXTS):
        np.testing.assert_allclose(row, reference(text)[1], atol=1e-5, rtol=0)
        np.testing.assert_array_equal(row, embedder.embed(text))
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-6)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=80) | st.text(alphabet=st.sampled_from(list(" \n\t.,!?'-[]#abcXYZ019é😀")), max_size=60))
def test_token_ids_and_embedding_match_tokenizers_on_any_text(embedder: StaticEmbedder, reference, text: str) -> None:
    ids, want = reference(text)
    assert embedder.token_ids(text) == ids
    np.testing.assert_allclose(embedder.embed(text), want, atol=1e-5, rtol=0)


def test_unweighted_is_the_plain_mean(embedder: StaticEmbedder) -> None:
    plain = StaticEmbedder(weighted=False)
    table = np.load(embedder.path / "table.npy").astype(np.float64)
    text = "Plain means weigh every token alike, even the and of."
    mean = table[plain.token_ids(text)].mean(axis=0)
    np.testing.assert_allclose(plain.embed(text), mean / np.linalg.norm(mean), atol=1e-5, rtol=0)
    assert not np.allclose(plain.embed(text), embedder.embed(text), atol=1e-3)
    assert "weighted=False" in repr(plain)
    with pytest.raises(InvalidTypeError, match="weighted"):
        StaticEmbedder(weighted=1)  # type: ignore[arg-type]


def test_same_call_shapes_as_embedder(embedder: StaticEmbedder) -> None:
    assert embedder.embed([]).shape == (0, embedder.dim)
    assert embedder.embed(("a", "b")).shape == (2, embedder.dim)
    assert embedder.embed(["a"]).shape == (1, embedder.dim)
    np.testing.assert_array_equal(embedder(["hello there"])[0], embedder.embed("hello there"))
    np.testing.assert_array_equal(asyncio.run(embedder.aembed(["x y", "z"])), embedder.embed(["x y", "z"]))


def test_empty_text_is_the_zero_vector(embedder: StaticEmbedder) -> None:
    out = embedder.embed(["", "   \n\t", "word"])
    np.testing.assert_array_equal(out[:2], 0.0)
    assert np.linalg.norm(out[2]) == pytest.approx(1.0, abs=1e-6)


def test_related_texts_are_closer(embedder: StaticEmbedder) -> None:
    a, b, c = embedder.embed(["my dog loves long walks", "walking the puppy in the park", "the quarterly invoice is overdue"])
    assert a @ b > a @ c


def test_count_tokens(embedder: StaticEmbedder) -> None:
    counts = embedder.count_tokens(["hello world", "", "unbelievable!"])
    assert counts.dtype == np.int64
    assert counts.tolist() == [len(embedder.token_ids(t)) for t in ["hello world", "", "unbelievable!"]]


@pytest.mark.parametrize("bad", [5, None, b"bytes", [1], ["ok", None], {"a": 1}])
def test_non_str_raises_invalid_type(embedder: StaticEmbedder, bad: object) -> None:
    with pytest.raises(InvalidTypeError, match="texts"):
        embedder.embed(bad)  # type: ignore[arg-type]


def test_lone_surrogate_raises_invalid_input(embedder: StaticEmbedder) -> None:
    with pytest.raises(InvalidInputError, match=r"texts\[1\].*surrogate"):
        embedder.embed(["fine", "bad \ud800"])


def test_token_ids_wants_a_str(embedder: StaticEmbedder) -> None:
    with pytest.raises(InvalidTypeError, match="text"):
        embedder.token_ids(3)  # type: ignore[arg-type]


@pytest.fixture
def copy_of_shipped(embedder: StaticEmbedder, tmp_path: Path) -> Path:
    target = tmp_path / "static"
    shutil.copytree(embedder.path, target)
    return target


def test_user_directory_loads_and_verifies(copy_of_shipped: Path, embedder: StaticEmbedder) -> None:
    mine = StaticEmbedder(copy_of_shipped)
    np.testing.assert_array_equal(mine.embed(TEXTS[:3]), embedder.embed(TEXTS[:3]))


def test_models_dir_finds_the_same_table(embedder: StaticEmbedder) -> None:
    other = StaticEmbedder(models_dir=embedder.path.parent)
    assert other.path == embedder.path
    with pytest.raises(InvalidInputError, match="either"):
        StaticEmbedder(embedder.path, models_dir=embedder.path.parent)


def test_missing_directory_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="nowhere") as info:
        StaticEmbedder(tmp_path / "nowhere")
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, CtxFoldError)


def test_wrong_path_type() -> None:
    with pytest.raises(InvalidTypeError, match="path"):
        StaticEmbedder(42)  # type: ignore[arg-type]


def test_missing_table_file_names_the_path(copy_of_shipped: Path) -> None:
    (copy_of_shipped / "table.npy").unlink()
    with pytest.raises(ModelNotFoundError, match="table.npy"):
        StaticEmbedder(copy_of_shipped)


def test_corrupt_table_fails_the_checksum(copy_of_shipped: Path) -> None:
    path = copy_of_shipped / "table.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ModelError, match=r"table\.npy.*sha256"):
        StaticEmbedder(copy_of_shipped)


def test_corrupt_table_without_checksums_names_the_path(copy_of_shipped: Path) -> None:
    (copy_of_shipped / "SHA256SUMS").unlink()
    path = copy_of_shipped / "table.npy"
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(ModelError, match=r"table\.npy"):
        StaticEmbedder(copy_of_shipped)


def test_wrong_dtype_and_shape_are_model_errors(copy_of_shipped: Path) -> None:
    (copy_of_shipped / "SHA256SUMS").unlink()
    np.save(copy_of_shipped / "table.npy", np.zeros((30522, 8), dtype=np.float32))
    with pytest.raises(ModelError, match=r"table\.npy.*float16"):
        StaticEmbedder(copy_of_shipped)
    np.save(copy_of_shipped / "table.npy", np.zeros((100, 8), dtype=np.float16))
    np.save(copy_of_shipped / "weights.npy", np.ones(100, dtype=np.float32))
    with pytest.raises(ModelError, match="100 rows") as info:
        StaticEmbedder(copy_of_shipped)
    assert str(copy_of_shipped) in str(info.value)


def test_bad_config_is_a_model_error(copy_of_shipped: Path) -> None:
    (copy_of_shipped / "SHA256SUMS").unlink()
    (copy_of_shipped / "config.json").write_text('{"format": "something-else"}', encoding="utf-8")
    with pytest.raises(ModelError, match="config.json"):
        StaticEmbedder(copy_of_shipped)
    (copy_of_shipped / "config.json").write_text("not json", encoding="utf-8")
    with pytest.raises(ModelError, match="config.json"):
        StaticEmbedder(copy_of_shipped)


def test_tokenizer_other_than_the_recorded_one_is_refused(copy_of_shipped: Path) -> None:
    (copy_of_shipped / "tokenizer.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ModelError, match="tokenizer.json"):
        StaticEmbedder(copy_of_shipped)


def _load_build_script():
    spec = importlib.util.spec_from_file_location("build_static_table", BUILD_SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_build_script_reproduces_the_shipped_table(embedder: StaticEmbedder, tmp_path: Path) -> None:
    """Runs the ONNX model over the 30,522 tokens and the fit's corpus (one thread): about two minutes."""
    pytest.importorskip("onnxruntime", reason="the build script needs onnxruntime")
    pytest.importorskip("scipy", reason="the build script's fit needs scipy")
    if not BUILD_SCRIPT.is_file():
        pytest.skip(f"{BUILD_SCRIPT} not found (tests run outside a source checkout)")
    build = _load_build_script()
    config = embedder.config
    fit = config["recipe"].get("fit")
    corpus = FORTUNES if fit else None
    if fit:
        if not FORTUNES.is_dir():
            pytest.skip(f"the table was fitted to {FORTUNES}, which is not here (apt-get install fortunes fortunes-min)")
        texts = build.corpus_texts(FORTUNES)
        if hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest() != fit["texts_sha256"]:
            pytest.skip(f"{FORTUNES} holds another version of the corpus than the table was fitted to ({fit['corpus']})")
    source = locate_model("all-MiniLM-L6-v2")
    build.build(source, tmp_path, config["dim"], config["recipe"]["sif_a"], config["recipe"]["pooling"], corpus)
    shipped = np.load(embedder.path / "table.npy").astype(np.float32)
    rebuilt = np.load(tmp_path / "table.npy").astype(np.float32)
    assert rebuilt.shape == shipped.shape
    # To float16 precision: the rebuilt values round to the shipped ones or to a
    # neighbouring float16 (another CPU's ONNX kernels may differ in the last float32 bits).
    ulp = np.spacing(np.abs(shipped).astype(np.float16)).astype(np.float32)
    assert np.all(np.abs(rebuilt - shipped) <= ulp + 1e-7), np.max(np.abs(rebuilt - shipped) / ulp)
    np.testing.assert_array_equal(np.load(tmp_path / "weights.npy"), np.load(embedder.path / "weights.npy"))
    assert json.loads((tmp_path / "config.json").read_text(encoding="utf-8")) == config
    if fit:
        np.testing.assert_allclose(np.load(tmp_path / "model_projection.npy"), embedder.model_projection, atol=1e-5)


def test_build_script_reads_a_fortune_corpus_and_fits_the_table_to_its_texts(embedder: StaticEmbedder,
                                                                            tmp_path: Path) -> None:
    if not BUILD_SCRIPT.is_file():
        pytest.skip(f"{BUILD_SCRIPT} not found (tests run outside a source checkout)")
    pytest.importorskip("scipy", reason="the build script's fit needs scipy")
    build = _load_build_script()
    (tmp_path / "work").write_text("The build passed its checks today.\n%\nToo short\n%\n"
                                   "The build passed its checks today.\n%\nA long review of the cache, kept for later.\n")
    (tmp_path / "work.dat").write_bytes(b"\x00index")
    (tmp_path / "art").write_text("art is skipped whatever it says\n")
    texts = build.corpus_texts(tmp_path)
    assert texts == ["The build passed its checks today.", "A long review of the cache, kept for later."]
    tokenizer_path = locate_model("all-MiniLM-L6-v2") / "tokenizer.json"
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(30522, 8))
    weights = build.zipf_sif_weights(30522, build.SIF_A)
    targets = rng.normal(size=(len(texts), 8))
    targets /= np.linalg.norm(targets, axis=1, keepdims=True)
    a = build.text_weights(weights, tokenizer_path, texts, 30522)
    fitted = build.fit_to_texts(vectors, a, targets)
    assert fitted.shape == vectors.shape

    def pooled(table: np.ndarray, text: str) -> np.ndarray:
        ids = embedder.token_ids(text)
        return (weights[ids] @ table[ids]) / weights[ids].sum()

    # Each text's weighted token mean moved towards the model's embedding of it, from the scaled
    # token vectors the fit starts at; tokens of no text are only scaled.
    means = np.array([pooled(vectors, t) for t in texts])
    start = vectors * float((means * targets).sum() / (means * means).sum())
    for text, target in zip(texts, targets):
        assert np.linalg.norm(pooled(fitted, text) - target) < np.linalg.norm(pooled(start, text) - target)
    unseen = 29000
    assert unseen not in {i for t in texts for i in embedder.token_ids(t)}
    ratio = fitted[unseen] / vectors[unseen]
    np.testing.assert_allclose(ratio, ratio[0])
    projected = build.projection(fitted, 4)
    assert projected.shape == (30522, 4)
    # The model projection maps each text's table embedding to the model's embedding of it.
    mapped = build.model_projection(a, projected.astype(np.float16), targets)
    assert mapped.shape == (4, 8) and mapped.dtype == np.float32
    table_means = np.array([pooled(projected.astype(np.float16).astype(np.float64), t) for t in texts])
    table_means /= np.linalg.norm(table_means, axis=1, keepdims=True)
    np.testing.assert_allclose(table_means @ mapped, targets, atol=1e-5)
