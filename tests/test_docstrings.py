"""Every public function and class has a docstring that `help()` shows: the
names in `ctxfold.__all__` and in every public submodule's `__all__`, and the
public methods and properties of the classes `ctxfold` exports."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType
from typing import Any

import ctxfold

# Names still without a docstring; an entry that gets one must leave the list.
UNDOCUMENTED = {"ctxfold.engine.plan.Plan", "ctxfold.engine.plan.gap_marker"}


def public_modules() -> list[ModuleType]:
    names = [m.name for m in pkgutil.walk_packages(ctxfold.__path__, "ctxfold.")]
    public = [n for n in names if not any(part.startswith("_") for part in n.split("."))]
    return [ctxfold, *(importlib.import_module(n) for n in public)]


def own_doc(obj: Any) -> str:
    """The docstring `help()` shows for ``obj``: for a class, its own, not a
    base class's or the signature a dataclass writes for itself."""
    if inspect.isclass(obj):
        doc = obj.__dict__.get("__doc__") or ""
        return "" if doc.startswith(f"{obj.__name__}(") else doc.strip()
    return inspect.getdoc(obj) or ""


def exported() -> list[tuple[str, Any]]:
    found = []
    for module in public_modules():
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if inspect.isclass(obj) or inspect.isroutine(obj):
                found.append((f"{module.__name__}.{name}", obj))
    return found


def test_every_module_with_public_names_lists_them() -> None:
    missing = [
        m.__name__ for m in public_modules()
        if getattr(m, "__all__", None) is None and any(
            (inspect.isclass(v) or inspect.isfunction(v)) and getattr(v, "__module__", None) == m.__name__
            and not k.startswith("_")
            for k, v in vars(m).items()
        )
    ]
    assert not missing, f"public modules without __all__: {missing}"


def test_every_exported_function_and_class_has_a_docstring() -> None:
    names = exported()
    assert len(names) > 100, "the walk found too few public names"
    missing = sorted({name for name, obj in names if not own_doc(obj)} - UNDOCUMENTED)
    assert not missing, f"no docstring: {missing}"


def test_the_undocumented_list_is_current() -> None:
    documented = {name for name, obj in exported() if own_doc(obj)}
    assert not UNDOCUMENTED & documented, f"documented now, drop from UNDOCUMENTED: {UNDOCUMENTED & documented}"


def test_the_top_level_classes_document_their_methods() -> None:
    missing = []
    for name in ctxfold.__all__:
        cls = getattr(ctxfold, name)
        if not inspect.isclass(cls) or issubclass(cls, BaseException):
            continue
        for attr in dir(cls):
            if attr.startswith("_"):
                continue
            raw = inspect.getattr_static(cls, attr)
            target = raw.fget if isinstance(raw, property) else getattr(raw, "__func__", raw)
            if (inspect.isroutine(target) or isinstance(raw, property)) and not inspect.getdoc(target):
                missing.append(f"{name}.{attr}")
    assert not missing, f"no docstring: {missing}"


def test_the_check_sees_a_missing_docstring() -> None:
    def bare() -> None:
        pass

    class Bare:
        pass

    assert own_doc(bare) == "" and own_doc(Bare) == ""
