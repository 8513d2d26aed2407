"""`ProjectedEmbedder`: a static table's embeddings mapped into its model's space.

The static table embeds a text as the mean of its tokens' vectors, so it
cannot read a word in context ("hobbies" near "I play a lot of games"); the
model it was distilled from can. A table fitted to the model's embeddings of
whole texts carries a linear map from its own space to the model's
(`StaticEmbedder.model_projection`): the table's messages, mapped, can be set
beside a question the model embedded (`SharedEncoder`). One short text per
question goes through the model, so it costs milliseconds where embedding
every message with the model would cost seconds.
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

__all__ = ["ModelView", "ProjectedEmbedder", "SharedEncoder", "shared_encoder"]

FloatArray = npt.NDArray[np.float32]

#: What the shared model reads of a question: its first 128 tokens carry what it
#: asks, and a long last message (a pasted document) would otherwise cost up to
#: 256 tokens of the model on every turn.
QUESTION_TOKENS = 128


class ProjectedEmbedder:
    """Embeds with `table` and maps the vectors into its source model's
    space with the table's model projection, L2-normalised: vectors to set
    beside the model's own, at the table's speed.

    Raises ``ModelError`` when `table` has no model projection (a table not
    fitted to texts)."""

    def __init__(self, table: Any) -> None:
        projection = getattr(table, "model_projection", None)
        if projection is None:
            raise ModelError(
                f"table: {table!r} has no model projection. Fix: use the shipped StaticEmbedder(), or a table "
                "built with scripts/build_static_table.py --corpus"
            )
        self.table = table
        self.projection: FloatArray = np.asarray(projection, dtype=np.float32)
        self.model_id = f"{Path(str(table.path)).name}->{table.config.get('tokenizer_model', 'model')}"
        """What names these vectors: the table and the model whose space they are mapped into."""

    @property
    def dim(self) -> int:
        """The model's dimension, which the vectors have."""
        return int(self.projection.shape[1])

    def __repr__(self) -> str:
        return f"ProjectedEmbedder(table={self.table!r})"

    def embed(self, texts: str | Sequence[str]) -> FloatArray:
        """Unit-norm vectors in the model's space: ``(len(texts), dim)`` for a list, ``(dim,)`` for one str."""
        single = isinstance(texts, str)
        mapped = self.map(np.asarray(self.table.embed([texts] if single else list(texts)), dtype=np.float32))
        return mapped[0] if single else mapped

    __call__ = embed

    def map(self, vectors: npt.ArrayLike) -> FloatArray:
        """The table's vectors ``(n, table dim)`` (already embedded, any norm)
        mapped into the model's space, L2-normalised; a zero vector stays zero."""
        table_vectors = np.asarray(vectors, dtype=np.float32)
        if table_vectors.ndim != 2 or table_vectors.shape[1] != self.projection.shape[0]:
            raise InvalidTypeError(
                f"vectors: shape {table_vectors.shape}, the projection maps (n, {self.projection.shape[0]}). "
                f"Fix: pass the table's own embeddings ({self.table!r}.embed(texts))"
            )
        mapped = table_vectors @ self.projection
        norms = np.linalg.norm(mapped, axis=1, keepdims=True)
        out: FloatArray = np.divide(mapped, norms, out=np.zeros_like(mapped), where=norms > 0)
        return out


class ModelView:
    """A question read by the model (`question_embedder`, e.g. a cached
    `SharedEncoder`) set beside the messages' table vectors mapped into the
    model's space (`projected`): the second dense view of the semantic layer."""

    def __init__(self, question_embedder: Any, projected: ProjectedEmbedder) -> None:
        self.question_embedder = question_embedder
        self.projected = projected

    def __repr__(self) -> str:
        return f"ModelView(question_embedder={self.question_embedder!r}, projected={self.projected!r})"

    def cosines(self, question: str, table_vectors: npt.ArrayLike) -> FloatArray:
        """The cosine of each message (its table vector, ``(n, table dim)``)
        with the model's embedding of `question`, in the model's space."""
        read = np.asarray(self.question_embedder.embed([question]), dtype=np.float32)[0]
        out: FloatArray = self.projected.map(table_vectors) @ read
        return out


class SharedEncoder:
    """The process's shared MiniLM as an embedder (`shared_encoder`) reading
    the first `max_length` tokens of each text, looked up on each call so
    that a forked worker loads its own."""

    def __init__(self, max_length: int = QUESTION_TOKENS) -> None:
        self.max_length = max_length
        self.model_id = "all-MiniLM-L6-v2" if max_length == QUESTION_TOKENS else f"all-MiniLM-L6-v2:{max_length}"

    def embed(self, texts: Sequence[str]) -> FloatArray:
        """The model's unit-norm vectors of `texts` (their first `max_length` tokens)."""
        vectors: FloatArray = np.asarray(shared_encoder(self.max_length).embed(list(texts)), dtype=np.float32)
        return vectors

    def __repr__(self) -> str:
        return f"SharedEncoder(max_length={self.max_length})"


def shared_encoder(max_length: int = QUESTION_TOKENS) -> Any:
    """The shipped MiniLM (`ctxfold.Embedder`, no vector cache) reading the
    first `max_length` tokens of a text, loaded once per process and model
    directory: every engine embeds its questions (and its short lists, at
    another cut) with the same ONNX session instead of loading the model
    again. A forked child gets a session of its own (an ONNX Runtime
    session does not survive a fork)."""
    from ctxfold.models import DEFAULT_EMBEDDING_MODEL, locate_model

    return _encoder_in(locate_model(DEFAULT_EMBEDDING_MODEL).parent, os.getpid(), max_length)


@functools.lru_cache(maxsize=8)
def _encoder_in(models_dir: Path, pid: int, max_length: int = QUESTION_TOKENS) -> Any:
    """The model under `models_dir` for process `pid` (a key of the cache
    only) at the cut `max_length`, every cut on the session of the first."""
    from ctxfold.embed.onnx import Embedder

    if max_length != QUESTION_TOKENS:
        # The same arguments as the question's call: one cache entry, one session.
        return _encoder_in(models_dir, pid, QUESTION_TOKENS).with_max_length(max_length)
    # Located by name under models_dir, so the shipped model's checksums are verified.
    return Embedder(models_dir=models_dir, cache=False, max_length=QUESTION_TOKENS)
