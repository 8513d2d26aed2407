"""Module attributes imported on first use (PEP 562), so `import ctxfold`
stays light: the model and store layers load only when a name is touched."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(
    namespace: dict[str, Any], lazy: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """`__getattr__` and `__dir__` for the module whose globals are
    `namespace`: a name in `lazy` is imported from the module it maps to and
    kept in `namespace`, so the import happens once."""
    module_name = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        source = lazy.get(name)
        if source is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(source), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(lazy))

    return __getattr__, __dir__
