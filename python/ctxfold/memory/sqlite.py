"""`SqliteStore`: the embedded default backend (standard-library sqlite3).

Durability and concurrency choices:

- WAL journal with ``synchronous=FULL``: a write call returns only after its
  commit is in the WAL and fsynced, so neither a killed process (SIGKILL) nor
  a power cut loses it (``NORMAL`` would survive a killed process but may lose
  the last commits on power loss);
- every write call is one ``BEGIN IMMEDIATE`` transaction: it takes the write
  lock up front, so two writers never deadlock upgrading a read lock (the case
  in which SQLite returns "database is locked" without waiting);
- ``busy_timeout`` makes a writer wait for another's commit, and a busy error
  that still escapes is retried with backoff until ``timeout`` seconds passed;
- readers never block writers (WAL) and see the last committed state.

One connection per store, shared by its threads and its stores under a lock.
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ctxfold.errors import InvalidInputError, InvalidTypeError, StoreError
from ctxfold.memory.backend import Backend
from ctxfold.memory.memories import check_options
from ctxfold.memory.store import SqlStore
from ctxfold.memory.updates import MERGE_THRESHOLD, SUPERSEDE_THRESHOLD

__all__ = ["DEFAULT_FILENAME", "SqliteBackend", "SqliteStore"]

#: The file used when `SqliteStore` is given a directory.
DEFAULT_FILENAME = "ctxfold-memory.db"
#: Stores written before the package's rename sit beside it under the former
#: package name; their schema is the same, so one is opened in place rather than
#: a new, empty store started beside it.
FORMER_PATTERN = "ctx*-memory.db"


def _store_in(directory: Path) -> Path:
    """The store file `SqliteStore` opens when given a directory."""
    default = directory / DEFAULT_FILENAME
    if default.exists():
        return default
    former = sorted(p for p in directory.glob(FORMER_PATTERN) if p.is_file())
    if len(former) > 1:
        raise StoreError(
            f"cannot choose the memory store in {directory}: it holds no {DEFAULT_FILENAME} but "
            f"{len(former)} stores written under other names ({', '.join(p.name for p in former)}). "
            "Fix: pass the path of the file to open"
        )
    return former[0] if former else default


class SqliteStore(SqlStore):
    """A memory store in one SQLite file.

    ``SqliteStore(path)``: the file (created if missing; an existing directory
    gets ``ctxfold-memory.db`` inside it, or the store a release under the
    former name left there when only that one exists; ``":memory:"`` for a
    private in-memory store). ``embedder``: any object with ``embed(list[str])`` (the
    shared `StaticEmbedder` by default); ``merge_threshold``: the cosine from
    which an added memory that restates an existing one in other words merges
    into it (``None``: never merge; a higher value, e.g. ``0.98``, merges only
    closer rewordings); ``supersede_threshold``: the cosine from which an
    added memory that states an existing one with another value (negated,
    another number, version, date or name) replaces it, the old one archived
    as superseded (``None``: never); see `Memories.add`. ``add(...,
    merge=False)`` turns both off for one call;
    ``timeout``: seconds a write waits for another process's lock;
    ``matrix_cache_bytes``: memory for cached search matrices.

    Raises `StoreError` (naming the path and the fix) for a file that is not
    a SQLite database or is corrupt, a path that cannot be written, or a
    missing directory. Use as a context manager or call `close`.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        embedder: Any = None,
        merge_threshold: float | None = MERGE_THRESHOLD,
        supersede_threshold: float | None = SUPERSEDE_THRESHOLD,
        timeout: float = 30.0,
        matrix_cache_bytes: int = 1 << 30,
    ) -> None:
        check_options(merge_threshold, supersede_threshold, matrix_cache_bytes)
        self.backend: SqliteBackend = SqliteBackend(path, embedder=embedder, timeout=timeout)
        super().__init__(
            self.backend, merge_threshold=merge_threshold, supersede_threshold=supersede_threshold,
            matrix_cache_bytes=matrix_cache_bytes,
        )

    @property
    def path(self) -> Path | None:
        """The database file (None for ``":memory:"``)."""
        return self.backend.path

    def __repr__(self) -> str:
        return f"SqliteStore({self.location!r})"


