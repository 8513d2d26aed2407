"""Text analysis without a model: entities (`entities`), relative dates (`temporal`)."""

from __future__ import annotations

from ctxfold._lazy import lazy_attributes

_LAZY = {
    "resolve_dates": "ctxfold.text.temporal",
    "annotate_dates": "ctxfold.text.temporal",
    "strip_date_annotations": "ctxfold.text.temporal",
    "DateReference": "ctxfold.text.temporal",
}
__all__ = list(_LAZY)
__getattr__, __dir__ = lazy_attributes(globals(), _LAZY)
