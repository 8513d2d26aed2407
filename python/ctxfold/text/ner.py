"""`OnnxNer`: named entities from an ONNX token-classification model (a BERT-
style NER export: ``model.onnx``, ``tokenizer.json`` and ``config.json`` with
``id2label`` in BIO form, e.g. ``B-PER``, ``I-ORG``), loaded like the other
models (checksums verified when the directory lists them). Its people,
organisations and places replace the rule-based guesses for the same words
(`extract_mentions_with`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ctxfold.text.entities import LOCATION, ORG, OTHER, PERSON, Mention, extract_mentions, normalise
from ctxfold.errors import InvalidInputError, InvalidTypeError, ModelError
from ctxfold.models import hf_tokenizer, onnx_session, verified_path

__all__ = ["OnnxNer", "extract_mentions_with"]

# The usual NER label sets (CoNLL, OntoNotes) mapped to ctxfold's types; anything else is "other".
LABEL_TYPES = {
    "PER": PERSON, "PERSON": PERSON, "ORG": ORG, "LOC": LOCATION, "GPE": LOCATION, "FAC": LOCATION,
    "MISC": OTHER, "NORP": OTHER, "PRODUCT": OTHER, "EVENT": OTHER, "WORK_OF_ART": OTHER,
    "DATE": "date", "TIME": "time", "MONEY": "money", "PERCENT": "percent",
}


class OnnxNer:
    """A token-classification model as an entity extractor: ``ner(text)``
    gives `Mention`s (spans into ``text``) for the words it labels.

    - ``model_dir``: the directory holding ``model.onnx``, ``tokenizer.json``
      and ``config.json``;
    - ``max_length``: longer texts are read in windows of this many tokens.
    """

    def __init__(self, model_dir: str | os.PathLike[str], *, max_length: int = 256, threads: int | None = None) -> None:
        if not isinstance(model_dir, (str, os.PathLike)):
            raise InvalidTypeError(f"model_dir: expected a path, got {type(model_dir).__name__}")
        if not isinstance(max_length, int) or max_length < 4:
            raise InvalidInputError(f"max_length: must be an int >= 4, got {max_length!r}")
        self.model_dir = Path(model_dir)
        model_path, _ = verified_path(self.model_dir, "model.onnx", None)
        tokenizer_path, _ = verified_path(self.model_dir, "tokenizer.json", None)
        config_path, _ = verified_path(self.model_dir, "config.json", None)
        self.max_length = max_length
        self._tokenizer = hf_tokenizer(tokenizer_path, None, "replace it with the model's tokenizer.json")
        self._session = onnx_session(model_path, threads)
        self._inputs = {i.name for i in self._session.get_inputs()}
        if "input_ids" not in self._inputs:
            raise ModelError(f"model file {model_path} has no 'input_ids' input. Fix: pass a token-classification export")
        self.labels = _labels(config_path)

    def __call__(self, text: str) -> list[Mention]:
        if not isinstance(text, str):
            raise InvalidTypeError(f"text: expected str, got {type(text).__name__}")
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        ids, offsets = list(encoding.ids), list(encoding.offsets)
        labels: list[str] = []
        for start in range(0, len(ids), self.max_length):
            labels += self._label(ids[start:start + self.max_length])
        return _spans(text, offsets, labels)

    def _label(self, ids: list[int]) -> list[str]:
        feed: dict[str, Any] = {"input_ids": np.asarray([ids], dtype=np.int64)}
        if "attention_mask" in self._inputs:
            feed["attention_mask"] = np.ones((1, len(ids)), dtype=np.int64)
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros((1, len(ids)), dtype=np.int64)
        logits = self._session.run(None, feed)[0]
        if logits.ndim != 3 or logits.shape[1] != len(ids) or logits.shape[2] != len(self.labels):
            raise ModelError(
                f"{self.model_dir}: expected logits (1, {len(ids)}, {len(self.labels)}), got {logits.shape}. "
                "Fix: pass a token-classification model whose config.json id2label matches its outputs"
            )
        return [self.labels[k] for k in logits[0].argmax(axis=-1).tolist()]


def _labels(path: Path) -> list[str]:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
        id2label = config["id2label"]
        return [str(id2label[str(i)]) for i in range(len(id2label))]
    except (ValueError, KeyError, TypeError) as e:
        raise ModelError(f"{path}: needs id2label with ids 0..n-1 ({e}). Fix: use the model's own config.json") from e


def _spans(text: str, offsets: list[tuple[int, int]], labels: list[str]) -> list[Mention]:
    """BIO labels per token -> one mention per run (an I- after O or another type starts a run too)."""
    out: list[Mention] = []
    run: tuple[int, int, str] | None = None

    def close() -> None:
        if run is not None:
            start, end, kind = run
            value = text[start:end]
            if normalise(value):
                out.append(Mention(value, LABEL_TYPES.get(kind, OTHER), start, end, normalise(value)))

    for (start, end), label in zip(offsets, labels):
        prefix, _, kind = label.partition("-")
        if label == "O" or not kind:
            close()
            run = None
        elif prefix == "B" or run is None or run[2] != kind:
            close()
            run = (start, end, kind)
        else:
            run = (run[0], end, kind)
    close()
    return out


def extract_mentions_with(text: str, ner: OnnxNer | None) -> tuple[Mention, ...]:
    """`extract_mentions`, with the model's people, organisations and places
    replacing the rule-based names they overlap."""
    rules = extract_mentions(text)
    if ner is None:
        return rules
    found = ner(text)
    kept = [m for m in rules if not (m.type in (PERSON, ORG, LOCATION, OTHER) and
                                     any(m.start < f.end and f.start < m.end for f in found))]
    return tuple(sorted([*kept, *found], key=lambda x: (x.start, -x.end)))
