"""Benchmarks run only on request:

    python -m pytest benches --benchmark-enable

Each benchmark group holds ctxfold and its peer measured in the same run;
at the end a table gives, per group, how many times faster ctxfold is than
each peer (ratio of mean times), which is the figure the README quotes."""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

import pytest

SHARED_DATA = Path(os.environ.get("CTXFOLD_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data; skips the benchmark when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"evaluation data not found at {path} (set CTXFOLD_SHARED_DATA)")
    return path


def lme_turns(limit_files: int = 8) -> list[str]:
    """Chat turns of the first LongMemEval-S histories."""
    files = sorted(shared_data("conversations", "longmemeval_s").glob("*.json"))[:limit_files]
    turns: list[str] = []
    for f in files:
        data = json.loads(f.read_text(encoding="utf-8"))
        turns += [t["content"] for session in data["haystack_sessions"] for t in session]
    return turns


def chat_messages() -> list[str]:
    """The text of every message of LongMemEval-S, REALTALK and BEAM 100K, in
    file order (the corpus of rust/core/benches/count.rs)."""
    conversations = shared_data("conversations")
    messages: list[str] = []
    for f in sorted((conversations / "longmemeval_s").glob("*.json")):
        data = json.loads(f.read_text(encoding="utf-8"))
        messages += [t["content"] for session in data["haystack_sessions"] for t in session]
    for f in sorted((conversations / "realtalk").glob("*.json")):
        data = json.loads(f.read_text(encoding="utf-8"))
        sessions = [v for k, v in data.items() if k.startswith("session_") and isinstance(v, list)]
        messages += [t["clean_text"] for session in sessions for t in session]
    for chat in sorted(p for p in (conversations / "beam_100k").iterdir() if p.is_dir()):
        data = json.loads((chat / "chat.json").read_text(encoding="utf-8"))
        messages += [m["content"] for batch in data for turn in batch["turns"] for m in turn]
    return messages


def realtalk_messages() -> list[str]:
    """REALTALK's messages: short texts between two people."""
    messages: list[str] = []
    for f in sorted(shared_data("conversations", "realtalk").glob("*.json")):
        data = json.loads(f.read_text(encoding="utf-8"))
        sessions = [v for k, v in data.items() if k.startswith("session_") and isinstance(v, list)]
        messages += [t["clean_text"] for session in sessions for t in session]
    return messages


def pytest_terminal_summary(terminalreporter, config) -> None:
    session = getattr(config, "_benchmarksession", None)
    if session is None or session.disabled or not session.benchmarks:
        return
    groups: dict[str, dict[str, float]] = {}
    for bench in session.benchmarks:
        if bench.stats is None:
            continue
        groups.setdefault(bench.group or bench.name, {})[bench.name.split("[")[0]] = bench.stats.mean
    write = terminalreporter.write_line
    write("")
    write(f"ctxfold speed ratios on {platform.machine()} {os.cpu_count()} cores, {platform.python_version()}:")
    for group, means in sorted(groups.items()):
        ours = {k: v for k, v in means.items() if "ctxfold" in k}
        peers = {k: v for k, v in means.items() if "ctxfold" not in k}
        for our_name, our_mean in ours.items():
            text = ", ".join(f"{peer_mean / our_mean:.2f}x vs {peer}" for peer, peer_mean in peers.items())
            write(f"  {group}: {our_name} mean {our_mean * 1e3:.3f} ms" + (f"; {text}" if text else ""))
