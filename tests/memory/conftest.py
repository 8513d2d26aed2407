"""The `opener` and `store` fixtures of tests/memory_stores.py for every memory test."""

from memory_stores import opener, store  # noqa: F401  (fixtures)
