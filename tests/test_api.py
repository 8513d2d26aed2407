"""The public surface: every name in `ctxfold.__all__` resolves, the
compiled module matches its stubs, and importing stays light."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import ctxfold


def test_every_public_name_resolves() -> None:
    for name in ctxfold.__all__:
        assert getattr(ctxfold, name) is not None, name
    with pytest.raises(AttributeError):
        ctxfold.no_such_name  # noqa: B018


def test_stubs_cover_the_compiled_module() -> None:
    stub = (Path(ctxfold.__file__).parent / "_core.pyi").read_text(encoding="utf-8")
    for name in dir(ctxfold._core):
        if not name.startswith("_"):
            assert f"def {name}(" in stub or f"class {name}" in stub, f"{name} has no stub in _core.pyi"


def test_import_does_not_load_the_python_layers() -> None:
    code = "import sys, ctxfold; print(sorted(m for m in ('ctxfold.engine.context_engine', 'ctxfold.embed.onnx', 'onnxruntime') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
