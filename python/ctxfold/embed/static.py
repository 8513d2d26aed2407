"""Static sentence embeddings: the fast path next to `ctxfold.Embedder`.

A static model is a table with one vector per token of the MiniLM vocabulary,
distilled from the ONNX model and fitted to what it says of whole texts
(scripts/build_static_table.py; recipe and
figures in models/minilm-static/README.md). A text's embedding is the weighted
mean of its tokens' rows, L2-normalised, computed in the Rust core with the GIL
released: no model run, so it is far faster than the encoder (docs/benchmarks.md), at
some cost in quality (best used fused with BM25, or to shortlist for MiniLM).

A static model directory holds:

- ``table.npy``: float16 ``(vocab, dim)``;
- ``weights.npy``: float32 ``(vocab,)``, each token's weight in the mean;
- ``model_projection.npy`` (optional; a table fitted to texts has one):
  float32 ``(dim, model dim)``, the map from the table's text embeddings to
  the source model's, so the table's messages can be set beside a question
  the model embeds (`ctxfold.embed.ProjectedEmbedder`);
- ``config.json``: the format and the tokenizer the table belongs to;
- ``tokenizer.json`` (optional): else the tokenizer of the model named in
  ``config.json`` (``all-MiniLM-L6-v2``) is located like `Embedder` does;
- ``SHA256SUMS`` (optional for user directories): checked on load.

The shipped model's checksums are pinned below, like ``KNOWN_MODELS`` pins
MiniLM's.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxfold import _core
from ctxfold.errors import (
    CtxFoldError,
    InvalidInputError,
    InvalidTypeError,
    ModelError,
    ModelNotFoundError,
)
from ctxfold.models import (
    KNOWN_MODELS,
    ModelFile,
    ModelSpec,
    locate_model,
    read_checksums,
    verified_path,
    verify_file,
)

__all__ = ["DEFAULT_STATIC_MODEL", "STATIC_FORMAT", "STATIC_MODEL_SPEC", "StaticEmbedder"]

FloatArray = npt.NDArray[np.float32]

DEFAULT_STATIC_MODEL = "minilm-static"
STATIC_FORMAT = "ctxfold-static-1"
TABLE_FILE = "table.npy"
WEIGHTS_FILE = "weights.npy"
PROJECTION_FILE = "model_projection.npy"
CONFIG_FILE = "config.json"
TOKENIZER_FILE = "tokenizer.json"

# Written by scripts/build_static_table.py; the same figures are in
# models/minilm-static/README.md and SHA256SUMS.
STATIC_MODEL_SPEC = ModelSpec(
    name=DEFAULT_STATIC_MODEL,
    files=(
        ModelFile(TABLE_FILE, "25aa8c52802ba993993933e180fecf9491db0b853f498a1f37192aa4a7d5414b", 15_627_392),
        ModelFile(WEIGHTS_FILE, "7c1c1ca76d962edda0a9e8530d27f8f161e8bc7124cf2c64c20277328bacba92", 122_216),
        ModelFile(PROJECTION_FILE, "edffc099e713821f28d96419040de449c1ff5b25a2f01d4426a5e56c6dec5ead", 393_344),
        ModelFile(CONFIG_FILE, "e723e388a1e0578f001c5a9d7f9cead6243542acc1c8ce12584c1df355e049a1", 1_205),
    ),
    licence="Apache-2.0",
    source=("distilled from all-MiniLM-L6-v2 (models/all-MiniLM-L6-v2/model.onnx) and fitted to its embeddings of "
            "Debian's fortunes by scripts/build_static_table.py"),
)


class StaticEmbedder:
    """Embed texts with a static token table (no model run).

    ``StaticEmbedder()`` loads the table shipped with ctxfold
    (``minilm-static``, found like `Embedder`'s model: ``models_dir=``, then
    ``CTXFOLD_MODELS``, then the package), checking the sha256 of each file.
    ``StaticEmbedder(path)`` loads a static model directory (see the module
    docstring); a ``SHA256SUMS`` there is verified.

    ``weighted=True`` (default) averages the token vectors with the table's
    frequency weights (rare tokens count more): the better choice for cosine
    retrieval on its own. ``weighted=False`` takes their plain mean: better
    when the scores are fused with BM25, which already weighs rare terms (see
    models/minilm-static/README.md for the figures).

    ``embed(list)`` returns a float32 array ``(len, dim)`` of unit vectors
    (``(0, dim)`` for an empty list); ``embed(str)`` returns one vector
    ``(dim,)``. Texts are
    embedded whole (no truncation). A text with no tokens (empty or only
    whitespace) gets the zero vector: its cosine with anything is 0. There is
    no cache: a text is cheap to embed again. Thread-safe.

    Raises ``InvalidTypeError`` for anything but a str or a list/tuple of str,
    ``InvalidInputError`` for text that is not valid UTF-8 (lone surrogates),
    ``ModelNotFoundError``/``ModelError`` (naming the path and the fix) for a
    missing, corrupt or inconsistent model file.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        models_dir: str | os.PathLike[str] | None = None,
        weighted: bool = True,
    ) -> None:
        if not isinstance(weighted, bool):
            raise InvalidTypeError(f"weighted: expected bool, got {type(weighted).__name__}")
        self.weighted = weighted
        if path is not None and models_dir is not None:
            raise InvalidInputError("path: pass either path= (the static model's directory) or models_dir=, not both")
        if path is None:
            self.path = locate_model(DEFAULT_STATIC_MODEL, models_dir=models_dir,
                                     files=[TABLE_FILE, WEIGHTS_FILE, PROJECTION_FILE, CONFIG_FILE])
            spec: ModelSpec | None = STATIC_MODEL_SPEC
        else:
            if not isinstance(path, (str, os.PathLike)):
                raise InvalidTypeError(f"path: expected a directory path (str or os.PathLike), got {type(path).__name__}")
            self.path = Path(path)
            if not self.path.is_dir():
                raise ModelNotFoundError(
                    f"static model directory not found: {self.path}. Fix: pass the directory holding "
                    f"{TABLE_FILE}, {WEIGHTS_FILE} and {CONFIG_FILE} (see models/minilm-static/README.md), "
                    "or omit path= to use the table shipped with ctxfold."
                )
            spec = None
        self.config = _read_config(*verified_path(self.path, CONFIG_FILE, spec))
        table_path, _ = verified_path(self.path, TABLE_FILE, spec)
        weights_path, _ = verified_path(self.path, WEIGHTS_FILE, spec)
        self.tokenizer_path = _tokenizer_path(self.path, self.config, models_dir)
        table = _load_array(table_path, np.float16, 2)
        weights = _load_array(weights_path, np.float32, 1)
        if not weighted:
            weights = np.ones_like(weights)
        try:
            self._table = _core.StaticTable(str(self.tokenizer_path), table.astype(np.float32), weights)
        except CtxFoldError as e:
            raise ModelError(
                f"static model {self.path} does not fit its tokenizer {self.tokenizer_path}: {e}. "
                "Fix: use the tokenizer the table was built with, or rebuild the table for this tokenizer "
                "(the recipe is in the README beside the shipped table)."
            ) from e
        self.model_projection: FloatArray | None = None
        """The map from this table's text embeddings to the source model's
        (``(dim, model dim)``), or None for a table without one."""
        if spec is not None or (self.path / PROJECTION_FILE).is_file():
            projection = _load_array(verified_path(self.path, PROJECTION_FILE, spec)[0], np.float32, 2)
            if projection.shape[0] != table.shape[1]:
                raise ModelError(
                    f"{self.path / PROJECTION_FILE} maps from {projection.shape[0]} dimensions, the table has "
                    f"{table.shape[1]}. Fix: rebuild both with scripts/build_static_table.py, or remove the projection."
                )
            self.model_projection = projection

    @property
    def dim(self) -> int:
        """The embedding dimension."""
        return int(self._table.dim)

    @property
    def vocab_size(self) -> int:
        """Rows of the table (one per token id)."""
        return int(self._table.vocab_size)

    def __repr__(self) -> str:
        return f"StaticEmbedder(path={str(self.path)!r}, dim={self.dim}, weighted={self.weighted})"

    def embed(self, texts: str | Sequence[str]) -> FloatArray:
        """Unit-norm embeddings: ``(len(texts), dim)`` for a list, ``(dim,)`` for one str."""
        if isinstance(texts, (list, tuple, str)):
            out = self._table.encode(texts)
        elif isinstance(texts, Sequence) and not isinstance(texts, (bytes, bytearray)):
            out = self._table.encode(list(texts))
        else:
            raise InvalidTypeError(f"texts: expected a str or a list of str, got {type(texts).__name__}")
        result: FloatArray = out
        return result

    __call__ = embed

    async def aembed(self, texts: str | Sequence[str]) -> FloatArray:
        """`embed` in a worker thread (the core releases the GIL)."""
        return await asyncio.to_thread(self.embed, texts)

    def token_ids(self, text: str) -> list[int]:
        """The token ids ``text`` is averaged over (the tokenizer's, without special tokens)."""
        ids: list[int] = self._table.token_ids(text)
        return ids

    def count_tokens(self, texts: Sequence[str]) -> npt.NDArray[np.int64]:
        """How many tokens each text has for this embedder (int64 array)."""
        counts: npt.NDArray[np.int64] = self._table.count_tokens(list(texts) if not isinstance(texts, str) else texts)
        return counts


