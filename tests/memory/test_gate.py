"""The SQLite writers' turnstile: processes and threads take turns, and no
writer blocks past its timeout."""

from __future__ import annotations

import threading
import time
from pathlib import Path


# --- the SQLite writers' turnstile -----------------------------------------------------------------------------
_HOLDER = r"""
import sys
from pathlib import Path
from ctxfold.memory.gate import writer_gate

with writer_gate(Path(sys.argv[1])).held(10):
    print("held", flush=True)
    sys.stdin.readline()
"""


def test_writer_gate_orders_processes_and_never_blocks_past_the_timeout(tmp_path: Path) -> None:
    import subprocess
    import sys

    from ctxfold.memory.gate import writer_gate

    database = tmp_path / "memory.db"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(database)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, encoding="utf-8")
    try:
        assert holder.stdout.readline().strip() == "held"  # type: ignore[union-attr]
        assert (tmp_path / "memory.db-writer").exists()
        gate = writer_gate(database)
        t0 = time.monotonic()
        with gate.held(0.3):  # held by the other process: waits the timeout, then goes on without it
            waited = time.monotonic() - t0
        assert waited >= 0.25
        released = threading.Timer(0.3, lambda: holder.communicate("\n", timeout=30))
        released.start()
        t0 = time.monotonic()
        with gate.held(30):  # taken as soon as the other process lets go
            waited = time.monotonic() - t0
        released.join()
        assert 0.2 <= waited < 5
    finally:
        if holder.poll() is None:
            holder.kill()


def test_writer_gate_threads_take_turns_and_a_missing_directory_is_no_gate(tmp_path: Path) -> None:
    from ctxfold.memory.gate import writer_gate

    gate = writer_gate(tmp_path / "memory.db")
    inside, overlaps = [0], []

    def work() -> None:
        for _ in range(50):
            with gate.held(30):
                inside[0] += 1
                overlaps.append(inside[0])
                with gate.held(30):  # the same thread again: no deadlock
                    time.sleep(0.0005)
                inside[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert max(overlaps) == 1 and len(overlaps) == 150
    t0 = time.monotonic()
    with writer_gate(tmp_path / "missing" / "memory.db").held(30):
        pass
    assert time.monotonic() - t0 < 1
