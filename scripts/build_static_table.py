"""Rebuild models/minilm-static/ (the `StaticEmbedder` table) from the ONNX MiniLM.

The model2vec recipe, on the int8 all-MiniLM-L6-v2 shipped in
models/all-MiniLM-L6-v2/:

1. every vocabulary id ``t`` goes through the model alone, as ``[CLS] t [SEP]``;
   the token's vector is the model's output at ``t``'s position (``--pooling
   mean`` takes the mean of the three outputs instead: a little better alone,
   worse fused with BM25, see models/minilm-static/README.md);
2. PCA: the vectors are centred and projected on their ``--dim`` principal
   axes (float64 SVD; each axis's sign fixed so that its largest loading is
   positive, so the table does not depend on the LAPACK build);
3. each token gets the SIF weight ``a / (a + p(t))`` (Arora et al. 2017), with
   ``p(t)`` a Zipf law over the tokenizer's vocabulary order: BERT's WordPiece
   vocabulary lists whole words roughly by decreasing corpus frequency from id 1996
   (``the``, ``of``, ``and``...), so ``p`` needs no corpus outside the repo.

With ``--corpus DIR`` (the shipped table: Debian's ``fortunes`` and
``fortunes-min`` packages, ``/usr/share/games/fortunes``), step 2 is preceded by
a fit to what the model says of whole texts (as Tokenlearn does for model2vec):
each text of the corpus is embedded by the model (mean of its outputs,
L2-normalised), and the table becomes the one closest to the step-1 vectors
(scaled to the texts' scale) whose SIF-weighted mean over each text's tokens is
closest to that text's embedding: ridge least squares, solved by conjugate
gradients from the step-1 vectors, a fixed number of steps. Step 2 then
projects on the ``--dim`` leading axes without centring, since the fitted
table's mean direction is part of what a text's mean carries. It also writes
``model_projection.npy``: the least-squares map from the table's embeddings
of the corpus texts to the model's embeddings of them, with which the engine
sets messages the table embedded beside a question the model embedded.

Everything is deterministic: ONNX Runtime runs on one thread, numpy in
float64, and the outputs are written with fixed bytes (``np.save`` and sorted
JSON). The test ``tests/embed/test_static.py::test_build_script_reproduces_the_shipped_table``
rebuilds the table and compares it with the shipped one to float16 precision.

    python scripts/build_static_table.py [--out models/minilm-static] [--dim 256] [--corpus /usr/share/games/fortunes]

Needs onnxruntime and tokenizers (``pip install onnxruntime tokenizers``), and ctxfold and scipy for
``--corpus``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

REPO = Path(__file__).resolve().parent.parent
SOURCE_DIR = REPO / "models" / "all-MiniLM-L6-v2"
OUT_DIR = REPO / "models" / "minilm-static"
FORMAT = "ctxfold-static-1"
TOKENIZER_MODEL = "all-MiniLM-L6-v2"

DIM = 256
SIF_A = 3e-3
FIRST_RANKED_ID = 1996  # BERT uncased: ids 0..1995 are [PAD], [unusedN], specials and single characters
BATCH = 512
#: Ridge weight of the fit's pull towards the step-1 vectors, and its conjugate-gradient steps.
RIDGE = 1.0
CG_STEPS = 60
#: Singular values of the table's text embeddings below this share of the largest are cut from
#: the model projection's fit, so that a direction the texts leave all but empty is not fitted to rounding.
PROJECTION_RCOND = 1e-6
#: Corpus texts kept: fortunes of 3 to 200 words (the rest is ASCII art or long stories).
MIN_WORDS, MAX_WORDS = 3, 200
SKIPPED_FILES = ("art", "ascii-art")


def token_vectors(model_path: Path, vocab_size: int, cls_id: int, sep_id: int, pooling: str) -> npt.NDArray[np.float64]:
    """The model's output for each id alone: ``[CLS] id [SEP]``, pooled."""
    import onnxruntime as ort  # type: ignore[import-untyped]

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # one thread: the same sums in the same order on every run
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    out = np.empty((vocab_size, 0), dtype=np.float64)
    for start in range(0, vocab_size, BATCH):
        ids = np.arange(start, min(start + BATCH, vocab_size), dtype=np.int64)
        batch = np.stack([np.full_like(ids, cls_id), ids, np.full_like(ids, sep_id)], axis=1)
        feed = {"input_ids": batch, "attention_mask": np.ones_like(batch)}
        if "token_type_ids" in names:
            feed["token_type_ids"] = np.zeros_like(batch)
        hidden = session.run(None, feed)[0].astype(np.float64)
        if out.shape[1] == 0:
            out = np.empty((vocab_size, hidden.shape[2]), dtype=np.float64)
        out[ids] = hidden.mean(axis=1) if pooling == "mean" else hidden[:, 1]
    return out


