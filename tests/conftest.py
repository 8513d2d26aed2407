"""Shared fixtures. Tests are hermetic: nothing here reads outside the repo or tmp_path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import settings

# The tests run the examples and share their offline fake models (examples/scripted_*.py).
sys.path.append(str(Path(__file__).resolve().parent.parent / "examples"))

# `pytest --hypothesis-profile=fuzz`: the long run of the property tests that
# read their example count from the profile (the engine's agent-loop promises).
settings.register_profile("fuzz", max_examples=2000, deadline=None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: a test that takes more than a few seconds")


# --- PostgreSQL server for the memory tests ---
# One real server per test session (tests/pg_server.py: initdb + pg_ctl from the
# system, a temporary directory, a free loopback port). `pg_dsn` is one database
# for the session; `pg_fresh_dsn` creates a new empty database for one test and
# drops it afterwards. When no server can be started the tests that use them
# skip with the reason, except when CTXFOLD_REQUIRE_POSTGRES is set (to
# anything but "", 0, false or no; .ci/run sets it): there they fail, since that
# CI must run them. (Not the generic CI variable: GitHub's wheel runners set it
# and have no server to start on every platform.)
import itertools as _itertools
import os as _os

_pg_db_numbers = _itertools.count()


def _postgres_required() -> bool:
    return _os.environ.get("CTXFOLD_REQUIRE_POSTGRES", "").strip().lower() not in ("", "0", "false", "no")


@pytest.fixture(scope="session")
def pg_server():
    """The running PgServer (see tests/pg_server.py), or skip/fail with the reason."""
    from pg_server import PgServer, PgServerError

    server = PgServer()
    try:
        server.start()
    except (PgServerError, OSError) as e:
        message = f"no PostgreSQL server could be started for the tests: {e}"
        if _postgres_required():
            pytest.fail(message + " (CTXFOLD_REQUIRE_POSTGRES is set, so this fails instead of skipping)", pytrace=False)
        pytest.skip(message)
    try:
        yield server
    finally:
        server.stop()


def _new_database(server) -> str:
    name = f"ctxfold_test_{_os.getpid()}_{next(_pg_db_numbers)}"
    server.create_database(name)
    return name


@pytest.fixture(scope="session")
def pg_dsn(pg_server):
    """DSN (postgresql://...) of a fresh database shared by the whole session."""
    name = _new_database(pg_server)
    yield pg_server.dsn(name)
    pg_server.drop_database(name)


@pytest.fixture
def pg_fresh_dsn(pg_server):
    """DSN of a new, empty database for this one test (dropped afterwards, FORCE)."""
    name = _new_database(pg_server)
    yield pg_server.dsn(name)
    pg_server.drop_database(name)
