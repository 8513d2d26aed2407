"""Sentence embeddings from an ONNX encoder (all-MiniLM-L6-v2 by default).

Texts are tokenized once, sorted by token count and cut into batches, so each
batch is padded only to the longest of similar lengths: on a realistic mix of
short and long chat messages this, not the model, decides the speed. Vectors
are mean-pooled over the real tokens and L2-normalised, and cached under a
hash of the model and the text, so a text already seen costs no inference.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ctxfold.errors import InvalidInputError, InvalidTypeError, ModelError
from ctxfold.models import DEFAULT_EMBEDDING_MODEL, KNOWN_MODELS, hf_tokenizer, locate_model, onnx_session, verified_path

__all__ = ["Embedder", "EmbeddingCache", "MemoryEmbeddingCache", "EmbedderStats"]

FloatArray = npt.NDArray[np.float32]


@runtime_checkable
class EmbeddingCache(Protocol):
    """Where embeddings are kept between calls. Keys are hex content hashes
    that already include the model, so one store can serve several models; a
    persistent store (SQLite, PostgreSQL) only has to implement these two."""

    def get_many(self, keys: Sequence[str]) -> Mapping[str, FloatArray]:
        """The vectors found, by key; missing keys are simply absent."""
        ...

    def put_many(self, items: Mapping[str, FloatArray]) -> None:
        """Store vectors by key."""
        ...


class MemoryEmbeddingCache:
    """An in-process LRU cache of embeddings (thread-safe)."""

    def __init__(self, max_entries: int = 100_000) -> None:
        if isinstance(max_entries, bool) or not isinstance(max_entries, int):
            raise InvalidTypeError(f"max_entries: expected int, got {type(max_entries).__name__}")
        if max_entries < 1:
            raise InvalidInputError(f"max_entries: must be at least 1, got {max_entries}")
        self.max_entries = max_entries
        self._data: OrderedDict[str, FloatArray] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, keys: Sequence[str]) -> dict[str, FloatArray]:
        """The cached vectors of those ``keys`` that are cached (read-only arrays)."""
        found: dict[str, FloatArray] = {}
        with self._lock:
            for key in keys:
                vector = self._data.get(key)
                if vector is not None:
                    self._data.move_to_end(key)
                    found[key] = vector
        return found

    def put_many(self, items: Mapping[str, FloatArray]) -> None:
        """Cache read-only copies of the vectors, evicting the least recently used past `max_entries`."""
        with self._lock:
            for key, vector in items.items():
                # Read-only copies: a caller mutating a returned row must not poison the cache.
                stored = np.array(vector, dtype=np.float32, copy=True)
                stored.setflags(write=False)
                self._data[key] = stored
                self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def clear(self) -> None:
        """Forget every cached vector."""
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)


@dataclass
class EmbedderStats:
    """Counters of what an `Embedder` did (since creation or `reset`)."""

    calls: int = 0
    texts: int = 0
    cache_hits: int = 0
    texts_encoded: int = 0
    tokens_encoded: int = 0
    padded_tokens: int = 0
    inference_runs: int = 0

    def reset(self) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, 0)


class Embedder:
    """Embed texts with an ONNX sentence encoder.

    ``Embedder()`` loads the all-MiniLM-L6-v2 shipped with ctxfold (or found
    through ``CTXFOLD_MODELS`` / ``models_dir=``), checking its sha256.
    ``Embedder(model_dir=...)`` loads any directory holding ``model.onnx``
    (a BERT-style encoder with a ``last_hidden_state`` output) and
    ``tokenizer.json``; a ``SHA256SUMS`` file there is verified too.

    - ``batch_size``: texts per inference run; ``max_length``: tokens kept per
      text (256, the length all-MiniLM-L6-v2 was trained with; longer texts
      are cut, as sentence-transformers does);
    - ``threads``: ONNX Runtime intra-op threads (default: one per core);
    - ``cache``: ``True`` for an in-memory LRU (`MemoryEmbeddingCache`),
      ``None``/``False`` for none, or any object with ``get_many``/``put_many``
      (`EmbeddingCache`) such as a persistent store;
    - ``sort_by_length``: batch texts of similar length together (on by default).

    ``embed(list)`` returns a float32 array ``(len, dim)`` of unit vectors (``(0, dim)``
    for an empty list); ``embed(str)`` returns one vector ``(dim,)``. Thread-safe.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        models_dir: str | os.PathLike[str] | None = None,
        batch_size: int = 32,
        max_length: int = 256,
        threads: int | None = None,
        cache: bool | EmbeddingCache | None = True,
        sort_by_length: bool = True,
    ) -> None:
        self.batch_size = _positive_int(batch_size, "batch_size")
        self.max_length = _positive_int(max_length, "max_length")
        if threads is not None:
            _positive_int(threads, "threads")
        self.threads = threads
        self.sort_by_length = bool(sort_by_length)
        self.cache = _make_cache(cache)
        if model_dir is not None and models_dir is not None:
            raise InvalidInputError(
                "model_dir: pass either model_dir= (the model's own directory) or models_dir=, not both"
            )
        if model_dir is None:
            self.model_dir = locate_model(DEFAULT_EMBEDDING_MODEL, models_dir=models_dir)
            spec = KNOWN_MODELS[DEFAULT_EMBEDDING_MODEL]
        else:
            if not isinstance(model_dir, (str, os.PathLike)):
                raise InvalidTypeError(f"model_dir: expected a path, got {type(model_dir).__name__}")
            self.model_dir = Path(model_dir)
            spec = None
        model_path, model_sha = verified_path(self.model_dir, "model.onnx", spec)
        tokenizer_path, _ = verified_path(self.model_dir, "tokenizer.json", spec)
        self.model_path = model_path
        self._tokenizer_path, self._model_sha = tokenizer_path, model_sha
        # The shipped file pads every text to 128 and cuts at 128; batching pads per batch instead.
        self._tokenizer = hf_tokenizer(tokenizer_path, self.max_length, "replace it with the model's tokenizer.json")
        self._session = onnx_session(model_path, threads)
        self._input_names = {i.name for i in self._session.get_inputs()}
        for required in ("input_ids", "attention_mask"):
            if required not in self._input_names:
                raise ModelError(
                    f"model file {model_path} has no {required!r} input (inputs: {sorted(self._input_names)}). "
                    "Fix: pass the directory of a BERT-style sentence encoder exported to ONNX."
                )
        output = self._session.get_outputs()[0]
        names = [o.name for o in self._session.get_outputs()]
        self._output_name = "last_hidden_state" if "last_hidden_state" in names else output.name
        # model_id names this model's vectors in a persistent store (the file's hash and the cut length).
        self._key_prefix, self.model_id = self._cut_names()
        dim = output.shape[-1] if output.shape else None
        self._dim: int | None = dim if isinstance(dim, int) else None
        self.stats = EmbedderStats()
        self._stats_lock = threading.Lock()

    def _cut_names(self) -> tuple[bytes, str]:
        """The cache keys' prefix and the `model_id` of this model at this cut."""
        return (f"{self._model_sha[:16]}:{self.max_length}:".encode(),
                f"{self.model_dir.name}:{self._model_sha[:16]}:{self.max_length}")

    def with_max_length(self, max_length: int) -> Embedder:
        """This model reading the first ``max_length`` tokens of each text:
        the same ONNX session (nothing is loaded again) and vector cache,
        whose keys name the cut, so the two never share a vector."""
        other = copy.copy(self)
        other.max_length = _positive_int(max_length, "max_length")
        other._tokenizer = hf_tokenizer(self._tokenizer_path, other.max_length, "replace it with the model's tokenizer.json")
        other._key_prefix, other.model_id = other._cut_names()
        other.stats = EmbedderStats()
        other._stats_lock = threading.Lock()
        return other

    @property
    def dim(self) -> int:
        """The embedding dimension (384 for all-MiniLM-L6-v2)."""
        if self._dim is None:
            self._dim = int(self._encode([""]).shape[1])
        return self._dim

    def __repr__(self) -> str:
        return (
            f"Embedder(model_dir={str(self.model_dir)!r}, dim={self.dim}, "
            f"batch_size={self.batch_size}, max_length={self.max_length})"
        )

    def key(self, text: str) -> str:
        """The cache key of ``text``: a hash of the model, ``max_length`` and the text."""
        return hashlib.blake2b(self._key_prefix + text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()

    def embed(self, texts: str | Sequence[str]) -> FloatArray:
        """Unit-norm embeddings: ``(len(texts), dim)`` for a list, ``(dim,)`` for one str."""
        single = isinstance(texts, str)
        items: list[str] = [texts] if isinstance(texts, str) else _check_texts(texts)
        out = np.empty((len(items), self.dim), dtype=np.float32)
        if not items:
            return out
        keys = [self.key(t) for t in items]
        unique: dict[str, str] = {}
        for k, t in zip(keys, items):
            unique.setdefault(k, t)
        found = dict(self.cache.get_many(list(unique))) if self.cache is not None else {}
        todo = [k for k in unique if k not in found]
        if todo:
            vectors = self._encode([unique[k] for k in todo])
            computed = dict(zip(todo, vectors))
            if self.cache is not None:
                self.cache.put_many(computed)
            found.update(computed)
        for i, k in enumerate(keys):
            out[i] = found[k]
        with self._stats_lock:
            self.stats.calls += 1
            self.stats.texts += len(items)
            self.stats.cache_hits += len(unique) - len(todo)
        return out[0] if single else out

    __call__ = embed

    async def aembed(self, texts: str | Sequence[str]) -> FloatArray:
        """`embed` in a worker thread (ONNX Runtime releases the GIL)."""
        return await asyncio.to_thread(self.embed, texts)

    def _encode(self, texts: list[str]) -> FloatArray:
        """Run the model on ``texts`` (no cache): tokenize, batch by length, pool."""
        try:
            encodings = self._tokenizer.encode_batch(texts)
        except Exception as e:  # the Rust tokenizer raises plain Exception subclasses
            raise InvalidInputError(f"texts: cannot be tokenized: {e}") from e
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        if self.sort_by_length:
            order = np.argsort(lengths, kind="stable")
            bounds = length_buckets(lengths[order], self.batch_size)
        else:
            order = np.arange(len(texts))
            bounds = [(s, min(s + self.batch_size, len(texts))) for s in range(0, len(texts), self.batch_size)]
        result: FloatArray | None = None
        runs = padded = 0
        for start, end in bounds:
            rows = order[start:end]
            width = int(lengths[rows].max())
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                n = int(lengths[i])
                ids[r, :n] = encodings[i].ids
                mask[r, :n] = 1
            pooled = self._run(ids, mask)
            if result is None:
                result = np.empty((len(texts), pooled.shape[1]), dtype=np.float32)
            result[rows] = pooled
            runs += 1
            padded += ids.size
        with self._stats_lock:
            self.stats.inference_runs += runs
            self.stats.texts_encoded += len(texts)
            self.stats.tokens_encoded += int(lengths.sum())
            self.stats.padded_tokens += padded
        assert result is not None
        return result

    def _run(self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.int64]) -> FloatArray:
        feed: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feed["token_type_ids"] = np.zeros_like(ids)
        try:
            hidden = self._session.run([self._output_name], feed)[0]
        except Exception as e:  # onnxruntime's errors are not a public hierarchy
            raise ModelError(f"model {self.model_path} failed on a batch of shape {ids.shape}: {e}") from e
        return mean_pool_normalize(hidden, mask)


