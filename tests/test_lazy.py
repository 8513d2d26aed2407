"""Module attributes imported on first use: `lazy_attributes` on a module
namespace of its own."""

from __future__ import annotations

import sys
import types

import pytest

from ctxfold._lazy import lazy_attributes


def test_a_lazy_name_is_imported_on_first_access_and_kept() -> None:
    sys.modules.pop("colorsys", None)
    namespace: dict[str, object] = {"__name__": "demo", "eager": 1}
    getattr_, dir_ = lazy_attributes(namespace, {"rgb_to_hsv": "colorsys"})
    assert "colorsys" not in sys.modules and "rgb_to_hsv" not in namespace
    function = getattr_("rgb_to_hsv")
    assert function is sys.modules["colorsys"].rgb_to_hsv
    assert namespace["rgb_to_hsv"] is function  # a second access is a plain global
    assert dir_() == ["__name__", "eager", "rgb_to_hsv"]


def test_an_unknown_name_is_an_attribute_error_naming_the_module() -> None:
    getattr_, _ = lazy_attributes({"__name__": "demo"}, {})
    with pytest.raises(AttributeError, match="module 'demo' has no attribute 'missing'"):
        getattr_("missing")


def test_it_works_as_a_module_getattr() -> None:
    module = types.ModuleType("lazy_demo")
    module.__getattr__, module.__dir__ = lazy_attributes(vars(module), {"dedent": "textwrap"})  # type: ignore[method-assign]
    import textwrap

    assert module.dedent is textwrap.dedent
    assert "dedent" in dir(module)
    with pytest.raises(AttributeError):
        module.indent  # noqa: B018
