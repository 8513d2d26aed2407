"""The exception hierarchy. Every error ctxfold raises is a `CtxFoldError`;
each subclass is also the built-in exception a caller would catch without
knowing ctxfold (`ValueError`, `TypeError`, `KeyError`, `FileNotFoundError`).
The compiled core imports these classes, so Rust and Python raise the same ones."""

from __future__ import annotations

__all__ = [
    "CtxFoldError",
    "InvalidInputError",
    "InvalidTypeError",
    "UnknownModelError",
    "UnknownEncodingError",
    "MissingFileError",
    "BudgetError",
    "ModelError",
    "ModelNotFoundError",
    "StoreError",
]


class CtxFoldError(Exception):
    """Base class of every error raised by ctxfold."""


class InvalidInputError(CtxFoldError, ValueError):
    """An argument has a value that cannot be used; the message names it and the fix."""


class InvalidTypeError(CtxFoldError, TypeError):
    """An argument has the wrong type; the message names it and the expected type."""


class UnknownModelError(CtxFoldError, KeyError):
    """A model name with no known encoding; the message lists the known names."""

    # KeyError's str() would show the message in quotes.
    __str__ = Exception.__str__


class UnknownEncodingError(CtxFoldError, ValueError):
    """An encoding name that is not built in."""


class MissingFileError(CtxFoldError, FileNotFoundError):
    """A file named by an argument does not exist."""


class BudgetError(CtxFoldError, ValueError):
    """What must be kept does not fit the token budget; the message says by how much."""


class ModelError(CtxFoldError, RuntimeError):
    """A model file is corrupt, the wrong version or cannot be run; the message
    names the path and the fix."""


class ModelNotFoundError(ModelError, MissingFileError):
    """A model file or directory does not exist; also a `FileNotFoundError`."""


class StoreError(CtxFoldError, RuntimeError):
    """A memory store cannot be opened, read or written (corrupt or non-SQLite
    file, read-only path, unreachable PostgreSQL server, embeddings of the
    wrong dimension, ...); the message names the path or DSN (password
    masked) and the fix."""
