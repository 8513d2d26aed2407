"""Turning texts into the unit float32 rows a store keeps, and back from blobs.

The default embedder is ctxfold's `StaticEmbedder` (no model run), created
on first use and shared by the stores of a process; any object with
``embed(list[str]) -> (n, d) array`` can be passed instead.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import numpy.typing as npt

from ctxfold.errors import InvalidInputError, StoreError

__all__ = ["default_embedder", "embed_texts", "from_blobs", "to_blob", "unit_rows"]

FloatArray = npt.NDArray[np.float32]

_default: Any = None
_lock = threading.Lock()


def default_embedder() -> Any:
    """The process's shared `StaticEmbedder`, created on first use."""
    global _default
    with _lock:
        if _default is None:
            from ctxfold.embed.static import StaticEmbedder

            _default = StaticEmbedder()
        return _default


def embed_texts(embedder: Any, texts: list[str]) -> FloatArray:
    """``embedder.embed(texts)`` as unit float32 rows, one per text; an
    embedder without ``embed`` or with rows of the wrong shape is refused."""
    fn = getattr(embedder, "embed", None)
    if not callable(fn):
        raise InvalidInputError(
            f"embedder: {type(embedder).__name__} has no embed() method. "
            "Fix: pass an object with embed(list[str]) -> (n, d) array, or omit embedder="
        )
    out = np.asarray(fn(texts), dtype=np.float32)
    if out.ndim != 2 or out.shape[0] != len(texts):
        raise StoreError(
            f"embedder: {type(embedder).__name__}.embed returned shape {out.shape} for {len(texts)} texts; "
            "expected (n_texts, dim). Fix: pass an embedder that returns one row per text"
        )
    return unit_rows(out, "embedder output")


def unit_rows(vectors: Any, argument: str) -> FloatArray:
    """float32 C-contiguous rows scaled to unit length (zero rows stay zero)."""
    try:
        array = np.array(vectors, dtype=np.float32, copy=True, order="C")
    except (TypeError, ValueError) as e:
        raise InvalidInputError(f"{argument}: not a float array ({e})") from e
    if array.ndim == 1:
        array = array.reshape(1, -1)
    if array.ndim != 2 or array.shape[1] == 0:
        raise InvalidInputError(f"{argument}: expected a 2-D array (n, dim), got shape {array.shape}")
    if not np.isfinite(array).all():
        raise InvalidInputError(f"{argument}: contains NaN or infinite values; remove them")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    np.divide(array, norms, out=array, where=norms > 0)
    return array


def to_blob(vector: FloatArray) -> bytes:
    """A vector as little-endian float32 bytes, the form a store keeps."""
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


def from_blobs(blobs: list[bytes], dim: int) -> FloatArray:
    """Stored blobs back as a ``(len(blobs), dim)`` float32 matrix; `StoreError`
    when one is not ``dim`` floats long."""
    if not blobs:
        return np.zeros((0, dim), dtype=np.float32)
    flat = np.frombuffer(b"".join(blobs), dtype="<f4")
    if flat.size != len(blobs) * dim:
        raise StoreError(
            f"stored embeddings are not all {dim}-dimensional; the store is inconsistent. "
            "Fix: export the memories (export_yaml) and import them into a new store"
        )
    return flat.reshape(len(blobs), dim).astype(np.float32, copy=False)
