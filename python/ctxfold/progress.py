"""A small progress bar on stderr for calls that summarise many chunks, and
a spinner for one long call whose steps cannot be counted from outside.

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

__all__ = ["ProgressBar", "Spinner", "MIN_ITEMS", "DEFAULT_DELAY", "progress_wanted"]

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
    return _terminal(stream if stream is not None else sys.stderr)


def _terminal(stream: TextIO) -> bool:
    """Whether `stream` is a terminal and ``CTXFOLD_PROGRESS`` does not switch progress off."""
    if os.environ.get("CTXFOLD_PROGRESS", "").strip().lower() in ("0", "false", "no", "off"):
        return False
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


class Spinner:
    """``with Spinner("fit", "1200 messages"): long_call()``.

    For one call that reports no steps: a background thread draws
    ``label | detail 2.3s`` on one line of ``stream`` (stderr by default),
    turning and counting seconds until the block ends, then erases the line
    so following output starts clean. Drawn only on a terminal, not when
    ``enabled`` is false or ``CTXFOLD_PROGRESS=0``, and not before ``delay``
    seconds, so quick calls stay silent.
    """

    # ASCII frames: legacy Windows consoles lack the braille and block glyphs.
    FRAMES = "|/-\\"

    def __init__(
        self,
        label: str = "ctxfold",
        detail: str = "",
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
        delay: float | None = None,
    ) -> None:
        self.label = label
        self.detail = detail
        self.stream = stream if stream is not None else sys.stderr
        self.active = enabled and _terminal(self.stream)
        self.delay = max(0.0, float(DEFAULT_DELAY if delay is None else delay))
        self.drawn = False  # whether anything was written
        self._width = 0
        self._frame = 0
        self._start = time.perf_counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Spinner:
        self._start = time.perf_counter()
        if self.active:
            self._thread = threading.Thread(target=self._run, name="ctxfold-spinner", daemon=True)
            self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self.drawn and self.active:
            self._write("\r" + " " * self._width + "\r")

    def render(self) -> str:
        """The spinner's current line (without the carriage return)."""
        elapsed = time.perf_counter() - self._start
        frame = self.FRAMES[self._frame % len(self.FRAMES)]
        detail = f" {self.detail}" if self.detail else ""
        return f"{self.label} {frame}{detail} {elapsed:.1f}s"

    def _run(self) -> None:
        if self._stop.wait(self.delay):
            return
        while self.active:
            line = self.render()
            self._width = max(self._width, len(line))
            self._write("\r" + line)
            self._frame += 1
            if self._stop.wait(REDRAW_INTERVAL):
                return

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
            self.drawn = True
        except (ValueError, OSError):  # the terminal went away: the work goes on without a spinner
            self.active = False