# The cost of one inference run, in units of one token through the model:
# a fixed overhead per run, and per padded slot 1 + L/ATTENTION_LENGTH (self-
# attention grows with the padded length L); both constants fitted to
# all-MiniLM-L6-v2's timings (benches/bench_embed.py).
RUN_COST = 32.0
ATTENTION_LENGTH = 384.0


def length_buckets(sorted_lengths: npt.NDArray[np.int64], batch_size: int) -> list[tuple[int, int]]:
    """Cut texts sorted by token count into batches of at most ``batch_size``
    that minimise the modelled cost (padding and per-run overhead): a dynamic
    programme over the cut points, O(n * batch_size) with numpy per text."""
    n = len(sorted_lengths)
    lengths = sorted_lengths.astype(np.float64)
    best = np.zeros(n + 1)
    cut = np.zeros(n + 1, dtype=np.int64)
    for end in range(1, n + 1):
        starts = np.arange(max(0, end - batch_size), end)
        width = lengths[end - 1]  # sorted: the last text is the longest of the batch
        costs = best[starts] + RUN_COST + (end - starts) * width * (1.0 + width / ATTENTION_LENGTH)
        i = int(np.argmin(costs))
        best[end], cut[end] = costs[i], starts[i]
    bounds = []
    end = n
    while end > 0:
        bounds.append((int(cut[end]), end))
        end = int(cut[end])
    return bounds[::-1]


