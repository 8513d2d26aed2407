"""A small progress bar on stderr for calls that summarise many chunks.

Shown only when the stream is a terminal (never in logs, pipes, notebooks'
captured output or CI), only for more than `MIN_ITEMS` items, and never when
the caller passes ``progress=False`` or sets ``CTXFOLD_PROGRESS=0``. It is
thread-safe: worker threads call `update` as chunks finish.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from types import TracebackType
from typing import TextIO

__all__ = ["ProgressBar", "MIN_ITEMS", "DEFAULT_DELAY", "progress_wanted"]

#: Fewer items than this finish too fast for a bar to help.
MIN_ITEMS = 4
#: Seconds before the bar first appears: a call that ends sooner draws nothing.
DEFAULT_DELAY = 0.5
BAR_WIDTH = 24
# Redraw at most this often (seconds): a terminal write per chunk would cost more than a small chunk.
REDRAW_INTERVAL = 0.1


def progress_wanted(enabled: bool, total: int, stream: TextIO | None = None) -> bool:
    """Whether a bar should be drawn: asked for, enough items, a terminal,
    and not switched off by ``CTXFOLD_PROGRESS=0``."""
    if not enabled or total < MIN_ITEMS:
        return False
    if os.environ.get("CTXFOLD_PROGRESS", "").strip().lower() in ("0", "false", "no", "off"):
        return False
    stream = stream if stream is not None else sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):  # closed or replaced streams
        return False


class ProgressBar:
    """``with ProgressBar(total, "compress") as bar: ... bar.update()``.

    Draws ``label [#####.....] 3/8 chunks 0.4s`` on one line of ``stream``
    (stderr by default) when `progress_wanted` says so, and nothing otherwise;
    nothing either before ``delay`` seconds have passed, so quick calls stay
    silent. A drawn line is ended on exit so following output starts clean.
    """

    def __init__(
        self,
        total: int,
        label: str = "ctxfold",
        *,
        enabled: bool = True,
        unit: str = "chunks",
        stream: TextIO | None = None,
        delay: float | None = None,
    ) -> None:
        self.total = max(0, int(total))
        self.label = label
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.active = progress_wanted(enabled, self.total, self.stream)
        self.done = 0
        self._lock = threading.Lock()
        self._start = time.perf_counter()
        self._drawn = 0.0
        self.delay = max(0.0, float(DEFAULT_DELAY if delay is None else delay))
        self.drawn = False  # whether anything was written

    def __enter__(self) -> ProgressBar:
        if self.active and self.delay == 0:
            self._draw(force=True)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.active and self.drawn:
            with self._lock:
                self._draw(force=True)
                self._write("\n")

    def update(self, n: int = 1) -> None:
        """Count ``n`` more items done."""
        with self._lock:
            self.done = min(self.total, self.done + n)
            if self.active:
                self._draw(force=self.done == self.total)

    def render(self) -> str:
        """The bar's current line (without the carriage return)."""
        filled = BAR_WIDTH * self.done // self.total if self.total else BAR_WIDTH
        elapsed = time.perf_counter() - self._start
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        return f"{self.label} [{bar}] {self.done}/{self.total} {self.unit} {elapsed:.1f}s"

    def _draw(self, force: bool = False) -> None:
        now = time.perf_counter()
        if now - self._start < self.delay and not self.drawn:
            return
        if not force and now - self._drawn < REDRAW_INTERVAL:
            return
        self._drawn = now
        self._write("\r" + self.render())

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
            self.drawn = True
        except (ValueError, OSError):  # the terminal went away: the work goes on without a bar
            self.active = False
