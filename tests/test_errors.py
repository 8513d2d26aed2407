"""The error hierarchy: every class is a `CtxFoldError` and the built-in a
caller would catch without knowing ctxfold, the top level exports the same
classes, and the compiled core raises them."""

from __future__ import annotations

import pytest

import ctxfold
from ctxfold import errors

BUILT_IN = {
    "InvalidInputError": ValueError,
    "InvalidTypeError": TypeError,
    "UnknownModelError": KeyError,
    "UnknownEncodingError": ValueError,
    "MissingFileError": FileNotFoundError,
    "BudgetError": ValueError,
    "ModelError": RuntimeError,
    "ModelNotFoundError": FileNotFoundError,
    "StoreError": RuntimeError,
}


def test_every_error_is_a_ctxfold_error_and_its_built_in() -> None:
    assert set(errors.__all__) == {"CtxFoldError", *BUILT_IN}
    for name, built_in in BUILT_IN.items():
        cls = getattr(errors, name)
        assert issubclass(cls, errors.CtxFoldError) and issubclass(cls, built_in), name
        assert getattr(ctxfold, name) is cls, f"ctxfold.{name} is not errors.{name}"


def test_the_core_raises_the_same_classes() -> None:
    with pytest.raises(errors.UnknownModelError) as unknown:
        ctxfold.count_tokens("x", model="no-such-model")
    assert not str(unknown.value).startswith(("'", '"')), "a KeyError's message is shown unquoted"
    with pytest.raises(errors.UnknownEncodingError):
        ctxfold.count_tokens("x", encoding="no_such_encoding")
    with pytest.raises(errors.InvalidTypeError):
        ctxfold.count_tokens(42)  # type: ignore[call-overload]
    with pytest.raises(errors.MissingFileError):
        ctxfold.Tokenizer.from_file("/no/such/tokenizer.json")
