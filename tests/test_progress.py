"""The progress bar and spinner on their own: when they draw, what they
draw, and that a closed stream never stops the work."""

from __future__ import annotations

import io
import time

import pytest

from ctxfold.progress import BAR_WIDTH, MIN_ITEMS, ProgressBar, Spinner, progress_wanted


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class ClosedTerminal(Terminal):
    def write(self, text: str) -> int:
        raise ValueError("I/O operation on closed file")


@pytest.fixture(autouse=True)
def progress_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTXFOLD_PROGRESS", raising=False)


def test_drawn_only_when_asked_for_enough_items_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    assert progress_wanted(True, MIN_ITEMS, Terminal())
    assert not progress_wanted(True, MIN_ITEMS - 1, Terminal())
    assert not progress_wanted(False, 100, Terminal())
    assert not progress_wanted(True, 100, io.StringIO())
    for off in ("0", "false", " OFF "):
        monkeypatch.setenv("CTXFOLD_PROGRESS", off)
        assert not progress_wanted(True, 100, Terminal())


def test_the_bar_counts_up_and_ends_its_line() -> None:
    term = Terminal()
    with ProgressBar(8, "compress", stream=term, delay=0) as bar:
        for _ in range(8):
            bar.update()
    lines = term.getvalue().split("\r")
    assert lines[1].startswith(f"compress [{'.' * BAR_WIDTH}] 0/8 chunks")
    assert lines[-1].startswith(f"compress [{'#' * BAR_WIDTH}] 8/8 chunks") and lines[-1].endswith("s\n")
    bar.update(5)
    assert bar.done == 8  # never past the total


def test_half_done_is_half_a_bar_and_nothing_is_drawn_before_the_delay() -> None:
    bar = ProgressBar(10, "x", unit="texts", stream=Terminal(), delay=60)
    with bar:
        bar.update(5)
    assert bar.render().startswith(f"x [{'#' * (BAR_WIDTH // 2)}{'.' * (BAR_WIDTH // 2)}] 5/10 texts")
    assert not bar.drawn and bar.stream.getvalue() == ""


def test_off_a_terminal_nothing_is_written() -> None:
    pipe = io.StringIO()
    with ProgressBar(10, stream=pipe, delay=0) as bar:
        bar.update(10)
    assert pipe.getvalue() == "" and not bar.active


def test_a_closed_stream_switches_the_bar_off_and_the_work_goes_on() -> None:
    with ProgressBar(10, stream=ClosedTerminal(), delay=0) as bar:
        bar.update(3)
    assert not bar.active and bar.done == 3


def test_the_spinner_draws_then_erases_its_line() -> None:
    term = Terminal()
    with Spinner("fit", "61 messages", stream=term, delay=0):
        time.sleep(0.25)
    out = term.getvalue()
    assert out.startswith("\rfit | 61 messages 0.")
    assert out.endswith("\r") and out.rstrip("\r").split("\r")[-1].strip() == ""
    pipe = io.StringIO()
    with Spinner(stream=pipe, delay=0):
        time.sleep(0.05)
    assert pipe.getvalue() == ""
