"""Argument checks shared by the memory records: each raises
`InvalidInputError` naming the argument and what it must be."""

from __future__ import annotations

import math
from typing import Any

from ctxfold.errors import InvalidInputError

__all__ = ["unit_interval", "positive_seconds"]


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float))


def unit_interval(value: Any, argument: str) -> float:
    """`value` as a float in [0, 1] (priorities, significances, confidences)."""
    if not _is_number(value) or not 0.0 <= value <= 1.0:
        raise InvalidInputError(f"{argument}: must be a number in [0, 1], got {value!r}")
    return float(value)


def positive_seconds(value: Any, argument: str) -> float:
    """`value` as a positive number of seconds (TTLs)."""
    if not _is_number(value) or math.isnan(value) or value <= 0:
        raise InvalidInputError(f"{argument}: must be a positive number of seconds, got {value!r}")
    return float(value)
