"""The `ctxfold` command, run in-process through `main(argv)` and as a real
subprocess (`python -m ctxfold.cli`), with stderr on a pseudo-terminal where
progress is concerned."""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ctxfold.cli import main
from ctxfold.engine.config import STRATEGIES
from ctxfold.tokens import count_messages, get_tokenizer, message_costs


def conversation(tmp_path):
    msgs = [{"role": "system", "content": "Be brief."}]
    for i in range(30):
        msgs.append({"role": "user", "content": f"Tell me about topic {i}. " * 10})
        msgs.append({"role": "assistant", "content": f"Topic {i} is interesting. " * 10})
    path = tmp_path / "conv.json"
    path.write_text(json.dumps({"messages": msgs, "query": "topic 3"}), encoding="utf-8")
    return path, msgs


def test_fit_writes_messages_and_report(tmp_path, capsys) -> None:
    path, msgs = conversation(tmp_path)
    out, report = tmp_path / "fitted.json", tmp_path / "report.json"
    code = main(["fit", str(path), "--budget", "400", "--encoding", "cl100k_base", "--out", str(out), "--report", str(report)])
    assert code == 0
    fitted = json.loads(out.read_text(encoding="utf-8"))
    assert fitted[0] == msgs[0]
    data = json.loads(report.read_text(encoding="utf-8"))
    assert data["report"]["tokens_out"] <= 400 and len(data["items"]) == len(msgs)
    assert "strategy" in capsys.readouterr().err


