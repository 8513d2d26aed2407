"""The fixtures of tests/memory_stores.py for every memory test: `opener`,
`store` and `backend`."""

from memory_stores import backend, opener, store  # noqa: F401  (fixtures)