def _read_config(path: Path, _sha: str) -> dict[str, Any]:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ModelError(f"{path} is not a readable JSON file: {e}. Fix: reinstall ctxfold (pip install --force-reinstall ctxfold) to restore the shipped model") from e
    if not isinstance(config, dict) or config.get("format") != STATIC_FORMAT:
        raise ModelError(
            f"{path} does not describe a static model of format {STATIC_FORMAT!r} "
            f"(got format={config.get('format') if isinstance(config, dict) else None!r}). "
            "Fix: point models_dir / CTXFOLD_MODELS at a ctxfold static model, or reinstall ctxfold "
            "(pip install --force-reinstall ctxfold) for the shipped one"
        )
    return config


def _tokenizer_path(model_dir: Path, config: dict[str, Any], models_dir: str | os.PathLike[str] | None) -> Path:
    """``tokenizer.json`` beside the table, else the one of the model named in
    the config, verified against the sha256 the config records."""
    sha = config.get("tokenizer_sha256")
    own = model_dir / TOKENIZER_FILE
    if own.is_file():
        expected = sha or read_checksums(model_dir).get(TOKENIZER_FILE)
        verify_file(own, expected, fix=f"Fix: restore {own} (the tokenizer the table was built for), or delete it")
        return own
    name = config.get("tokenizer_model")
    if not isinstance(name, str) or not name:
        raise ModelError(
            f"{model_dir / CONFIG_FILE} names no tokenizer_model and {own} does not exist. "
            "Fix: put the tokenizer.json the table was built for in the directory"
        )
    spec = KNOWN_MODELS.get(name)
    tokenizer_dir = locate_model(name, models_dir=models_dir, files=[TOKENIZER_FILE])
    path, digest = verified_path(tokenizer_dir, TOKENIZER_FILE, spec)
    if sha and digest != sha:
        raise ModelError(
            f"{path} is not the tokenizer the static table {model_dir} was built for (sha256 {digest}, "
            f"expected {sha}). Fix: restore the {name} tokenizer.json, or rebuild the table for this one"
        )
    return path


def _load_array(path: Path, dtype: type[np.generic], ndim: int) -> npt.NDArray[Any]:
    try:
        array: npt.NDArray[Any] = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ModelError(f"{path} is not a readable .npy file: {e}. Fix: reinstall ctxfold (pip install --force-reinstall ctxfold) to restore the shipped model") from e
    if array.dtype != dtype or array.ndim != ndim:
        raise ModelError(
            f"{path} holds a {array.ndim}-D {array.dtype} array, expected {ndim}-D {np.dtype(dtype).name}. "
            "Fix: reinstall ctxfold (pip install --force-reinstall ctxfold) to restore the shipped model"
        )
    return array