def corpus_texts(corpus: Path) -> list[str]:
    """The fortunes of a fortune(6) directory (entries between ``%`` lines), in file
    and entry order, whitespace collapsed, each once."""
    texts: dict[str, None] = {}
    for path in sorted(corpus.iterdir()):
        if path.suffix in (".dat", ".u8") or path.name in SKIPPED_FILES or not path.is_file():
            continue
        for entry in path.read_text(encoding="utf-8", errors="replace").split("\n%\n"):
            text = " ".join(entry.split())
            if text != "%" and MIN_WORDS <= len(text.split()) <= MAX_WORDS:
                texts[text] = None
    return list(texts)


def text_vectors(source_dir: Path, texts: list[str]) -> npt.NDArray[np.float64]:
    """The model's embedding of each text, by `ctxfold.Embedder` (the mean of its outputs
    over the first 256 tokens, L2-normalised) on one ONNX Runtime thread."""
    import ctxfold

    embedder = ctxfold.Embedder(source_dir, threads=1, cache=False)
    return np.asarray(embedder.embed(texts), dtype=np.float64)


def text_weights(weights: npt.NDArray[np.float64], tokenizer_path: Path, texts: list[str], vocab_size: int) -> Any:
    """``A``: one sparse row per text, its tokens' SIF weights summing to one
    (a text without weighted tokens has an empty row), so ``A T`` is each
    text's weighted mean of the table ``T``."""
    import scipy.sparse as sp  # type: ignore[import-untyped]
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    tokenizer.no_padding()  # the ids `StaticEmbedder` averages over: every token, no pads
    tokenizer.no_truncation()
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    for r, encoding in enumerate(tokenizer.encode_batch(texts, add_special_tokens=False)):
        ids = encoding.ids
        w = weights[ids]
        if not ids or w.sum() <= 0:
            continue
        rows += [r] * len(ids)
        cols += ids
        vals += list(w / w.sum())
    a = sp.csr_matrix((vals, (rows, cols)), shape=(len(texts), vocab_size), dtype=np.float64)
    a.sum_duplicates()
    return a


