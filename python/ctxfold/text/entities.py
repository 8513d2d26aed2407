"""Cheap entity extraction for the entity-overlap layer and for checking that
summaries keep names and numbers: capitalised words, numbers, dates, quoted
strings, file paths and code identifiers. Regular expressions only: it has to
run over a 100,000-token history in a few milliseconds."""

from __future__ import annotations

import re

__all__ = ["extract_entities"]

_PATTERNS = [
    r"\b\d{4}-\d{2}-\d{2}\b",  # ISO dates
    r"\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b",  # 5/21, 5/21/2023
    r"\$?\b\d+(?:[.,]\d+)*%?",  # numbers, money, percentages
    r"\b[A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*\b",  # capitalised words and runs of them
    r"(?:[\w.-]+/)+[\w.-]+",  # paths
    r"\b[a-z]+(?:_[a-z0-9]+)+\b|\b[a-z]+(?:[A-Z][a-z0-9]+)+\b",  # snake_case, camelCase
    r"\"([^\"\n]{3,60})\"",  # quoted phrases
]
_ENTITY = re.compile("|".join(f"(?:{p})" for p in _PATTERNS))
# Capitalised words that start sentences or address the reader carry no entity.
_COMMON = frozenset(
    """i i'm i've i'd i'll the a an and but or so if it its this that these those there here what when where
    which who why how yes no ok okay sure thanks thank please hi hello hey also however great good well
    my your our their we you he she they is are was were be can could would should will do does did
    let let's sounds as in on at for to of with from by about just some any all not""".split()
)


def extract_entities(text: str) -> set[str]:
    """Lower-cased entity strings found in `text`."""
    found: set[str] = set()
    for match in _ENTITY.finditer(text):
        value = (match.group(1) or match.group(0)).strip().lower()
        if len(value) < 2 and not value.isdigit():
            continue
        words = [w for w in value.split() if w not in _COMMON]
        if not words:
            continue
        found.add(" ".join(words))
        if len(words) > 1:
            found.update(words)
    return found
