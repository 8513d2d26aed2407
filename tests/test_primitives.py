"""`ctxfold.primitives`: the core's numeric functions under one module, the
same objects `ctxfold` re-exports."""

from __future__ import annotations

import ctxfold
import ctxfold.primitives as primitives
from ctxfold import _core


def test_every_primitive_is_the_compiled_object() -> None:
    for name in primitives.__all__:
        assert getattr(primitives, name) is getattr(_core, name), name


def test_the_top_level_reexports_are_the_same_objects() -> None:
    shared = set(primitives.__all__) & set(ctxfold.__all__)
    assert {"cosine_similarity", "negotiate_budget", "plan_layers", "select_options", "segment"} <= shared
    for name in shared:
        assert getattr(ctxfold, name) is getattr(primitives, name), name


def test_the_module_exports_exactly_its_all() -> None:
    public = {name for name in vars(primitives) if not name.startswith("_") and name != "annotations"}
    assert public == set(primitives.__all__)