class SqliteBackend(Backend):
    """One SQLite file's connection, shared by the stores over it (see `SqliteStore`)."""

    dialect = "sqlite"

    def __init__(self, path: str | os.PathLike[str], *, embedder: Any = None, timeout: float = 30.0) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise InvalidTypeError(f"path: expected a file path (str or os.PathLike), got {type(path).__name__}")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise InvalidInputError(f"timeout: must be a positive number of seconds, got {timeout!r}")
        super().__init__(embedder)
        self.timeout = float(timeout)
        self._lock = threading.RLock()
        if str(path) == ":memory:":
            self.path: Path | None = None
            self.location = ":memory:"
            target = ":memory:"
        else:
            self.path = Path(path)
            if self.path.is_dir():
                self.path = _store_in(self.path)
            self.location = str(self.path)
            target = str(self.path)
            if not self.path.parent.is_dir():
                raise StoreError(
                    f"cannot open the memory store {self.location}: the directory {self.path.parent} does not exist. "
                    "Fix: create the directory, or pass a path in an existing one"
                )
        try:
            self._conn = sqlite3.connect(target, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise self._error(e, "open") from e
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(self.timeout * 1000)}")
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if target != ":memory:" and str(mode).lower() != "wal":
                raise StoreError(
                    f"cannot switch the memory store {self.location} to WAL mode (journal_mode is {mode}). "
                    "Fix: put the store on a local file system that supports shared memory (not a network share)"
                )
            self._conn.execute("PRAGMA synchronous = FULL")
            self._conn.execute("PRAGMA foreign_keys = OFF")
            with self.transaction(True) as cur:
                self.migrate(cur)
        except sqlite3.Error as e:
            self._conn.close()
            raise self._error(e, "open") from e
        except BaseException:
            self._conn.close()
            raise

    def __repr__(self) -> str:
        return f"SqliteBackend({self.location!r})"

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            if not self.closed:
                self.closed = True
                self._conn.close()

    def writer_turn(self) -> contextlib.AbstractContextManager[Any]:
        """Writers of one SQLite file take turns (see `ctxfold.memory.gate`)."""
        if self.path is None:
            return contextlib.nullcontext()
        from ctxfold.memory.gate import writer_gate

        return writer_gate(self.path).held(self.timeout)

    @contextlib.contextmanager
    def transaction(self, write: bool) -> Iterator[sqlite3.Cursor]:
        with self._lock:
            cur = self._conn.cursor()
            try:
                self._begin(cur, "BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    yield cur
                except BaseException:
                    if self._conn.in_transaction:
                        self._conn.rollback()
                    raise
                self._retry(lambda: cur.execute("COMMIT"))
            except sqlite3.Error as e:
                if self._conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        self._conn.rollback()
                raise self._error(e, "write to" if write else "read") from e
            finally:
                cur.close()

    def _begin(self, cur: sqlite3.Cursor, statement: str) -> None:
        self._retry(lambda: cur.execute(statement))

    def _retry(self, action: Any) -> None:
        """Run ``action``, retrying "database is locked/busy" until ``timeout``."""
        deadline = time.monotonic() + self.timeout
        delay = 0.001
        while True:
            try:
                action()
                return
            except sqlite3.OperationalError as e:
                message = str(e).lower()
                if ("locked" not in message and "busy" not in message) or time.monotonic() > deadline:
                    raise
                time.sleep(delay * (1 + random.random()))
                delay = min(delay * 2, 0.1)

    def _error(self, e: sqlite3.Error, doing: str) -> StoreError:
        message = str(e)
        lower = message.lower()
        if isinstance(e, sqlite3.DatabaseError) and ("not a database" in lower or "malformed" in lower or "corrupt" in lower):
            return StoreError(
                f"cannot {doing} the memory store {self.location}: the file is not a SQLite database or is "
                f"corrupt ({message}). Fix: move the file away (or restore it from a backup) and pass a new path"
            )
        if "readonly" in lower or "read-only" in lower or "unable to open" in lower or "permission" in lower:
            return StoreError(
                f"cannot {doing} the memory store {self.location}: {message}. Fix: make the file and its directory "
                "writable by this process (SQLite also writes -wal and -shm files beside it), or pass a writable path"
            )
        if "locked" in lower or "busy" in lower:
            return StoreError(
                f"cannot {doing} the memory store {self.location}: still locked by another writer after "
                f"{self.timeout:g} s ({message}). Fix: raise timeout=, or shorten the other process's transactions"
            )
        if "full" in lower:
            return StoreError(
                f"cannot {doing} the memory store {self.location}: {message}. Fix: free space on its disk "
                "(SQLite also needs room for its -wal file), or move the store to a disk with room"
            )
        return StoreError(f"cannot {doing} the memory store {self.location}: {message}. Fix: check the file and the disk")
