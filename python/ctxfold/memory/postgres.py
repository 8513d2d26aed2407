"""`PostgresStore`: one memory shared by many agents on many machines.

psycopg 3 with a `psycopg_pool.ConnectionPool` (the ``postgres`` extra,
imported only when a `PostgresStore` is created). The schema and semantics are
`SqliteStore`'s: the same tables (``BYTEA`` embeddings), one transaction per
write call, a per-scope generation that invalidates other processes' cached
search matrices. ``schema=`` keeps the tables in their own PostgreSQL schema
(created if missing), e.g. one per tenant or per test.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

from ctxfold.errors import InvalidInputError, InvalidTypeError, StoreError
from ctxfold.memory.store import SqlStore

__all__ = ["PostgresStore", "mask_dsn"]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_MIGRATION_LOCK = 0x63747866  # pg_advisory_xact_lock key ("ctxf")


def mask_dsn(dsn: str) -> str:
    """``dsn`` with its password replaced by ``***`` (URL and key=value forms)."""
    masked = re.sub(r"(://[^:/?#@]*:)[^@/?#]*@", r"\1***@", dsn)
    masked = re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)", r"\1***", masked, flags=re.IGNORECASE)
    return masked


def _password(dsn: str) -> str | None:
    try:
        from psycopg.conninfo import conninfo_to_dict

        value = conninfo_to_dict(dsn).get("password")
        return str(value) if value else None
    except Exception:
        return None


class PostgresStore(SqlStore):
    """A memory store in a PostgreSQL database.

    ``PostgresStore("postgresql://user:password@host:5432/db")`` (any libpq
    DSN). ``schema``: a PostgreSQL schema for the tables (default: the
    connection's search_path, usually ``public``); ``min_size``/``max_size``:
    the connection pool; ``timeout``: seconds to connect or wait for a pooled
    connection; ``embedder``, ``merge_threshold``, ``matrix_cache_bytes``: as
    for `SqliteStore`.

    Raises `StoreError` naming the DSN (password masked) and the fix when the
    server cannot be reached or refuses the login, and `ImportError`-based
    `StoreError` when psycopg is not installed.
    """

    dialect = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        embedder: Any = None,
        merge_threshold: float | None = 0.95,
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = 10.0,
        matrix_cache_bytes: int = 1 << 30,
    ) -> None:
        if not isinstance(dsn, str):
            raise InvalidTypeError(f"dsn: expected a str (a libpq connection string or URL), got {type(dsn).__name__}")
        if schema is not None and (not isinstance(schema, str) or not _IDENTIFIER.match(schema)):
            raise InvalidInputError(f"schema: {schema!r} is not a plain SQL identifier (letters, digits, _; max 63)")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise InvalidInputError(f"timeout: must be a positive number of seconds, got {timeout!r}")
        self._setup(embedder, merge_threshold, matrix_cache_bytes)
        self.dsn = dsn
        self.location = mask_dsn(dsn)
        self.schema = schema
        self.timeout = float(timeout)
        self._secret = _password(dsn)
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError as e:
            raise StoreError(
                f"PostgresStore needs psycopg 3 and psycopg_pool ({e}). Fix: pip install 'ctxfold[postgres]'"
            ) from e
        self._psycopg = psycopg
        # Connect once directly: the pool would only report a timeout, this says why.
        try:
            with psycopg.connect(dsn, connect_timeout=max(1, round(self.timeout))) as conn:
                if schema is not None:
                    conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        except psycopg.Error as e:
            raise self._error(e, "connect to") from e

        def configure(conn: Any) -> None:
            if schema is not None:
                conn.execute(f'SET search_path TO "{schema}"')
                conn.commit()

        self._pool = ConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max(max_size, min_size),
            timeout=self.timeout,
            configure=configure,
            kwargs={"connect_timeout": max(1, round(self.timeout))},
            open=False,
        )
        try:
            self._pool.open(wait=True, timeout=self.timeout)
            with self._transaction(True) as cur:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                self._migrate(cur)
        except BaseException as e:
            self._pool.close()
            if isinstance(e, StoreError):
                raise
            if isinstance(e, Exception) and type(e).__name__ == "PoolTimeout":
                raise self._error(e, "connect to") from e
            raise

    def __repr__(self) -> str:
        return f"PostgresStore({self.location!r}, schema={self.schema!r})"

    def close(self) -> None:
        """Close the pool (idempotent)."""
        if not self._closed:
            self._closed = True
            self._pool.close()
            self._matrices.clear()

    @contextlib.contextmanager
    def _transaction(self, write: bool) -> Iterator[Any]:
        psycopg = self._psycopg
        try:
            with self._pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
                yield cur
        except psycopg.Error as e:
            raise self._error(e, "write to" if write else "read") from e
        except Exception as e:
            if type(e).__name__ == "PoolTimeout":
                raise self._error(e, "connect to") from e
            raise

    def _error(self, e: BaseException, doing: str) -> StoreError:
        message = str(e).strip()
        if self._secret:
            message = message.replace(self._secret, "***")
        if type(e).__name__ in ("OperationalError", "PoolTimeout"):
            fix = (
                "Fix: check that the server is running and reachable at that host and port, and the user, "
                "password and database name"
            )
        else:
            fix = "Fix: check the database's state and this user's privileges"
        return StoreError(f"cannot {doing} the PostgreSQL memory store {self.location}: {message}. {fix}")
