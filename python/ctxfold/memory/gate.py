"""A turnstile for the writers of one SQLite file, across processes.

A SQLite writer that finds the database locked sleeps and tries again,
backing off to 100 ms between tries; meanwhile a writer whose transaction
just committed takes the lock again at once, so with several busy writer
processes one of them can wait for seconds while the others write. Before
its write transaction a store takes `WriterGate`: an exclusive lock on a
small file beside the database (``<database>-writer``, ``flock`` on POSIX,
``msvcrt.locking`` on Windows), tried every millisecond or so. A waiting
writer then notices a release within about a millisecond, and finds SQLite's
own lock free when it begins.

The gate only orders writers; SQLite's locking still guarantees correctness.
So a process that cannot open the gate file (a read-only directory) writes
without it, and a writer that has waited ``timeout`` seconds for the gate
goes on to SQLite's lock (which raises if it is still held).
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["WriterGate", "writer_gate"]

_gates: dict[str, WriterGate] = {}
_gates_lock = threading.Lock()
#: Seconds between tries for a held gate (with jitter).
POLL = 0.001


class WriterGate:
    """An exclusive lock shared by the threads and processes writing one database file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._reset()

    def _reset(self) -> None:
        self._pid = os.getpid()
        # The file lock belongs to the process: its threads take turns on this one first.
        self._threads = threading.RLock()
        self._depth = 0

    @contextlib.contextmanager
    def held(self, timeout: float) -> Iterator[None]:
        """Hold the gate (waiting up to ``timeout`` seconds; then go on without it)."""
        if self._pid != os.getpid():  # a forked child: a thread of the parent may have held the lock
            self._reset()
        deadline = time.monotonic() + timeout
        if not self._threads.acquire(timeout=max(timeout, 0.0)):
            yield
            return
        try:
            fd = self._lock(deadline) if self._depth == 0 else None
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if fd is not None:
                    with contextlib.suppress(OSError):
                        _unlock(fd)
                    os.close(fd)
        finally:
            self._threads.release()

    def _lock(self, deadline: float) -> int | None:
        """The gate file's handle, locked; None when it cannot be opened or
        locked, or not before ``deadline``. (Opened for each turn and closed
        after: an open handle would keep the directory from being removed on
        Windows.)"""
        try:
            flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOINHERIT", 0)
            fd = os.open(self.path, flags, 0o600)
        except OSError:
            return None
        try:
            while not _try_lock(fd):
                if time.monotonic() >= deadline:
                    break
                time.sleep(POLL * (0.5 + random.random()))
            else:
                return fd
        except OSError:
            pass
        os.close(fd)
        return None


def writer_gate(database: Path) -> WriterGate:
    """The gate of a database file (one per file in a process)."""
    gate_path = database.with_name(database.name + "-writer")
    key = os.path.normcase(os.path.abspath(gate_path))
    with _gates_lock:
        gate = _gates.get(key)
        if gate is None:
            gate = _gates[key] = WriterGate(gate_path)
        return gate


if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
    import msvcrt

    def _try_lock(fd: int) -> bool:
        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except PermissionError:
            return False
        except OSError as e:
            if e.errno in (13, 36):  # EACCES / EDEADLOCK: held by another process
                return False
            raise
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
