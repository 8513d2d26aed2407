"""decay_weights against a direct Python transcription of the formulas in
rust/core/src/decay.rs, plus every validation path."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxfold import CtxFoldError, InvalidInputError, InvalidTypeError, decay_weights


def importance_factor(imp: float) -> float:
    return 1.5 if imp > 0.8 else 1.0 if imp > 0.5 else 0.7


def adaptive_half_life(imp: float) -> float:
    return 20.0 if imp > 0.8 else 10.0 if imp > 0.5 else 5.0


def reference(ages, model, *, half_life=10.0, rate=1.0, steps=None, importance=None, turns_ago=None,
              importance_adjust=True, recent_turns=2.0, recent_boost=1.2):
    out = []
    for i, age in enumerate(ages):
        imp = importance[i] if importance is not None else 0.5
        if model == "exponential":
            w = 0.5 ** (age / half_life)
        elif model == "logarithmic":
            w = 1.0 / (1.0 + rate * math.log1p(age))
        elif model == "step":
            w = next((wt for max_age, wt in steps if age <= max_age), steps[-1][1])
        else:
            w = 0.5 ** (age / adaptive_half_life(imp))
        if importance_adjust and importance is not None:
            w *= importance_factor(imp)
        if turns_ago is not None and turns_ago[i] < recent_turns:
            w *= recent_boost
        out.append(min(max(w, 0.0), 1.0))
    return out


ages_st = st.lists(st.floats(0, 1e4, allow_nan=False), min_size=0, max_size=40)


@settings(max_examples=200, deadline=None)
@given(ages_st, st.sampled_from(["exponential", "logarithmic", "step", "adaptive"]),
       st.floats(0.1, 100), st.booleans(), st.data())
def test_matches_the_formulas(ages, model, half_life, with_importance, data) -> None:
    importance = data.draw(st.lists(st.floats(0, 1), min_size=len(ages), max_size=len(ages))) if with_importance else None
    steps = [(2.0, 1.0), (10.0, 0.6), (50.0, 0.3)]
    got = decay_weights(np.array(ages), model, half_life=half_life, steps=steps, importance=importance)
    want = reference(ages, model, half_life=half_life, steps=steps, importance=importance, turns_ago=ages)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    assert ((got >= 0) & (got <= 1)).all()


def test_seconds_get_no_turn_boost_unless_told() -> None:
    seconds = [0.0, 3600.0]
    got = decay_weights(seconds, half_life=3600.0, unit="seconds")
    np.testing.assert_allclose(got, [1.0, 0.5])
    boosted = decay_weights(seconds, half_life=3600.0, unit="seconds", turns_ago=[5, 1])
    np.testing.assert_allclose(boosted, [1.0, 0.6])


def test_accepts_lists_and_strided_arrays() -> None:
    a = np.arange(10, dtype=np.float64)[::2]
    np.testing.assert_allclose(decay_weights(a), decay_weights(list(a)))
    np.testing.assert_allclose(decay_weights(np.arange(5, dtype=np.int32) * 2), decay_weights(a))


@pytest.mark.parametrize(
    ("kwargs", "error", "word"),
    [
        ({"ages": [1.0], "half_life": 0}, InvalidInputError, "half_life"),
        ({"ages": [1.0], "half_life": -3}, InvalidInputError, "half_life"),
        ({"ages": [1.0], "kind": "logarithmic", "rate": 0}, InvalidInputError, "rate"),
        ({"ages": [-1.0]}, InvalidInputError, "ages"),
        ({"ages": [float("nan")]}, InvalidInputError, "ages"),
        ({"ages": [[1.0, 2.0]]}, InvalidInputError, "ages"),
        ({"ages": "abc"}, CtxFoldError, "ages"),
        ({"ages": [1.0], "importance": [1.2]}, InvalidInputError, "importance"),
        ({"ages": [1.0, 2.0], "importance": [0.5]}, InvalidInputError, "importance"),
        ({"ages": [1.0], "kind": "step"}, InvalidInputError, "steps"),
        ({"ages": [1.0], "kind": "step", "steps": [(5, 0.5), (1, 0.2)]}, InvalidInputError, "steps"),
        ({"ages": [1.0], "kind": "step", "steps": [(5, 1.5)]}, InvalidInputError, "steps"),
        ({"ages": [1.0], "kind": "step", "steps": "x"}, InvalidTypeError, "steps"),
        ({"ages": [1.0], "kind": "cubic"}, InvalidInputError, "kind"),
        ({"ages": [1.0], "unit": "days"}, InvalidInputError, "unit"),
        ({"ages": [1.0], "recent_boost": 0.5}, InvalidInputError, "recent_boost"),
    ],
)
def test_bad_parameters(kwargs, error, word) -> None:
    with pytest.raises(error, match=word):
        decay_weights(**kwargs)
