"""The `ctxfold` command, run in-process through `main(argv)` and once as a
real subprocess (`python -m ctxfold.cli`)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ctxfold.cli import main


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