def mean_pool_normalize(hidden: npt.NDArray[Any], mask: npt.NDArray[np.int64]) -> FloatArray:
    """Mean of the token vectors where ``mask`` is 1, scaled to unit L2 norm
    (sentence-transformers' Pooling + Normalize). A 2-D ``hidden`` is taken as
    already pooled."""
    hidden = np.asarray(hidden, dtype=np.float32)
    if hidden.ndim == 3:
        weights = mask[:, :, None].astype(np.float32)
        summed = np.einsum("bsd,bsx->bd", hidden, weights)
        pooled = summed / np.maximum(weights.sum(axis=1), 1e-9)
    else:
        pooled = hidden
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    out: FloatArray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return out


def _check_texts(texts: object) -> list[str]:
    if isinstance(texts, (bytes, bytearray)) or not isinstance(texts, Sequence):
        raise InvalidTypeError(f"texts: expected a str or a list of str, got {type(texts).__name__}")
    items = list(texts)
    for i, t in enumerate(items):
        if not isinstance(t, str):
            raise InvalidTypeError(f"texts[{i}]: expected str, got {type(t).__name__}")
    return items


def _positive_int(value: object, argument: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"{argument}: expected int, got {type(value).__name__}")
    if value < 1:
        raise InvalidInputError(f"{argument}: must be at least 1, got {value}")
    return value


def _make_cache(cache: object) -> EmbeddingCache | None:
    if cache is True:
        return MemoryEmbeddingCache()
    if cache is None or cache is False:
        return None
    if isinstance(cache, EmbeddingCache):
        return cache
    raise InvalidTypeError(
        f"cache: expected True, None or an object with get_many(keys) and put_many(items), got {type(cache).__name__}"
    )
