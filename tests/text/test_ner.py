"""`OnnxNer` on a tiny token-classification model built here with onnx.helper
and a word-level tokenizer.json (no download): BIO runs become typed spans,
and the model's names replace the rule-based guesses they overlap."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
tokenizers = pytest.importorskip("tokenizers")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ctxfold.errors import CtxFoldError  # noqa: E402
from ctxfold.text.ner import OnnxNer, extract_mentions_with  # noqa: E402

LABELS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]
# word -> label it gets (every other word: O)
TAGS = {"Ada": "B-PER", "Lovelace": "I-PER", "Acme": "B-ORG", "Widgets": "I-ORG", "Oslo": "B-LOC", "Grace": "B-PER"}
WORDS = ["[UNK]", "met", "at", "in", "and", "visited", ",", ".", *TAGS]


def build(tmp_path: Path) -> Path:
    vocab = {w: i for i, w in enumerate(WORDS)}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / "tokenizer.json"))
    table = np.full((len(WORDS), len(LABELS)), -5.0, dtype=np.float32)
    for w, i in vocab.items():
        table[i, LABELS.index(TAGS.get(w, "O"))] = 5.0
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["logits"], axis=0)], "ner",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, None]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, None])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, None, len(LABELS)])],
        [numpy_helper.from_array(table, "table")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "model.onnx"))
    (tmp_path / "config.json").write_text(json.dumps({"id2label": {str(i): l for i, l in enumerate(LABELS)}}),
                                          encoding="utf-8")
    return tmp_path


def test_bio_runs_become_typed_spans(tmp_path: Path) -> None:
    ner = OnnxNer(build(tmp_path))
    text = "Ada Lovelace met Grace at Acme Widgets in Oslo ."
    found = [(m.type, m.text) for m in ner(text)]
    assert found == [("person", "Ada Lovelace"), ("person", "Grace"), ("organisation", "Acme Widgets"), ("location", "Oslo")]
    for m in ner(text):
        assert text[m.start:m.end] == m.text


def test_windows_cover_long_texts(tmp_path: Path) -> None:
    ner = OnnxNer(build(tmp_path), max_length=4)
    assert [m.text for m in ner("met met met Ada Lovelace and Oslo")] == ["Ada Lovelace", "Oslo"]


def test_model_names_replace_the_rule_guesses(tmp_path: Path) -> None:
    ner = OnnxNer(build(tmp_path))
    text = "I visited Acme Widgets in Oslo and met Grace."
    rules = {(m.type, m.text) for m in extract_mentions_with(text, None)}
    both = {(m.type, m.text) for m in extract_mentions_with(text, ner)}
    assert ("other", "Acme Widgets") in rules and ("organisation", "Acme Widgets") in both
    assert ("other", "Acme Widgets") not in both and ("person", "Grace") in both


def test_bad_model_directories(tmp_path: Path) -> None:
    with pytest.raises(CtxFoldError, match="model.onnx"):
        OnnxNer(tmp_path)
    build(tmp_path)
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    with pytest.raises(CtxFoldError, match="id2label"):
        OnnxNer(tmp_path)


def test_the_repository_reads_with_the_model(tmp_path: Path) -> None:
    from ctxfold.text.entity_repository import EntityRepository

    repo = EntityRepository.from_messages(["I visited Acme Widgets in Oslo .", "Acme Widgets and Ada Lovelace"],
                                          ner=OnnxNer(build(tmp_path)))
    assert repo.get("acme widgets").type == "organisation" and repo.get("Acme Widgets").count == 2
    assert repo.get("Ada").type == "person"  # the first name of a person the model found
