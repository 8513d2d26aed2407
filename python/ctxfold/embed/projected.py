"""`ProjectedEmbedder`: a model's embeddings mapped into a static table's space.

The static table embeds a text as the mean of its tokens' vectors, so it
cannot read a word in context ("hobbies" near "I play a lot of games"); the
model it was distilled from can. A table fitted to the model's embeddings of
whole texts carries a linear map from the model's space to its own
(`StaticEmbedder.query_projection`): a question embedded by the model and
mapped is a second view of it, comparable with the messages the table
embedded. One short text per question, so it costs milliseconds where
embedding every message with the model would cost seconds.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxfold.errors import InvalidTypeError, ModelError

__all__ = ["ProjectedEmbedder", "shared_encoder"]

FloatArray = npt.NDArray[np.float32]

#: What the shared model reads of a question: its first 128 tokens carry what it
#: asks, and a long last message (a pasted document) would otherwise cost up to
#: 256 tokens of the model on every turn.
QUESTION_TOKENS = 128


class ProjectedEmbedder:
    """Embeds with `encoder` (anything with ``embed(list[str]) -> (n, model
    dim)``; default: the shipped MiniLM, loaded once per process) and maps
    the vectors into `table`'s space with its query projection, L2-normalised.

    Raises ``ModelError`` when `table` has no query projection (a table not
    fitted to texts) or when the encoder's dimension is not the one the
    projection maps from."""

    def __init__(self, table: Any, encoder: Any = None) -> None:
        projection = getattr(table, "query_projection", None)
        if projection is None:
            raise ModelError(
                f"table: {table!r} has no query projection. Fix: use the shipped StaticEmbedder(), or a table "
                "built with scripts/build_static_table.py --corpus"
            )
        if encoder is not None and not callable(getattr(encoder, "embed", None)):
            raise InvalidTypeError(f"encoder: {type(encoder).__name__} has no embed() method. Fix: pass "
                                   "ctxfold.Embedder() or another object with embed(list[str]) -> (n, d) array")
        self.table = table
        self._encoder = encoder
        self.projection: FloatArray = np.asarray(projection, dtype=np.float32)
        self.model_id = f"{getattr(self.encoder, 'model_id', type(self.encoder).__name__)}->{Path(str(table.path)).name}"
        """What names these vectors: the encoder's model and the table they are mapped into."""

    @property
    def encoder(self) -> Any:
        """The encoder given, else the process's shared MiniLM (`shared_encoder`),
        looked up on each use so that a forked worker loads its own."""
        return self._encoder if self._encoder is not None else shared_encoder()

    @property
    def dim(self) -> int:
        """The table's dimension, which the vectors have."""
        return int(self.projection.shape[1])

    def __repr__(self) -> str:
        return f"ProjectedEmbedder(table={self.table!r}, encoder={self.encoder!r})"

    def embed(self, texts: str | Sequence[str]) -> FloatArray:
        """Unit-norm vectors in the table's space: ``(len(texts), dim)`` for a list, ``(dim,)`` for one str."""
        single = isinstance(texts, str)
        vectors = np.asarray(self.encoder.embed([texts] if single else list(texts)), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.projection.shape[0]:
            raise ModelError(
                f"encoder {self.encoder!r} gives vectors of shape {vectors.shape[1:]}, the projection maps "
                f"{self.projection.shape[0]} dimensions. Fix: use the model the table was distilled from "
                f"({self.table.config.get('tokenizer_model', 'all-MiniLM-L6-v2')})"
            )
        mapped = vectors @ self.projection
        norms = np.linalg.norm(mapped, axis=1, keepdims=True)
        out: FloatArray = np.divide(mapped, norms, out=np.zeros_like(mapped), where=norms > 0)
        return out[0] if single else out

    __call__ = embed


def shared_encoder() -> Any:
    """The shipped MiniLM (`ctxfold.Embedder`, no vector cache, the first
    `QUESTION_TOKENS` tokens of a text), loaded once
    per process and model directory: every engine embeds its questions
    with the same ONNX session instead of loading the model again. A forked
    child gets a session of its own (an ONNX Runtime session does not
    survive a fork)."""
    from ctxfold.models import DEFAULT_EMBEDDING_MODEL, locate_model

    return _encoder_in(locate_model(DEFAULT_EMBEDDING_MODEL).parent, os.getpid())


@functools.lru_cache(maxsize=8)
def _encoder_in(models_dir: Path, pid: int) -> Any:
    """The model under `models_dir` for process `pid` (a key of the cache only)."""
    from ctxfold.embed.onnx import Embedder

    # Located by name under models_dir, so the shipped model's checksums are verified.
    return Embedder(models_dir=models_dir, cache=False, max_length=QUESTION_TOKENS)