def test_analyze_and_count(tmp_path, capsys) -> None:
    path, _ = conversation(tmp_path)
    assert main(["analyze", str(path), "--budget", "500", "--model", "gpt-4o"]) == 0
    out = capsys.readouterr().out
    assert "by role" in out and "user" in out and "fit to 500" in out
    text = tmp_path / "a.txt"
    text.write_text("hello world", encoding="utf-8")
    assert main(["count", str(text), str(path), "--encoding", "cl100k_base"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[0] == "2" and lines[-1].endswith("total")


@pytest.mark.parametrize(
    "argv",
    [
        ["fit", "missing.json", "--budget", "10"],
        ["count", "missing.txt"],
        ["fit", "{bad}", "--budget", "100"],
        ["analyze", "{conv}", "--model", "not-a-model"],
        ["fit", "{conv}", "--budget", "2"],
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, argv) -> None:
    path, _ = conversation(tmp_path)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    argv = [a.replace("{conv}", str(path)).replace("{bad}", str(bad)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ctxfold ") and "\n" not in err


def test_help_on_every_subcommand() -> None:
    for sub in ("fit", "analyze", "count"):
        done = subprocess.run([sys.executable, "-m", "ctxfold.cli", sub, "--help"], capture_output=True, text=True)
        assert done.returncode == 0 and "usage: ctxfold" in done.stdout


def test_version(capsys) -> None:
    expected = f"ctxfold {importlib.metadata.version('ctxfold')}"
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.strip() == expected
    done = subprocess.run([sys.executable, "-m", "ctxfold.cli", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == expected


@pytest.mark.parametrize("strategy", ["windowed", "compacted", "multi_level"])
def test_fit_strategy_reaches_the_engine(tmp_path, capsys, strategy) -> None:
    path, _ = conversation(tmp_path)
    out, report = tmp_path / "fitted.json", tmp_path / "report.json"
    argv = ["fit", str(path), "--budget", "400", "--encoding", "cl100k_base", "--strategy", strategy]
    assert main([*argv, "--out", str(out), "--report", str(report)]) == 0
    assert json.loads(report.read_text(encoding="utf-8"))["report"]["strategy"] == strategy
    assert f"strategy {strategy}" in capsys.readouterr().err


def test_strategy_choices_are_the_engines(tmp_path, capsys) -> None:
    path, _ = conversation(tmp_path)
    with pytest.raises(SystemExit) as info:
        main(["fit", str(path), "--budget", "400", "--strategy", "bogus"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert all(s in err for s in STRATEGIES)


def _one_line_error(capsys, path) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"ctxfold fit: {path}: cannot write (") and err.endswith(")"), err
    assert "\n" not in err and "Traceback" not in err
    return err


@pytest.mark.parametrize("option", ["--out", "--report"])
def test_unwritable_output_is_one_line_exit_2(tmp_path, capsys, option) -> None:
    path, _ = conversation(tmp_path)
    base = ["fit", str(path), "--budget", "400", "--encoding", "cl100k_base"]
    missing = tmp_path / "no" / "such" / "dir" / "out.json"
    assert main([*base, option, str(missing)]) == 2
    assert "no such directory" in _one_line_error(capsys, missing)
    assert main([*base, option, str(tmp_path)]) == 2
    assert "is a directory" in _one_line_error(capsys, tmp_path)
    assert not (tmp_path / "no").exists()


def test_write_refused_by_the_system_is_one_line_exit_2(tmp_path, capsys, monkeypatch) -> None:
    path, _ = conversation(tmp_path)
    out = tmp_path / "out.json"

    def refuse(self, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "write_text", refuse)
    assert main(["fit", str(path), "--budget", "400", "--encoding", "cl100k_base", "--out", str(out)]) == 2
    assert "permission denied" in _one_line_error(capsys, out)


@pytest.mark.skipif(
    sys.platform == "win32" or os.geteuid() == 0, reason="needs POSIX permissions and a non-root user"
)
def test_read_only_directory_is_one_line_exit_2(tmp_path, capsys) -> None:
    path, _ = conversation(tmp_path)
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        out = locked / "out.json"
        assert main(["fit", str(path), "--budget", "400", "--encoding", "cl100k_base", "--out", str(out)]) == 2
        assert "permission denied" in _one_line_error(capsys, out)
    finally:
        locked.chmod(0o700)


def test_unwritable_output_in_a_real_process_has_no_traceback(tmp_path) -> None:
    path, _ = conversation(tmp_path)
    out = tmp_path / "missing" / "out.json"
    done = subprocess.run(
        [sys.executable, "-m", "ctxfold.cli", "fit", str(path), "--budget", "400", "--out", str(out)],
        capture_output=True, text=True,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [f"ctxfold fit: {out}: cannot write (no such directory: {out.parent})"]


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def no_delay(monkeypatch):
    """Progress drawn from the first moment, so a quick test run shows it."""
    monkeypatch.delenv("CTXFOLD_PROGRESS", raising=False)
    monkeypatch.setattr("ctxfold.progress.DEFAULT_DELAY", 0.0)


def test_fit_spinner_on_a_terminal_stderr_only(tmp_path, capsys, monkeypatch, no_delay) -> None:
    path, _ = conversation(tmp_path)
    term = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main(["fit", str(path), "--budget", "400", "--encoding", "cl100k_base"]) == 0
    err = term.getvalue()
    assert err.startswith("\rctxfold fit | fitting 61 messages to 400 tokens")
    # The spinner line is blanked out before the report, which starts on a clean line.
    assert re.search(r"s\r +\rstrategy optimal:", err)
    out = capsys.readouterr().out
    assert "\r" not in out and "ctxfold fit" not in out
    assert json.loads(out)[0]["role"] == "system"


@pytest.mark.parametrize("command", ["fit", "analyze"])
def test_no_progress_off_a_terminal_or_when_switched_off(tmp_path, monkeypatch, no_delay, command) -> None:
    path, _ = conversation(tmp_path)
    argv = [command, str(path), "--budget", "400", "--encoding", "cl100k_base"]
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stderr", pipe)
    assert main(argv) == 0
    assert "\r" not in pipe.getvalue() and "fitting" not in pipe.getvalue()
    term = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setenv("CTXFOLD_PROGRESS", "0")
    assert main(argv) == 0
    assert "\r" not in term.getvalue() and "fitting" not in term.getvalue()


def test_count_bar_per_file_then_rows(tmp_path, capsys, monkeypatch, no_delay) -> None:
    files = []
    for i in range(6):
        f = tmp_path / f"f{i}.txt"
        f.write_text("hello world " * (i + 1), encoding="utf-8")
        files.append(str(f))
    term = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main(["count", *files, "--encoding", "cl100k_base"]) == 0
    err = term.getvalue()
    assert "\rctxfold count [" in err and "6/6 files" in err and err.endswith("\n")
    rows = capsys.readouterr().out.splitlines()
    assert [r.split()[1] for r in rows] == [*files, "total"]
    tokenizer = get_tokenizer(encoding="cl100k_base")
    sizes = [int(tokenizer.count(Path(f).read_text(encoding="utf-8"))) for f in files]
    assert [int(r.split()[0]) for r in rows] == [*sizes, sum(sizes)]


PTY_SCRIPT = textwrap.dedent(
    """
    import sys
    import ctxfold.progress
    ctxfold.progress.DEFAULT_DELAY = 0.0
    from ctxfold.cli import main
    sys.exit(main(sys.argv[1:]))
    """
)


def _run_with_stderr_on(stderr, argv, out_file, env):
    return subprocess.Popen(
        [sys.executable, "-c", PTY_SCRIPT, *argv], stdout=out_file, stderr=stderr, env=env
    )


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_progress_on_a_real_terminal_and_not_on_a_pipe(tmp_path) -> None:
    import pty

    path, _ = conversation(tmp_path)
    argv = ["fit", str(path), "--budget", "400", "--encoding", "cl100k_base"]
    env = {k: v for k, v in os.environ.items() if k != "CTXFOLD_PROGRESS"}
    master, slave = pty.openpty()
    with open(tmp_path / "stdout.json", "wb") as out:
        proc = _run_with_stderr_on(slave, argv, out, env)
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # the terminal closes when the process ends
                break
            if not chunk:
                break
            seen += chunk
        assert proc.wait(timeout=120) == 0
    os.close(master)
    assert b"ctxfold fit | fitting 61 messages" in seen and b"strategy optimal" in seen
    stdout = (tmp_path / "stdout.json").read_text(encoding="utf-8")
    assert "ctxfold fit" not in stdout and json.loads(stdout)[0]["role"] == "system"
    with open(tmp_path / "stdout2.json", "wb") as out:
        proc = _run_with_stderr_on(subprocess.PIPE, argv, out, env)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and b"strategy optimal" in err
    assert b"\r" not in err and b"fitting" not in err


def tool_conversation(tmp_path):
    """A long tool output early on (not among the protected last turns), then chat."""
    listing = "\n".join(f"file_{i}.txt size {i * 37} bytes" for i in range(600))
    msgs = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "List the files please."},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": listing},
        {"role": "assistant", "content": "file_599.txt is the biggest."},
    ]
    for i in range(6):
        msgs.append({"role": ("user", "assistant")[i % 2], "content": f"Follow-up number {i} about files. " * 5})
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(msgs), encoding="utf-8")
    return path, msgs


def _table(out: str, title: str) -> dict[str, list[str]]:
    """The rows under a heading of `analyze`: first word -> the other columns."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows = {}
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        name, *cells = line.split()
        rows[name] = cells
    return rows


def test_analyze_shows_original_sizes(tmp_path, capsys) -> None:
    path, msgs = tool_conversation(tmp_path)
    costs = message_costs(msgs, get_tokenizer(encoding="cl100k_base"))
    tool_tokens, whole = costs[3], sum(costs)
    budget = 900
    assert tool_tokens > 3 * budget  # the fit has to cut or drop the tool output
    assert main(["analyze", str(path), "--budget", str(budget), "--encoding", "cl100k_base"]) == 0
    out = capsys.readouterr().out
    total = count_messages(msgs, encoding="cl100k_base")
    assert out.splitlines()[0] == f"{len(msgs)} messages, {total} tokens (cl100k_base)"
    roles, kinds = _table(out, "by role"), _table(out, "by kind")
    assert roles["tool"][:2] == ["1", str(tool_tokens)]
    assert roles["tool"][2] == f"{100 * tool_tokens / whole:.1f}%"
    assert sum(int(cells[1]) for cells in roles.values()) == whole
    assert kinds["tool_result"][:2] == ["1", str(tool_tokens)]
    assert sum(int(cells[1]) for cells in kinds.values()) == whole
    fit = _table(out, f"fit to {budget}")
    del fit["status"]
    # Every message is in one status row, at its original size; what the fit made of it is the last column.
    assert sum(int(cells[0]) for cells in fit.values()) == len(msgs)
    assert sum(int(cells[1]) for cells in fit.values()) == whole
    assert sum(int(cells[3]) for cells in fit.values()) < budget
    tool_row = next(cells for cells in fit.values() if int(cells[1]) >= tool_tokens)
    assert int(tool_row[3]) < tool_tokens
    assert len(out.splitlines()) < 40


def test_count_names_the_file_it_cannot_read(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("[{not json", encoding="utf-8")
    binary = tmp_path / "blob.txt"
    binary.write_bytes(b"\xff\xfe\x00bad")
    for path in (bad, binary):
        assert main(["count", str(path)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"ctxfold count: {path}: not") and "\n" not in err
