"""The compiled module `ctxfold._core` documents itself: every public function,
class, method and property has the docstring its stub (`_core.pyi`) gives, so
`help()` shows it, and the stubs pass `mypy.stubtest` against the module."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxfold import _core

STUB = Path(_core.__file__).with_name("_core.pyi")


def _stub_docstrings() -> dict[str, str]:
    """`{"name": doc, "Class.member": doc}` for everything the stub documents."""
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    docs: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
            doc = ast.get_docstring(node)
            if doc:
                docs.setdefault(node.name, doc)  # overloads: the first one carries it
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            doc = ast.get_docstring(node)
            if doc:
                docs[node.name] = doc
            for item in node.body:
                # A dunder is a type slot: CPython gives it its own docstring.
                if isinstance(item, ast.FunctionDef) and not item.name.startswith("__"):
                    doc = ast.get_docstring(item)
                    if doc:
                        docs[f"{node.name}.{item.name}"] = doc
    return docs


STUB_DOCS = _stub_docstrings()


def _runtime(dotted: str) -> object:
    obj: object = _core
    for part in dotted.split("."):
        obj = inspect.getattr_static(obj, part) if isinstance(obj, type) else getattr(obj, part)
    return obj


def _public_members(cls: type) -> list[str]:
    return [name for name in vars(cls) if not name.startswith("_")]


def test_the_stub_documents_every_public_name() -> None:
    public = [name for name in dir(_core) if not name.startswith("_")]
    assert public, "the compiled module exports nothing"
    missing = [name for name in public if name not in STUB_DOCS]
    for name in public:
        obj = getattr(_core, name)
        if isinstance(obj, type):
            missing += [f"{name}.{m}" for m in _public_members(obj) if f"{name}.{m}" not in STUB_DOCS]
    assert not missing, f"no docstring in _core.pyi for {missing}"


@pytest.mark.parametrize("name", sorted(STUB_DOCS))
def test_help_shows_the_stub_docstring(name: str) -> None:
    obj = _runtime(name)
    if isinstance(obj, staticmethod):
        obj = obj.__func__
    runtime = inspect.cleandoc(obj.__doc__ or "")
    assert runtime == STUB_DOCS[name], f"{name}: the `///` docs in rust/py/src differ from _core.pyi"


def test_help_of_the_public_reexport() -> None:
    import ctxfold

    assert ctxfold.count_tokens is _core.count_tokens
    text = inspect.getdoc(ctxfold.count_tokens) or ""
    assert text.startswith("Exact token count of a text")
    assert str(inspect.signature(ctxfold.count_tokens)) == "(text, *, model=None, encoding=None)"


def test_stubtest_accepts_the_stubs(tmp_path: Path) -> None:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[dev]')")
    package_root = str(Path(_core.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    result = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "ctxfold._core"],  # its cache goes to cwd
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
