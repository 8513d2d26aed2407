"""Stores for the memory suites, on SQLite and PostgreSQL: `StoreOpener`, the
`opener` and `store` fixtures (tests/memory/conftest.py imports them),
`Backend` (where one test's store lives; the `backend` fixture), the two
users' scopes the suites write to, and the helpers several suites share. The postgres params use the
session fixture ``pg_dsn`` (conftest.py: a server the test run starts; they
skip when none can be started) and give each opener its own schema."""

from __future__ import annotations

import os
import traceback
import uuid

import numpy as np
import pytest
from ctxfold.memory import PostgresStore, Scope, SqliteStore

BACKENDS = ["sqlite", "postgres"]

U1 = Scope(user_id="u1", conversation_id="c1")
U2 = Scope(user_id="u2", conversation_id="c1")


def _pg_dsn(request: pytest.FixtureRequest) -> str:
    try:
        return str(request.getfixturevalue("pg_dsn"))
    except pytest.FixtureLookupError:
        dsn = os.environ.get("CTXFOLD_TEST_PG_DSN")
        if not dsn:
            pytest.skip("no pg_dsn fixture and CTXFOLD_TEST_PG_DSN is not set")
        return dsn


class StoreOpener:
    """Opens stores on one backend's database (several may share it)."""

    def __init__(self, backend: str, request: pytest.FixtureRequest, directory: os.PathLike[str]) -> None:
        self.backend = backend
        self.opened: list[SqliteStore | PostgresStore] = []
        if backend == "sqlite":
            self.path = os.path.join(directory, "memory.db")
        else:
            self.dsn = _pg_dsn(request)
            self.schema = "ctxtest_" + uuid.uuid4().hex[:16]

    def __call__(self, **kwargs: object) -> SqliteStore | PostgresStore:
        store: SqliteStore | PostgresStore
        if self.backend == "sqlite":
            store = SqliteStore(self.path, **kwargs)  # type: ignore[arg-type]
        else:
            store = PostgresStore(self.dsn, schema=self.schema, **kwargs)  # type: ignore[arg-type]
        self.opened.append(store)
        return store

    def cleanup(self) -> None:
        for store in self.opened:
            store.close()
        if self.backend == "postgres":
            import psycopg

            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')


@pytest.fixture(params=BACKENDS)
def opener(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]):
    o = StoreOpener(request.param, request, tmp_path)
    yield o
    o.cleanup()


@pytest.fixture
def store(opener: StoreOpener):
    return opener()


class Backend:
    """Where one test's store lives: a SQLite file or a fresh PostgreSQL database."""

    def __init__(self, name: str, location: str) -> None:
        self.name = name
        self.location = location

    def open(self, **kwargs):
        if self.name == "sqlite":
            return SqliteStore(self.location, **kwargs)
        return PostgresStore(self.location, **kwargs)

    def __repr__(self) -> str:
        return f"Backend({self.name}, {self.location})"


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: os.PathLike[str]) -> Backend:
    if request.param == "sqlite":
        return Backend("sqlite", os.path.join(tmp_path, "agent.db"))
    return Backend("postgres", request.getfixturevalue("pg_fresh_dsn"))


def unit(seed: int, dim: int = 16) -> np.ndarray:
    """A random unit vector, the same for the same seed."""
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def full_error(exc: BaseException) -> str:
    """The exception as a traceback would print it, chained causes included."""
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def assert_names_fix(message: str) -> None:
    assert "fix" in message.lower(), f"the message does not say how to fix it: {message}"
