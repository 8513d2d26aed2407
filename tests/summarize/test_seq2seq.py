"""OnnxSeq2SeqSummarizer and its decoding loop, on tiny deterministic
encoder/decoder models built in tmp_path (tests/seq2seq_fixture.py) in the
three layouts Optimum writes."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import ctxfold
import numpy as np
import pytest
from ctxfold import (
    InvalidInputError,
    InvalidTypeError,
    ModelError,
    ModelNotFoundError,
    OnnxSeq2SeqSummarizer,
    Summarizer,
    get_tokenizer,
)
from ctxfold.models import sha256_file
from ctxfold.summarize.seq2seq_model import GenerationConfig, Seq2SeqModel, generate
from seq2seq_fixture import EOS, PAD, V, chain, reference_greedy, tok, weights, write_model

LAYOUTS = ["merged", "with_past", "no_cache"]

# <s> -> alpha -> beta -> gamma -> </s>; after gamma the runner-up is a chain
# delta -> epsilon -> zeta (each would rather end).
STRAIGHT = chain(
    {
        ("<s>", "alpha"): 5,
        ("alpha", "beta"): 5,
        ("beta", "gamma"): 5,
        ("gamma", "</s>"): 5,
        ("gamma", "delta"): 3,
        ("delta", "</s>"): 5,
        ("delta", "epsilon"): 3,
        ("epsilon", "</s>"): 5,
        ("epsilon", "zeta"): 3,
        ("zeta", "</s>"): 5,
    }
)
# alpha <-> beta forever; the runner-ups end the loop.
LOOP = chain(
    {("<s>", "alpha"): 5, ("alpha", "beta"): 5, ("beta", "alpha"): 5, ("alpha", "delta"): 3, ("delta", "</s>"): 5}
)
# Greedy takes alpha (p=0.62) but then faces a flat choice; the beam sees
# that beta (p=0.38) is followed by a near-certain end.
TRAP = chain(
    {("<s>", "alpha"): 2.0, ("<s>", "beta"): 1.5, ("beta", "</s>"): 8.0}
    | {("alpha", w): 0.0 for w in ["gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]}
    | {("alpha", "</s>"): -1.0}
    | {(w, "</s>"): 8.0 for w in ["gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]},
    default=-30.0,
)
RANDOM = np.random.default_rng(7).normal(size=(V, V)).astype(np.float32)


def build(tmp_path: Path, table: np.ndarray, layout: str = "merged", **kwargs: object) -> Path:
    w = weights(table, **{k: v for k, v in kwargs.items() if k in ("history_scale", "cross_scale", "seed")})  # type: ignore[arg-type]
    extra = {k: v for k, v in kwargs.items() if k in ("generation", "config")}
    return write_model(tmp_path / f"{layout}-model", w, layout=layout, **extra)  # type: ignore[arg-type]


def summarizer(directory: Path, **kwargs: object) -> OnnxSeq2SeqSummarizer:
    return OnnxSeq2SeqSummarizer(directory, always_summarize=True, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_greedy_produces_the_expected_sequence(tmp_path: Path, layout: str) -> None:
    model = Seq2SeqModel(build(tmp_path, STRAIGHT, layout))
    assert model.layout == layout
    ids = [tok("kappa"), tok("iota"), EOS]
    assert generate(model, ids, model.default_generation()) == [tok("alpha"), tok("beta"), tok("gamma"), EOS]
    s = summarizer(model.model_dir)
    assert s.summarize(["kappa iota"], budget=50) == ["alpha beta gamma"]


@pytest.mark.parametrize("layout", ["merged", "with_past"])
def test_onnx_subdirectory_and_variant_file_names(tmp_path: Path, layout: str) -> None:
    # The layout of exports shared for transformers.js: onnx/<part>_quantized.onnx.
    directory = build(tmp_path, STRAIGHT, layout)
    (directory / "onnx").mkdir()
    for f in directory.glob("*.onnx"):
        f.rename(directory / "onnx" / f.name.replace(".onnx", "_quantized.onnx"))
    with pytest.raises(ModelNotFoundError, match="variant="):
        OnnxSeq2SeqSummarizer(directory)
    s = summarizer(directory, variant="quantized")
    assert s.model.onnx_dir == directory / "onnx" and s.model.layout == layout
    assert s.summarize(["kappa"], 50) == ["alpha beta gamma"]
    with pytest.raises(InvalidInputError, match="variant"):
        OnnxSeq2SeqSummarizer(directory, variant="../x")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_kv_cache_matches_recomputing_from_scratch(tmp_path: Path, layout: str) -> None:
    # History and cross terms make every logit depend on the whole cache.
    directory = build(tmp_path, RANDOM, layout, history_scale=1.0, cross_scale=1.0, seed=3)
    model = Seq2SeqModel(directory)
    w = weights(RANDOM, history_scale=1.0, cross_scale=1.0, seed=3)
    for text in (["delta", "epsilon"], ["kappa"], ["alpha", "beta", "gamma", "delta", "eta"]):
        ids = [tok(t) for t in text] + [EOS]
        config = model.default_generation().updated(max_new_tokens=15)
        assert generate(model, ids, config) == reference_greedy(w, ids, 15)


def test_beam_search_agrees_across_layouts(tmp_path: Path) -> None:
    results = []
    for layout in LAYOUTS:
        model = Seq2SeqModel(build(tmp_path, RANDOM, layout, history_scale=1.0, cross_scale=1.0, seed=5))
        config = model.default_generation().updated(max_new_tokens=12, num_beams=3, no_repeat_ngram_size=2)
        results.append([generate(model, [tok(t) for t in ("zeta", "eta")] + [EOS], config) for _ in range(2)])
    assert results[0] == results[1] == results[2]
    assert results[0][0] == results[0][1]  # deterministic


def test_one_beam_is_greedy(tmp_path: Path) -> None:
    model = Seq2SeqModel(build(tmp_path, RANDOM, history_scale=1.0, cross_scale=1.0, seed=9))
    ids = [tok("theta"), EOS]
    base = model.default_generation().updated(max_new_tokens=10)
    from ctxfold.summarize import seq2seq_model as seq2seq

    assert seq2seq._beam_search(model, model.encode(ids), base) == generate(model, ids, base)


def test_beam_search_escapes_the_greedy_trap(tmp_path: Path) -> None:
    s = summarizer(build(tmp_path, TRAP), num_beams=1)
    assert s.summarize(["alpha"], 50) == ["alpha gamma"]
    beam = summarizer(s.model.model_dir, num_beams=2).summarize(["alpha"], 50)[0]
    assert beam == "beta"


def test_min_length_bans_the_end(tmp_path: Path) -> None:
    directory = build(tmp_path, STRAIGHT)
    assert summarizer(directory).summarize(["iota"], 50) == ["alpha beta gamma"]
    # min_length counts the start token: 6 means at least 5 tokens before </s>.
    assert summarizer(directory, min_length=6).summarize(["iota"], 50) == ["alpha beta gamma delta epsilon"]


def test_min_length_never_forces_more_than_the_target(tmp_path: Path) -> None:
    s = summarizer(build(tmp_path, STRAIGHT), min_length=50)
    out = s.summarize(["iota"], budget=4)
    assert out == ["alpha beta gamma delta"]
    assert s.generated_tokens <= 2 * 4 + 8


def test_no_repeat_ngram_size(tmp_path: Path) -> None:
    directory = build(tmp_path, LOOP)
    assert summarizer(directory, max_new_tokens=6).summarize(["iota"], 50) == ["alpha beta alpha beta alpha beta"]
    assert summarizer(directory, no_repeat_ngram_size=2).summarize(["iota"], 50) == ["alpha beta alpha delta"]
    beams = summarizer(directory, no_repeat_ngram_size=2, num_beams=3, max_new_tokens=8).summarize(["iota"], 50)[0]
    words = beams.split()
    assert len({tuple(words[i : i + 2]) for i in range(len(words) - 1)}) == len(words) - 1


def test_max_new_tokens_stops_without_eos(tmp_path: Path) -> None:
    model = Seq2SeqModel(build(tmp_path, LOOP))
    for beams in (1, 2):
        out = generate(model, [tok("iota"), EOS], model.default_generation().updated(max_new_tokens=5, num_beams=beams))
        assert len(out) == 5 and EOS not in out


def test_generation_config_and_forced_tokens(tmp_path: Path) -> None:
    generation = {"forced_bos_token_id": tok("kappa"), "forced_eos_token_id": EOS, "max_length": 5, "num_beams": 2}
    model = Seq2SeqModel(build(tmp_path, LOOP, generation=generation))
    config = model.default_generation()
    assert config.num_beams == 2 and config.max_new_tokens == 4 and config.forced_bos_token_id == tok("kappa")
    out = generate(model, [tok("iota"), EOS], config.updated(num_beams=1))
    assert out == [tok("kappa"), PAD, tok("alpha"), EOS]  # forced start and end; <pad> is also <s> -> alpha


def test_default_max_length_is_not_a_limit(tmp_path: Path) -> None:
    # 20 is Hugging Face's default, serialised by old configs that set nothing.
    model = Seq2SeqModel(build(tmp_path, LOOP, generation={"max_length": 20}))
    assert model.default_generation().max_new_tokens == 128


def test_task_specific_parameters_are_used(tmp_path: Path) -> None:
    task = {
        "summarization": {
            "prefix": "kappa ",
            "num_beams": 3,
            "max_length": 60,
            "no_repeat_ngram_size": 3,
            "min_length": 2,
        }
    }
    s = OnnxSeq2SeqSummarizer(build(tmp_path, STRAIGHT, config={"task_specific_params": task}))
    g = s.generation
    assert (g.num_beams, g.max_new_tokens, g.no_repeat_ngram_size, g.min_length) == (3, 59, 3, 2)
    assert s.prefix == "kappa "
    s2 = OnnxSeq2SeqSummarizer(s.model.model_dir, num_beams=1, prefix="", max_new_tokens=7)
    assert (s2.generation.num_beams, s2.generation.max_new_tokens, s2.prefix) == (1, 7, "")


def test_query_template_feeds_the_query(tmp_path: Path) -> None:
    # cross = 10 * identity: the first token is the most frequent input word.
    table = chain({(w, "</s>"): 20.0 for w in ["delta", "kappa"]}, default=0.0)
    w = weights(table)
    w.cross = 10 * np.eye(V, dtype=np.float32)
    directory = write_model(tmp_path / "model", w)
    plain = summarizer(directory)
    assert plain.summarize(["delta delta delta"], 50, query="kappa") == ["delta"]
    focused = summarizer(directory, query_template="{query} {query} {query} {query} {text}")
    assert focused.summarize(["delta delta delta"], 50, query="kappa") == ["kappa"]
    assert focused.summarize(["delta delta delta"], 50) == ["delta"]


@pytest.mark.parametrize("target", [1, 2, 3, 5, 8, 13])
def test_target_tokens_are_respected_exactly(tmp_path: Path, target: int) -> None:
    counter = get_tokenizer(encoding="cl100k_base")
    s = summarizer(build(tmp_path, LOOP), max_new_tokens=40, tokenizer=counter)
    (out,) = s.summarize(["iota kappa"], target)
    assert 0 < counter.count(out) <= target
    assert out == counter.truncate(" ".join(["alpha beta"] * 30), target).strip()


def test_per_text_targets_and_texts_that_already_fit(tmp_path: Path) -> None:
    s = OnnxSeq2SeqSummarizer(build(tmp_path, STRAIGHT))
    short, long = "iota", " ".join(["kappa"] * 30)
    assert s.summarize([short, long], [10, 5]) == [short, "alpha beta gamma"]
    assert s.generated_tokens == 4  # only the long text went through the model


def test_asummarize_and_the_protocol(tmp_path: Path) -> None:
    s = summarizer(build(tmp_path, STRAIGHT))
    assert isinstance(s, Summarizer)
    assert asyncio.run(s.asummarize(["iota", "kappa"], 50)) == ["alpha beta gamma"] * 2
    assert "OnnxSeq2SeqSummarizer" in ctxfold.__all__


@pytest.mark.parametrize(
    ("texts", "target", "error", "match"),
    [
        ([""], 10, InvalidInputError, r"texts\[0\]: empty"),
        (["ok", "   \n"], 10, InvalidInputError, r"texts\[1\]: empty"),
        (["ok"], 0, InvalidInputError, "budget: must be a positive"),
        (["ok"], -5, InvalidInputError, "budget"),
        (["ok", "ok"], [3, 0], InvalidInputError, r"budget\[1\]"),
        (["ok"], [3, 4], InvalidInputError, "2 budgets for 1 texts"),
        (["ok"], 2.5, InvalidTypeError, "budget"),
        (["ok"], True, InvalidTypeError, "budget"),
        (["ok"], "10", InvalidTypeError, "budget"),
        ("ok", 10, InvalidTypeError, r"wrap it in a list"),
        ([3], 10, InvalidTypeError, r"texts\[0\]: expected str"),
    ],
)
def test_bad_inputs(tmp_path: Path, texts: object, target: object, error: type[Exception], match: str) -> None:
    s = summarizer(build(tmp_path, STRAIGHT))
    with pytest.raises(error, match=match):
        s.summarize(texts, target)  # type: ignore[arg-type]
    with pytest.raises(error, match=match):
        asyncio.run(s.asummarize(texts, target))  # type: ignore[arg-type]


def test_bad_query(tmp_path: Path) -> None:
    with pytest.raises(InvalidTypeError, match="query"):
        summarizer(build(tmp_path, STRAIGHT)).summarize(["ok"], 5, query=3)  # type: ignore[arg-type]


def test_too_long_input_is_refused_unless_truncation_is_asked(tmp_path: Path) -> None:
    directory = build(tmp_path, STRAIGHT)  # max_position_embeddings = 64
    long = " ".join(["kappa"] * 100)
    with pytest.raises(InvalidInputError, match=r"texts\[0\]: 101 model tokens.*truncate_input=True"):
        summarizer(directory).summarize([long], 50)
    assert summarizer(directory, truncate_input=True).summarize([long], 50) == ["alpha beta gamma"]
    assert summarizer(directory, max_input_tokens=200).summarize([long], 50) == ["alpha beta gamma"]


def test_wrong_model_directory(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="not a directory") as e:
        OnnxSeq2SeqSummarizer(tmp_path / "missing")
    assert isinstance(e.value, FileNotFoundError) and "optimum-cli export onnx" in str(e.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match="encoder_model.onnx"):
        OnnxSeq2SeqSummarizer(tmp_path / "empty")
    with pytest.raises(InvalidTypeError, match="model_dir"):
        OnnxSeq2SeqSummarizer(3)  # type: ignore[arg-type]


def test_missing_tokenizer_and_config(tmp_path: Path) -> None:
    directory = build(tmp_path, STRAIGHT)
    (directory / "tokenizer.json").unlink()
    with pytest.raises(ModelNotFoundError, match="tokenizer.json"):
        OnnxSeq2SeqSummarizer(directory)
    directory = build(tmp_path / "b", STRAIGHT)
    (directory / "config.json").write_text(json.dumps({"model_type": "t5"}), encoding="utf-8")
    with pytest.raises(ModelError, match="decoder_start_token_id"):
        OnnxSeq2SeqSummarizer(directory)
    (directory / "config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelError, match="not valid JSON"):
        OnnxSeq2SeqSummarizer(directory)


def test_corrupt_or_mismatched_files(tmp_path: Path) -> None:
    directory = build(tmp_path, STRAIGHT)
    good = sha256_file(directory / "encoder_model.onnx")
    (directory / "SHA256SUMS").write_text(f"{'0' * 64}  encoder_model.onnx\n", encoding="utf-8")
    with pytest.raises(ModelError, match="corrupt or a different version"):
        OnnxSeq2SeqSummarizer(directory)
    (directory / "SHA256SUMS").write_text(f"{good}  encoder_model.onnx\n", encoding="utf-8")
    OnnxSeq2SeqSummarizer(directory)
    (directory / "decoder_model_merged.onnx").write_bytes(b"garbage")
    with pytest.raises(ModelError, match="decoder_model_merged.onnx cannot be loaded"):
        OnnxSeq2SeqSummarizer(directory)


def test_with_past_file_without_past_inputs_is_refused(tmp_path: Path) -> None:
    directory = build(tmp_path, STRAIGHT, "with_past")
    shutil.copyfile(directory / "decoder_model.onnx", directory / "decoder_with_past_model.onnx")
    with pytest.raises(ModelError, match="past_key_values"):
        OnnxSeq2SeqSummarizer(directory)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"num_beams": 0}, InvalidInputError, "num_beams"),
        ({"max_new_tokens": 0}, InvalidInputError, "max_new_tokens"),
        ({"min_length": -1}, InvalidInputError, "min_length"),
        ({"no_repeat_ngram_size": 1.5}, InvalidTypeError, "no_repeat_ngram_size"),
        ({"query_template": "no fields"}, InvalidInputError, "query_template"),
        ({"max_input_tokens": 1}, InvalidInputError, "max_input_tokens"),
        ({"threads": 0}, InvalidInputError, "threads"),
        ({"tokenizer": "o200k_base"}, InvalidTypeError, "tokenizer"),
    ],
)
def test_bad_settings(tmp_path: Path, kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        OnnxSeq2SeqSummarizer(build(tmp_path, STRAIGHT), **kwargs)  # type: ignore[arg-type]


def test_generation_config_needs_an_eos() -> None:
    with pytest.raises(InvalidInputError, match="eos_token_ids"):
        GenerationConfig(decoder_start_token_id=PAD, eos_token_ids=())