def fit_to_texts(vectors: npt.NDArray[np.float64], a: Any, targets: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The table nearest `vectors` (scaled) whose weighted token means match `targets`:
    ``min |A T - Y|^2 + RIDGE |T - c V|^2``, ``A`` each text's SIF weights over its tokens
    (`text_weights`), by ``CG_STEPS`` conjugate-gradient steps from ``c V``."""
    pooled = a @ vectors
    start = vectors * float((pooled * targets).sum() / (pooled * pooled).sum())
    # Block conjugate gradients on (A^T A + RIDGE I) X = A^T (Y - A start), one column per dimension.
    x = np.zeros_like(start)
    residual = a.T @ (targets - a @ start)
    direction = residual.copy()
    norms = (residual * residual).sum(axis=0)
    for _ in range(CG_STEPS):
        product = a.T @ (a @ direction) + RIDGE * direction
        step = norms / np.maximum((direction * product).sum(axis=0), 1e-300)
        x += direction * step
        residual -= product * step
        new_norms = (residual * residual).sum(axis=0)
        direction = residual + direction * (new_norms / np.maximum(norms, 1e-300))
        norms = new_norms
    fitted: npt.NDArray[np.float64] = start + x
    return fitted


def model_projection(a: Any, table: npt.NDArray[np.float16], targets: npt.NDArray[np.float64]) -> npt.NDArray[np.float32]:
    """The linear map from the table's text embeddings to the model's (``(dim, model dim)``),
    least squares over the fit's texts: a message embedded by the table, times it, is a
    vector in the model's space, to set beside the model's embedding of a question."""
    pooled = a @ table.astype(np.float64)
    norms = np.linalg.norm(pooled, axis=1)
    kept = norms > 0
    mapped, *_ = np.linalg.lstsq(pooled[kept] / norms[kept, None], targets[kept], rcond=PROJECTION_RCOND)
    out: npt.NDArray[np.float32] = mapped.astype(np.float32)
    return out


def projection(x: npt.NDArray[np.float64], dim: int) -> npt.NDArray[np.float64]:
    """Projection on the ``dim`` leading axes, not centred, signs fixed."""
    _, _, vt = np.linalg.svd(x, full_matrices=False)
    axes = vt[:dim]
    signs = np.sign(axes[np.arange(len(axes)), np.argmax(np.abs(axes), axis=1)])
    return x @ (axes * signs[:, None]).T


def pca(x: npt.NDArray[np.float64], dim: int) -> npt.NDArray[np.float64]:
    """Centred projection on the ``dim`` principal axes, signs fixed."""
    centred = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    axes = vt[:dim]
    signs = np.sign(axes[np.arange(len(axes)), np.argmax(np.abs(axes), axis=1)])
    return centred @ (axes * signs[:, None]).T


def zipf_sif_weights(vocab_size: int, a: float) -> npt.NDArray[np.float64]:
    """``a / (a + p)`` with ``p(rank) = 1 / (rank * ln V)``, rank 1 for every id
    before the frequency-ordered words (specials and single characters, which
    are common or never seen: either way they should weigh little)."""
    rank = np.maximum(np.arange(vocab_size, dtype=np.float64) - (FIRST_RANKED_ID - 1), 1.0)
    p = 1.0 / (rank * np.log(vocab_size))
    return a / (a + p)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(source_dir: Path, out_dir: Path, dim: int, sif_a: float, pooling: str,
          corpus: Path | None = None) -> dict[str, object]:
    model_path, tokenizer_path = source_dir / "model.onnx", source_dir / "tokenizer.json"
    tokenizer = json.loads(tokenizer_path.read_text(encoding="utf-8"))
    vocab: dict[str, int] = tokenizer["model"]["vocab"]
    vocab_size = max(vocab.values()) + 1
    vectors = token_vectors(model_path, vocab_size, vocab["[CLS]"], vocab["[SEP]"], pooling)
    if not 1 <= dim <= vectors.shape[1]:
        raise SystemExit(f"--dim must be in 1..{vectors.shape[1]}, got {dim}")
    weights = zipf_sif_weights(vocab_size, sif_a).astype(np.float32)
    fit: dict[str, object] = {}
    mapped: npt.NDArray[np.float32] | None = None
    if corpus is None:
        table = pca(vectors, dim).astype(np.float16)
    else:
        texts = corpus_texts(corpus)
        targets = text_vectors(source_dir, texts)
        a = text_weights(weights.astype(np.float64), tokenizer_path, texts, vocab_size)
        fitted = fit_to_texts(vectors, a, targets)
        table = projection(fitted, dim).astype(np.float16)
        mapped = model_projection(a, table, targets)
        digest = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()
        fit = {"fit": {"corpus": "Debian fortunes and fortunes-min 1:1.99.1-7.3, /usr/share/games/fortunes",
                       "texts": len(texts), "texts_sha256": digest, "ridge": RIDGE, "cg_steps": CG_STEPS,
                       "words": [MIN_WORDS, MAX_WORDS], "target": "MiniLM mean pooling, L2-normalised, 256 tokens",
                       "model_projection": "float32 (dim, 384), least squares from the table's embeddings of "
                                           "the fit's texts to the model's"}}
    config = {
        "format": FORMAT,
        "tokenizer_model": TOKENIZER_MODEL,
        "tokenizer_sha256": sha256(tokenizer_path),
        "source_model_sha256": sha256(model_path),
        "vocab_size": vocab_size,
        "dim": dim,
        "recipe": {
            "input": "[CLS] token [SEP], one token per sequence",
            "pooling": pooling,
            "pca": ("centred, float64 SVD, each axis's largest loading positive" if corpus is None
                    else "not centred, float64 SVD, each axis's largest loading positive"),
            **fit,
            "weights": "SIF a / (a + p), p = 1 / (rank * ln V), rank = id - first_ranked_id + 1 (at least 1)",
            "sif_a": sif_a,
            "first_ranked_id": FIRST_RANKED_ID,
            "table_dtype": "float16",
        },
        "script": "scripts/build_static_table.py",
    }
    return write_model(out_dir, table, weights, config, mapped)


def write_model(out_dir: Path, table: npt.NDArray[np.float16], weights: npt.NDArray[np.float32], config: dict[str, object],
                mapped: npt.NDArray[np.float32] | None = None) -> dict[str, object]:
    """The files `StaticEmbedder` loads, byte-for-byte the same for the same arrays
    (``model_projection.npy`` only for a table fitted to texts)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    np.save(out_dir / "table.npy", table)
    np.save(out_dir / "weights.npy", weights)
    names = ["config.json", "table.npy", "weights.npy"]
    if mapped is not None:
        np.save(out_dir / "model_projection.npy", mapped)
        names.insert(1, "model_projection.npy")
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    sums = {name: sha256(out_dir / name) for name in names}
    (out_dir / "SHA256SUMS").write_text("".join(f"{h}  {n}\n" for n, h in sums.items()), encoding="utf-8")
    return {"sha256": sums, "sizes": {n: (out_dir / n).stat().st_size for n in sums}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=SOURCE_DIR, help="directory with model.onnx and tokenizer.json")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    parser.add_argument("--dim", type=int, default=DIM)
    parser.add_argument("--sif-a", type=float, default=SIF_A)
    parser.add_argument("--pooling", choices=["token", "mean"], default="token")
    parser.add_argument("--corpus", type=Path, default=None,
                        help="a fortune(6) directory to fit the table to (apt-get install fortunes fortunes-min: "
                             "/usr/share/games/fortunes)")
    args = parser.parse_args()
    if args.corpus is not None and not args.corpus.is_dir():
        parser.error(f"--corpus: {args.corpus} is not a directory (apt-get install fortunes fortunes-min)")
    start = time.perf_counter()
    info = build(args.source, args.out, args.dim, args.sif_a, args.pooling, args.corpus)
    print(f"wrote {args.out} in {time.perf_counter() - start:.0f} s")
    for name, digest in info["sha256"].items():  # type: ignore[attr-defined]
        print(f"  {digest}  {name}  ({info['sizes'][name]} bytes)")  # type: ignore[index]
    return 0


if __name__ == "__main__":
    sys.exit(main())
