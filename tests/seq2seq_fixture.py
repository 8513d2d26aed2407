"""A tiny deterministic encoder/decoder exported the way Hugging Face Optimum
exports T5/BART, built with onnx.helper so the decoding loop is tested offline.

The "model": the encoder embeds each input word; the decoder's next-token
logits are

    bigram[last token] + (sum of dec_emb over every decoder token so far) @ history
                       + (masked mean of the encoder states) @ cross

so a test picks the tables that make the sequence it expects, and non-zero
``history`` makes the output depend on the whole KV cache (a wrong cache or a
wrong beam reorder changes the result). Three layouts, as Optimum writes them:
``merged`` (decoder_model_merged.onnx with a ``use_cache_branch`` If node),
``with_past`` (decoder_model.onnx + decoder_with_past_model.onnx) and
``no_cache`` (decoder_model.onnx alone).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa"]
PAD, EOS, UNK = 0, 1, 2
VOCAB = {"<pad>": PAD, "</s>": EOS, "<unk>": UNK} | {w: i + 3 for i, w in enumerate(WORDS)}
V = len(VOCAB)
D = V  # one-hot friendly
OPSET = 17


def tok(word: str) -> int:
    return VOCAB[word]


@dataclass
class Weights:
    enc_emb: np.ndarray  # (V, D)
    dec_emb: np.ndarray  # (V, D)
    bigram: np.ndarray  # (V, V)
    history: np.ndarray  # (D, V)
    cross: np.ndarray  # (D, V)


def chain(edges: dict[tuple[str, str], float], default: float = -4.0) -> np.ndarray:
    """A bigram table: ``default`` everywhere, ``edges[(a, b)]`` for a -> b
    (``"<s>"`` is the decoder start token, ``"</s>"`` the end)."""
    table = np.full((V, V), default, dtype=np.float32)
    names = VOCAB | {"<s>": PAD}
    for (a, b), value in edges.items():
        table[names[a], names[b]] = value
    return table


def weights(bigram: np.ndarray, *, history_scale: float = 0.0, cross_scale: float = 0.0, seed: int = 0) -> Weights:
    rng = np.random.default_rng(seed)
    return Weights(
        enc_emb=np.eye(V, D, dtype=np.float32),
        dec_emb=rng.normal(size=(V, D)).astype(np.float32),
        bigram=bigram.astype(np.float32),
        history=(history_scale * rng.normal(size=(D, V))).astype(np.float32),
        cross=(cross_scale * rng.normal(size=(D, V))).astype(np.float32),
    )


def reference_logits(w: Weights, input_ids: list[int], decoder_ids: list[int]) -> np.ndarray:
    """The next-token logits after ``decoder_ids``, computed directly (no cache)."""
    enc_mean = w.enc_emb[input_ids].mean(axis=0)
    return w.bigram[decoder_ids[-1]] + w.dec_emb[decoder_ids].sum(axis=0) @ w.history + enc_mean @ w.cross


def reference_greedy(w: Weights, input_ids: list[int], max_new_tokens: int) -> list[int]:
    sequence = [PAD]
    for _ in range(max_new_tokens):
        token = int(np.argmax(reference_logits(w, input_ids, sequence)))
        sequence.append(token)
        if token == EOS:
            break
    return sequence[1:]


# ---- graph building -------------------------------------------------------------------


def _const(name: str, values: list[int]) -> onnx.NodeProto:
    return helper.make_node(
        "Constant", [], [name], value=helper.make_tensor(name, TensorProto.INT64, [len(values)], values)
    )


def _encoder_mean(p: str, hidden: str, mask: str) -> list[onnx.NodeProto]:
    """``{p}ctx`` (B,1,V): masked mean of the encoder states @ cross."""
    return [
        helper.make_node("Cast", [mask], [f"{p}maskf"], to=TensorProto.FLOAT),
        _const(f"{p}ax1", [1]),
        _const(f"{p}axm1", [-1]),
        helper.make_node("Unsqueeze", [f"{p}maskf", f"{p}axm1"], [f"{p}mask3"]),
        helper.make_node("Mul", [hidden, f"{p}mask3"], [f"{p}masked"]),
        helper.make_node("ReduceSum", [f"{p}masked", f"{p}ax1"], [f"{p}encsum"], keepdims=1),
        helper.make_node("ReduceSum", [f"{p}maskf", f"{p}ax1"], [f"{p}count"], keepdims=1),
        helper.make_node("Unsqueeze", [f"{p}count", f"{p}axm1"], [f"{p}count3"]),
        helper.make_node("Div", [f"{p}encsum", f"{p}count3"], [f"{p}encmean"]),
        helper.make_node("MatMul", [f"{p}encmean", "cross"], [f"{p}ctx"]),
    ]


def _logits(p: str, ids: str, hist: str, out: str) -> list[onnx.NodeProto]:
    return [
        helper.make_node("Gather", ["bigram", ids], [f"{p}big"]),
        helper.make_node("MatMul", [hist, "history"], [f"{p}histlog"]),
        helper.make_node("Add", [f"{p}big", f"{p}histlog"], [f"{p}sum1"]),
        helper.make_node("Add", [f"{p}sum1", f"{p}ctx"], [out]),
    ]


def _first_step_nodes(p: str, out: dict[str, str]) -> list[onnx.NodeProto]:
    """Decoder without past: the whole prefix ``input_ids`` (B,T)."""
    return [
        helper.make_node("Gather", ["dec_emb", "input_ids"], [f"{p}x"]),
        _const(f"{p}ax1s", [1]),
        helper.make_node("Squeeze", [f"{p}ax1s"], [f"{p}ax1scalar"]),
        helper.make_node("CumSum", [f"{p}x", f"{p}ax1scalar"], [f"{p}hist"]),
        *_encoder_mean(p, "encoder_hidden_states", "encoder_attention_mask"),
        *_logits(p, "input_ids", f"{p}hist", out["logits"]),
        helper.make_node("Unsqueeze", [f"{p}x", f"{p}ax1"], [out["dk"]]),
        helper.make_node("Identity", [out["dk"]], [out["dv"]]),
        helper.make_node("Unsqueeze", [f"{p}masked", f"{p}ax1"], [out["ek"]]),
        helper.make_node("Identity", [out["ek"]], [out["ev"]]),
    ]


def _past_step_nodes(p: str, out: dict[str, str]) -> list[onnx.NodeProto]:
    """Decoder with past: one new token (B,1) and the cached keys."""
    return [
        helper.make_node("Gather", ["dec_emb", "input_ids"], [f"{p}x"]),
        _const(f"{p}ax1", [1]),
        helper.make_node("Squeeze", ["past_key_values.0.decoder.key", f"{p}ax1"], [f"{p}pastdec"]),
        helper.make_node("ReduceSum", [f"{p}pastdec", f"{p}ax1"], [f"{p}pastsum"], keepdims=1),
        helper.make_node("Add", [f"{p}pastsum", f"{p}x"], [f"{p}hist"]),
        helper.make_node("Squeeze", ["past_key_values.0.encoder.key", f"{p}ax1"], [f"{p}enc"]),
        *_encoder_mean(p + "e", f"{p}enc", "encoder_attention_mask"),
        helper.make_node("Identity", [f"{p}ectx"], [f"{p}ctx"]),
        *_logits(p, "input_ids", f"{p}hist", out["logits"]),
        helper.make_node("Unsqueeze", [f"{p}x", f"{p}ax1"], [f"{p}x4"]),
        helper.make_node("Concat", ["past_key_values.0.decoder.key", f"{p}x4"], [out["dk"]], axis=2),
        helper.make_node("Concat", ["past_key_values.0.decoder.value", f"{p}x4"], [out["dv"]], axis=2),
    ]


def _t(name: str, dtype: int, shape: list[object]) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


F, I64 = TensorProto.FLOAT, TensorProto.INT64
PRESENTS = {
    "logits": "logits",
    "dk": "present.0.decoder.key",
    "dv": "present.0.decoder.value",
    "ek": "present.0.encoder.key",
    "ev": "present.0.encoder.value",
}
PASTS = [
    ("past_key_values.0.decoder.key", "past_decoder_sequence_length"),
    ("past_key_values.0.decoder.value", "past_decoder_sequence_length"),
    ("past_key_values.0.encoder.key", "encoder_sequence_length_out"),
    ("past_key_values.0.encoder.value", "encoder_sequence_length_out"),
]


def _initializers(w: Weights, names: tuple[str, ...]) -> list[onnx.TensorProto]:
    return [numpy_helper.from_array(getattr(w, n), n) for n in names]


def _model(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="ctxfold-tests")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _present_outputs(with_encoder: bool) -> list[onnx.ValueInfoProto]:
    outs = [
        _t("logits", F, ["batch_size", "decoder_sequence_length", V]),
        _t("present.0.decoder.key", F, ["batch_size", 1, "past_decoder_sequence_length + 1", D]),
        _t("present.0.decoder.value", F, ["batch_size", 1, "past_decoder_sequence_length + 1", D]),
    ]
    if with_encoder:
        outs += [
            _t("present.0.encoder.key", F, ["batch_size", 1, "encoder_sequence_length_out", D]),
            _t("present.0.encoder.value", F, ["batch_size", 1, "encoder_sequence_length_out", D]),
        ]
    return outs


def build_encoder(w: Weights) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Gather", ["enc_emb", "input_ids"], ["emb"]),
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=F),
        _const("axm1", [-1]),
        helper.make_node("Unsqueeze", ["maskf", "axm1"], ["mask3"]),
        helper.make_node("Mul", ["emb", "mask3"], ["last_hidden_state"]),
    ]
    graph = helper.make_graph(
        nodes,
        "encoder",
        [
            _t("input_ids", I64, ["batch_size", "encoder_sequence_length"]),
            _t("attention_mask", I64, ["batch_size", "encoder_sequence_length"]),
        ],
        [_t("last_hidden_state", F, ["batch_size", "encoder_sequence_length", D])],
        _initializers(w, ("enc_emb",)),
    )
    return _model(graph)


def _decoder_inputs() -> list[onnx.ValueInfoProto]:
    return [
        _t("encoder_attention_mask", I64, ["batch_size", "encoder_sequence_length"]),
        _t("input_ids", I64, ["batch_size", "decoder_sequence_length"]),
        _t("encoder_hidden_states", F, ["batch_size", "encoder_sequence_length", D]),
    ]


def build_decoder(w: Weights) -> onnx.ModelProto:
    graph = helper.make_graph(
        _first_step_nodes("", PRESENTS),
        "decoder",
        _decoder_inputs(),
        _present_outputs(with_encoder=True),
        _initializers(w, ("dec_emb", "bigram", "history", "cross")),
    )
    return _model(graph)


def build_decoder_with_past(w: Weights) -> onnx.ModelProto:
    inputs = [
        _t("encoder_attention_mask", I64, ["batch_size", "encoder_sequence_length"]),
        _t("input_ids", I64, ["batch_size", 1]),
    ] + [_t(n, F, ["batch_size", 1, length, D]) for n, length in PASTS]
    graph = helper.make_graph(
        _past_step_nodes("", PRESENTS),
        "decoder_with_past",
        inputs,
        _present_outputs(with_encoder=False),
        _initializers(w, ("dec_emb", "bigram", "history", "cross")),
    )
    return _model(graph)


def _shape(kind: str) -> list[object]:
    if kind == "logits":
        return ["batch_size", "decoder_sequence_length", V]
    return ["batch_size", 1, f"{kind}_length", D]


def build_decoder_merged(w: Weights) -> onnx.ModelProto:
    """One graph, an If on ``use_cache_branch``; as in Optimum's merged decoder the
    cache branch returns placeholders for the (unchanged) encoder keys/values."""
    names = [
        "logits",
        "present.0.decoder.key",
        "present.0.decoder.value",
        "present.0.encoder.key",
        "present.0.encoder.value",
    ]
    no_past_out = {k: f"np_{v}" for k, v in PRESENTS.items()}
    no_past = helper.make_graph(
        _first_step_nodes("np_", no_past_out),
        "no_past_branch",
        [],
        [_t(no_past_out[k], F, _shape(k)) for k in ("logits", "dk", "dv", "ek", "ev")],
    )
    past_out = {k: f"wp_{v}" for k, v in PRESENTS.items()}
    placeholder = helper.make_tensor("wp_zero", F, [1, 1, 1, D], [0.0] * D)
    past_nodes = _past_step_nodes("wp_", past_out) + [
        helper.make_node("Constant", [], [past_out["ek"]], value=placeholder),
        helper.make_node("Identity", [past_out["ek"]], [past_out["ev"]]),
    ]
    with_past = helper.make_graph(
        past_nodes,
        "with_past_branch",
        [],
        [_t(past_out[k], F, _shape(k)) for k in ("logits", "dk", "dv", "ek", "ev")],
    )
    inputs = _decoder_inputs() + [_t(n, F, ["batch_size", 1, length, D]) for n, length in PASTS]
    inputs.append(_t("use_cache_branch", TensorProto.BOOL, [1]))
    graph = helper.make_graph(
        [helper.make_node("If", ["use_cache_branch"], names, then_branch=with_past, else_branch=no_past)],
        "decoder_merged",
        inputs,
        [_t(n, F, _shape(k)) for n, k in zip(names, ("logits", "dk", "dv", "ek", "ev"))],
        _initializers(w, ("dec_emb", "bigram", "history", "cross")),
    )
    return _model(graph)


def build_tokenizer() -> str:
    """A word-level tokenizer.json that appends ``</s>`` (as T5's does)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    tokenizer = Tokenizer(models.WordLevel(vocab=VOCAB, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", EOS)])
    tokenizer.add_special_tokens(["<pad>", "</s>", "<unk>"])
    return tokenizer.to_str()


def write_model(
    directory: Path,
    w: Weights,
    *,
    layout: str = "merged",
    generation: dict[str, object] | None = None,
    config: dict[str, object] | None = None,
) -> Path:
    """Write an Optimum-style export of ``w`` to ``directory`` and return it."""
    directory.mkdir(parents=True, exist_ok=True)
    onnx.save(build_encoder(w), directory / "encoder_model.onnx")
    if layout == "merged":
        onnx.save(build_decoder_merged(w), directory / "decoder_model_merged.onnx")
    elif layout == "with_past":
        onnx.save(build_decoder(w), directory / "decoder_model.onnx")
        onnx.save(build_decoder_with_past(w), directory / "decoder_with_past_model.onnx")
    elif layout == "no_cache":
        onnx.save(build_decoder(w), directory / "decoder_model.onnx")
    else:
        raise ValueError(layout)
    (directory / "tokenizer.json").write_text(build_tokenizer(), encoding="utf-8")
    cfg = {
        "model_type": "t5",
        "decoder_start_token_id": PAD,
        "eos_token_id": EOS,
        "pad_token_id": PAD,
        "num_heads": 1,
        "d_kv": D,
        "d_model": D,
        "max_position_embeddings": 64,
    } | (config or {})
    (directory / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    if generation is not None:
        (directory / "generation_config.json").write_text(json.dumps(generation), encoding="utf-8")
    return directory
