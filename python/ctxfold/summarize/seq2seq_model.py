"""Greedy and beam-search decoding of encoder/decoder ONNX models exported by
Hugging Face Optimum (T5, BART, Pegasus...), with the decoder's KV cache.

Three export layouts are understood, by the files in the model directory
(or in its ``onnx/`` sub-directory; ``variant="quantized"`` reads
``encoder_model_quantized.onnx`` and so on):

- ``encoder_model.onnx`` + ``decoder_model_merged.onnx``: one decoder whose
  ``use_cache_branch`` input switches between the first step (no past) and
  the following ones (``optimum-cli export onnx`` default);
- ``encoder_model.onnx`` + ``decoder_model.onnx`` + ``decoder_with_past_model.onnx``
  (``--no-post-process``);
- ``encoder_model.onnx`` + ``decoder_model.onnx`` alone (a task without
  ``-with-past``): no cache, the whole prefix is re-run at each step.

Past inputs are found by name: ``past_key_values.<rest>`` feeds on the
``present.<rest>`` output of the previous step; names containing
``.encoder.`` hold the cross-attention keys/values, computed once at the
first step and reused (Optimum's merged decoder returns empty placeholders
for them afterwards).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxfold.errors import InvalidInputError, InvalidTypeError, ModelError, ModelNotFoundError
from ctxfold.models import onnx_session, verified_path

__all__ = ["GenerationConfig", "Seq2SeqModel", "generate", "DecoderState"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]

ENCODER = "encoder_model.onnx"
DECODER = "decoder_model.onnx"
DECODER_MERGED = "decoder_model_merged.onnx"
DECODER_WITH_PAST = "decoder_with_past_model.onnx"
PAST_PREFIX = "past_key_values."
PRESENT_PREFIX = "present."

_ORT_DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64}


@dataclass(frozen=True)
class GenerationConfig:
    """How to decode. Lengths follow Hugging Face's conventions: ``min_length``
    counts the decoder start token (EOS is banned while the sequence is
    shorter); ``max_new_tokens`` counts generated tokens, EOS included.
    ``num_beams=1`` is greedy search. ``length_penalty`` divides a finished
    beam's log-probability by its generated length to that power."""

    decoder_start_token_id: int
    eos_token_ids: tuple[int, ...]
    pad_token_id: int = 0
    max_new_tokens: int = 128
    min_length: int = 0
    num_beams: int = 1
    no_repeat_ngram_size: int = 0
    length_penalty: float = 1.0
    early_stopping: bool = False
    forced_bos_token_id: int | None = None
    forced_eos_token_id: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_new_tokens", "num_beams"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidTypeError(f"{name}: expected int, got {type(value).__name__}")
            if value < 1:
                raise InvalidInputError(f"{name}: must be at least 1, got {value}")
        for name in ("min_length", "no_repeat_ngram_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidTypeError(f"{name}: expected int, got {type(value).__name__}")
            if value < 0:
                raise InvalidInputError(f"{name}: must be 0 or more, got {value}")
        if not self.eos_token_ids:
            raise InvalidInputError("eos_token_ids: at least one end-of-sequence id is needed")

    def updated(self, **changes: Any) -> GenerationConfig:
        """A copy with the non-None ``changes`` applied."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


@dataclass
class DecoderState:
    """What a decoding run carries between steps, one row per beam."""

    encoder_hidden: FloatArray
    encoder_mask: IntArray
    past: dict[str, npt.NDArray[Any]] = field(default_factory=dict)
    prefix: IntArray | None = None  # the tokens so far (only for the no-cache layout)
    steps: int = 0

    def reorder(self, rows: IntArray) -> None:
        """Keep row ``rows[i]`` as row ``i`` (beam search's survivors)."""
        if len(rows) == len(self.encoder_mask) and np.array_equal(rows, np.arange(len(rows))):
            return
        self.encoder_hidden = self.encoder_hidden[rows]
        self.encoder_mask = self.encoder_mask[rows]
        self.past = {k: v[rows] for k, v in self.past.items()}
        if self.prefix is not None:
            self.prefix = self.prefix[rows]


class Seq2SeqModel:
    """The ONNX sessions of one exported encoder/decoder model and its config."""

    def __init__(
        self, model_dir: str | os.PathLike[str], *, threads: int | None = None, variant: str | None = None
    ) -> None:
        if not isinstance(model_dir, (str, os.PathLike)):
            raise InvalidTypeError(f"model_dir: expected a path, got {type(model_dir).__name__}")
        if variant is not None and (not isinstance(variant, str) or not variant.isidentifier()):
            raise InvalidInputError(f"variant: expected a file-name suffix such as 'quantized', got {variant!r}")
        self.model_dir = Path(model_dir)
        if not self.model_dir.is_dir():
            raise ModelNotFoundError(
                f"model_dir: {self.model_dir} is not a directory. Fix: export the model with "
                "`optimum-cli export onnx --model <name> --task text2text-generation-with-past <dir>` "
                "and pass that directory."
            )
        suffix = f"_{variant}" if variant else ""
        encoder, decoder, merged, with_past = (
            name.replace(".onnx", f"{suffix}.onnx") for name in (ENCODER, DECODER, DECODER_MERGED, DECODER_WITH_PAST)
        )
        # Optimum writes the ONNX files next to the tokenizer; exports shared on the Hub
        # for transformers.js keep them in an onnx/ sub-directory.
        self.onnx_dir = self.model_dir
        if not (self.model_dir / encoder).is_file() and (self.model_dir / "onnx" / encoder).is_file():
            self.onnx_dir = self.model_dir / "onnx"
        present = {p.name for p in self.onnx_dir.iterdir()}
        if encoder not in present or not ({merged, decoder} & present):
            raise ModelNotFoundError(
                f"model_dir: {self.model_dir} holds no encoder/decoder ONNX export (need {encoder} and "
                f"{merged}, or {decoder} [+ {with_past}]; found: {sorted(present) or 'nothing'}). "
                "Fix: export with `optimum-cli export onnx --model <name> --task text2text-generation-with-past "
                "<dir>`, or pass variant= to match the file names (e.g. variant='quantized')."
            )
        if merged in present:
            self.layout = "merged"
        elif with_past in present:
            self.layout = "with_past"
        else:
            self.layout = "no_cache"
        self.config = _read_json(self.model_dir / "config.json")
        self.generation = _read_json(self.model_dir / "generation_config.json")
        self.encoder = _session(self.onnx_dir, encoder, threads)
        if self.layout == "merged":
            self.decoder = _session(self.onnx_dir, merged, threads)
            self.decoder_with_past = self.decoder
        else:
            self.decoder = _session(self.onnx_dir, decoder, threads)
            self.decoder_with_past = _session(self.onnx_dir, with_past, threads) if self.layout == "with_past" else None
        cached = self.decoder_with_past.get_inputs() if self.decoder_with_past is not None else []
        self._past_inputs = [i for i in cached if i.name.startswith(PAST_PREFIX)]
        self._past_names = [i.name for i in self._past_inputs]
        if self.layout != "no_cache" and not self._past_names:
            raise ModelError(
                f"{self.model_dir}: the decoder has no {PAST_PREFIX}* inputs. Fix: export with the "
                "`text2text-generation-with-past` task, or remove the with-past file to decode without cache."
            )
        # Input/output names per session, looked up once rather than at every step.
        sessions = [self.decoder] + ([self.decoder_with_past] if self.decoder_with_past is not None else [])
        self._inputs = {id(s): {i.name for i in s.get_inputs()} for s in sessions}
        self._outputs = {id(s): [o.name for o in s.get_outputs()] for s in sessions}
        outputs = self._outputs[id(self.decoder)]
        self._logits_name = "logits" if "logits" in outputs else outputs[0]
        self._encoder_output = self.encoder.get_outputs()[0].name
        self._encoder_input_names = {i.name for i in self.encoder.get_inputs()}

    def default_generation(self) -> GenerationConfig:
        """Decoding settings from config.json's summarization parameters, then
        generation_config.json, then config.json (the order of Hugging Face's
        summarization pipeline)."""

        task = (self.config.get("task_specific_params") or {}).get("summarization") or {}

        def get(name: str, default: Any = None) -> Any:
            for source in (task, self.generation, self.config):
                if source.get(name) is not None:
                    return source[name]
            return default

        eos = get("eos_token_id")
        eos_ids = tuple(eos) if isinstance(eos, list) else (eos,) if isinstance(eos, int) else ()
        start = get("decoder_start_token_id", get("pad_token_id"))
        if start is None or not eos_ids:
            raise ModelError(
                f"{self.model_dir}: config.json/generation_config.json name no decoder_start_token_id and "
                "eos_token_id. Fix: keep the config files optimum-cli writes next to the ONNX files."
            )
        max_length = get("max_length", 0)
        return GenerationConfig(
            decoder_start_token_id=int(start),
            eos_token_ids=tuple(int(e) for e in eos_ids),
            pad_token_id=int(get("pad_token_id", 0) or 0),
            # 20 is Hugging Face's default max_length, written by old configs that set nothing.
            max_new_tokens=int(
                get("max_new_tokens") or (max(1, max_length - 1) if max_length and max_length != 20 else 128)
            ),
            min_length=int(get("min_length", 0) or 0),
            num_beams=int(get("num_beams", 1) or 1),
            no_repeat_ngram_size=int(get("no_repeat_ngram_size", 0) or 0),
            length_penalty=float(get("length_penalty", 1.0)),
            early_stopping=bool(get("early_stopping", False) is True),
            forced_bos_token_id=get("forced_bos_token_id"),
            forced_eos_token_id=get("forced_eos_token_id"),
        )

    def encode(self, input_ids: Sequence[int]) -> DecoderState:
        """Run the encoder on one token sequence; a state with one row."""
        ids = np.asarray([list(input_ids)], dtype=np.int64)
        mask = np.ones_like(ids)
        feed = {"input_ids": ids, "attention_mask": mask}
        hidden = self._run(
            self.encoder, [self._encoder_output], {k: v for k, v in feed.items() if k in self._encoder_input_names}
        )[0]
        return DecoderState(encoder_hidden=hidden, encoder_mask=mask)

    def step(self, state: DecoderState, tokens: IntArray) -> FloatArray:
        """Feed one new token per row; return the next-token logits ``(rows, vocab)``."""
        rows = len(tokens)
        if self.layout == "no_cache":
            new = tokens[:, None]
            state.prefix = new if state.prefix is None else np.concatenate([state.prefix, new], axis=1)
            out = self._run(self.decoder, [self._logits_name], self._feed(self.decoder, state, state.prefix))
            state.steps += 1
            return np.asarray(out[0][:, -1, :], dtype=np.float32)
        ids = tokens.reshape(rows, 1).astype(np.int64)
        first = state.steps == 0
        session = self.decoder if first else self.decoder_with_past
        assert session is not None
        feed = self._feed(session, state, ids)
        if self.layout == "merged":
            feed["use_cache_branch"] = np.array([not first], dtype=bool)
        if not first:
            feed.update(state.past)
        elif self.layout == "merged":
            feed.update(self._dummy_past(rows))
        names = self._outputs[id(session)]
        outputs = dict(zip(names, self._run(session, names, feed)))
        for name in self._past_names:
            rest = name[len(PAST_PREFIX) :]
            if ".encoder." in name and not first:
                continue  # cross-attention keys/values never change after the first step
            value = outputs.get(PRESENT_PREFIX + rest)
            if value is None:
                raise ModelError(
                    f"{self.model_dir}: the decoder has no output {PRESENT_PREFIX + rest} for input {name}"
                )
            state.past[name] = value
        state.steps += 1
        return np.asarray(outputs[self._logits_name][:, -1, :], dtype=np.float32)

    def _feed(self, session: Any, state: DecoderState, ids: IntArray) -> dict[str, Any]:
        wanted = self._inputs[id(session)]
        feed: dict[str, Any] = {"input_ids": ids}
        if "encoder_hidden_states" in wanted:
            feed["encoder_hidden_states"] = state.encoder_hidden
        if "encoder_attention_mask" in wanted:
            feed["encoder_attention_mask"] = state.encoder_mask
        # Some exports also take the decoder's own mask and the positions of the new tokens.
        past = 0 if self.layout == "no_cache" else state.steps
        if "attention_mask" in wanted:
            feed["attention_mask"] = np.ones((len(ids), past + ids.shape[1]), dtype=np.int64)
        if "cache_position" in wanted:
            feed["cache_position"] = np.arange(past, past + ids.shape[1], dtype=np.int64)
        return feed

    def _dummy_past(self, rows: int) -> dict[str, Any]:
        """Placeholders for the merged decoder's first step (the branch ignores
        them; Optimum feeds length-1 zeros too)."""
        feed = {}
        for info in self._past_inputs:
            shape = [rows, self._dim(info, 1, "heads"), 1, self._dim(info, 3, "head_dim")]
            feed[info.name] = np.zeros(shape, dtype=_ORT_DTYPES.get(info.type, np.float32))
        return feed

    def _dim(self, info: Any, axis: int, what: str) -> int:
        shape = info.shape
        if len(shape) == 4 and isinstance(shape[axis], int):
            return int(shape[axis])
        c = self.config
        heads = c.get("num_heads") or c.get("decoder_attention_heads") or c.get("num_attention_heads")
        if what == "heads" and heads:
            return int(heads)
        if what == "head_dim":
            if c.get("d_kv"):
                return int(c["d_kv"])
            width = c.get("d_model") or c.get("hidden_size")
            if width and heads:
                return int(width) // int(heads)
        raise ModelError(
            f"{self.model_dir}: cannot tell the {what} of {info.name} (shape {shape}) from the model or config.json"
        )

    def _run(self, session: Any, names: list[str], feed: Mapping[str, Any]) -> list[Any]:
        try:
            return list(session.run(names, dict(feed)))
        except Exception as e:  # onnxruntime's errors are not a public hierarchy
            raise ModelError(f"{self.model_dir}: inference failed: {e}") from e


def generate(model: Seq2SeqModel, input_ids: Sequence[int], config: GenerationConfig) -> list[int]:
    """The generated token ids for one input (decoder start token excluded;
    the EOS token, when reached, included)."""
    state = model.encode(input_ids)
    if config.num_beams == 1:
        return _greedy(model, state, config)
    return _beam_search(model, state, config)


def _greedy(model: Seq2SeqModel, state: DecoderState, config: GenerationConfig) -> list[int]:
    sequence = [config.decoder_start_token_id]
    eos = set(config.eos_token_ids)
    for _ in range(config.max_new_tokens):
        logits = model.step(state, np.array([sequence[-1]], dtype=np.int64))
        scores = _process(logits, [sequence], config)
        token = int(np.argmax(scores[0]))
        sequence.append(token)
        if token in eos:
            break
    return sequence[1:]


def _beam_search(model: Seq2SeqModel, state: DecoderState, config: GenerationConfig) -> list[int]:
    k = config.num_beams
    eos = set(config.eos_token_ids)
    beams: list[list[int]] = [[config.decoder_start_token_id]]
    beam_scores = np.zeros(1, dtype=np.float64)
    finished: list[tuple[float, list[int]]] = []
    for _ in range(config.max_new_tokens):
        logits = model.step(state, np.array([b[-1] for b in beams], dtype=np.int64))
        logp = _process(_log_softmax(logits), beams, config)
        candidates = (beam_scores[:, None] + logp).ravel()
        vocab = logp.shape[1]
        top = min(2 * k, candidates.size)
        best = np.argpartition(-candidates, top - 1)[:top]
        best = best[np.argsort(-candidates[best], kind="stable")]
        survivors: list[tuple[int, list[int], float]] = []
        for rank, flat in enumerate(best):
            score = float(candidates[flat])
            if score == -math.inf:
                break
            row, token = divmod(int(flat), vocab)
            sequence = beams[row] + [token]
            if token in eos:
                if rank < k:  # as Hugging Face: an EOS below the top k beams does not finish
                    finished.append((score / (len(sequence) - 1) ** config.length_penalty, sequence))
            else:
                survivors.append((row, sequence, score))
            if len(survivors) == k:
                break
        finished.sort(key=lambda f: -f[0])
        del finished[k:]
        if not survivors or _beams_done(finished, survivors, config):
            break
        state.reorder(np.array([s[0] for s in survivors], dtype=np.int64))
        beams = [s[1] for s in survivors]
        beam_scores = np.array([s[2] for s in survivors], dtype=np.float64)
    else:
        for sequence, score in zip(beams, beam_scores):
            finished.append((float(score) / (len(sequence) - 1) ** config.length_penalty, sequence))
    if not finished:  # every continuation was banned
        finished = [(0.0, beams[0])]
    best_sequence = max(finished, key=lambda f: f[0])[1]
    return best_sequence[1:]


def _beams_done(
    finished: list[tuple[float, list[int]]], survivors: list[tuple[int, list[int], float]], config: GenerationConfig
) -> bool:
    if len(finished) < config.num_beams:
        return False
    if config.early_stopping:
        return True
    # Hugging Face's heuristic: stop when the best running beam, scored at its
    # current length, cannot beat the worst kept finished beam.
    best_running = max(s[2] for s in survivors) / (len(survivors[0][1]) - 1) ** config.length_penalty
    return bool(finished[-1][0] >= best_running)


def _process(scores: FloatArray, sequences: Sequence[Sequence[int]], config: GenerationConfig) -> FloatArray:
    """Apply the bans: forced BOS/EOS, EOS before ``min_length``, repeated n-grams."""
    scores = scores.copy()
    eos = list(config.eos_token_ids)
    for row, sequence in enumerate(sequences):
        length = len(sequence)
        if config.forced_bos_token_id is not None and length == 1:
            _force(scores, row, config.forced_bos_token_id)
            continue
        if config.forced_eos_token_id is not None and length == config.max_new_tokens:
            _force(scores, row, config.forced_eos_token_id)
            continue
        if length < config.min_length:
            scores[row, eos] = -np.inf
        n = config.no_repeat_ngram_size
        if n and length >= n:
            scores[row, _banned_ngram_tokens(sequence, n)] = -np.inf
    return scores


def _banned_ngram_tokens(sequence: Sequence[int], n: int) -> list[int]:
    """Tokens that would repeat an n-gram already in ``sequence``."""
    if n == 1:
        return list(set(sequence))
    prefix = list(sequence[len(sequence) - n + 1 :])
    return [sequence[i + n - 1] for i in range(len(sequence) - n + 1) if list(sequence[i : i + n - 1]) == prefix]


def _force(scores: FloatArray, row: int, token: int) -> None:
    kept = scores[row, token]
    scores[row, :] = -np.inf
    scores[row, token] = kept if np.isfinite(kept) else 0.0


def _log_softmax(logits: FloatArray) -> FloatArray:
    shifted: FloatArray = logits - logits.max(axis=1, keepdims=True)
    out: FloatArray = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    return out


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ModelError(f"{path}: not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise ModelError(f"{path}: expected a JSON object")
    return data


def _session(model_dir: Path, name: str, threads: int | None) -> Any:
    path, _ = verified_path(model_dir, name, None)
    return onnx_session(path, threads, spin=True)
