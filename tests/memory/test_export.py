"""Crash-safe YAML export and verified import (ctxfold.memory.export), on
SQLite and PostgreSQL: a round trip; SIGKILL during an export leaves the old
file or the new one; every cut-short or changed file is refused and nothing is
imported; a link at a target path is never written through; files are private."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import msgspec
import numpy as np
import pytest
import yaml
from ctxfold.errors import StoreError, InvalidTypeError
from ctxfold.memory import Memory, Scope, SqliteStore, export as export_module
from memory_stores import U1, U2, StoreOpener


POSIX = os.name == "posix"


def _three(store) -> list[str]:
    return store.memories.add_many(
        [
            Memory(category="fact", content="Berlin office opens at 9", tags=["office"]),
            Memory(
                category="fact", content="Ünïcødé: the café's Wi-Fi is 'guest' # not secret", metadata={"n": [1, 2]}
            ),
            Memory(category="fact", content="Deploys need two approvals\nand a green build", ttl=3600.0),
        ],
        scope=U1,
    )


def _export_three(store, tmp_path: Path) -> bytes:
    _three(store)
    (path,) = store.memories.export_yaml(tmp_path / "out", scope=U1)
    assert path.name == "facts.yaml"
    return path.read_bytes()


def _by_id(memories: list[Memory]) -> list[Memory]:
    return sorted(memories, key=lambda m: m.id)


def _import_refused(store, directory: Path, match: str = "facts.yaml") -> StoreError:
    with pytest.raises(StoreError, match=match) as info:
        store.memories.import_yaml(directory, scope=U2)
    assert "Fix:" in str(info.value) and "nothing was imported" in str(info.value)
    return info.value


def _can_symlink(tmp_path: Path) -> bool:
    try:
        (tmp_path / "probe-link").symlink_to(tmp_path / "probe-target")
    except (OSError, NotImplementedError):
        return False
    (tmp_path / "probe-link").unlink()
    return True


# --- SIGKILL during an export ------------------------------------------------------------
# A helper process that imports ctxfold once and forks one exporting child per
# request, so each kill costs a fork rather than an interpreter start.
_FORKER = r"""
import json, os, sys, traceback
from ctxfold.memory import PostgresStore, Scope, SqliteStore
import ctxfold.memory.export, msgspec.yaml, yaml

spec = json.loads(sys.argv[1])
print("ready", flush=True)
for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            if spec["backend"] == "sqlite":
                store = SqliteStore(spec["path"])
            else:
                store = PostgresStore(spec["dsn"], schema=spec["schema"])
            store.memories.export_yaml(spec["directory"], scope=Scope(user_id=line.strip()))
            store.close()
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stderr.flush()
        os._exit(code)
    print(pid, flush=True)
    sys.stdin.readline()  # reaped only after the kill: its pid cannot be reused before
    print(os.waitpid(pid, 0)[1], flush=True)
"""


# After the first sign of the export in the directory: from at once to after it is done.
_KILL_DELAYS = [0.0, 0.0, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.008, 0.012, 0.02, 0.0, 0.03]


def _snapshot(directory: Path) -> list[tuple[str, int, int, int]]:
    entries = []
    for entry in os.scandir(directory):
        try:
            s = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        entries.append((entry.name, s.st_ino, s.st_size, s.st_mtime_ns))
    return sorted(entries)


def _fill(store, user: str, seed: int) -> None:
    """Large records (a few MB in all), so that writing takes a while."""
    rng = np.random.default_rng(seed)
    words = np.array(["deploy", "Berlin", "office", "staging", "approval", "build", "queue", "cache", "9", "v2.1"])
    memories = [
        Memory(category=category, content=f"{user} {category} {i}: " + " ".join(rng.choice(words, 3500)))
        for category, n in (("fact", 60), ("decision", 20))
        for i in range(n)
    ]
    store.memories.add_many(memories, scope=Scope(user_id=user), embeddings=rng.standard_normal((len(memories), 256)))


def test_yaml_export_import_round_trip(store, tmp_path) -> None:
    now = time.time()
    memories = [
        Memory(category="fact", content="Berlin office opens at 9", tags=["office"], summary="opens 9"),
        Memory(category="decision", content="Use PostgreSQL for fleets", metadata={"by": "team", "n": [1, 2]}),
        Memory(category="learning", content="Batch inserts", confidence=0.75, ttl=3600.0),
        Memory(category="error", content="Timeout on staging", confidence=0.65, created_at=now - 10),
        Memory(category="preference", content="Short answers", confidence=0.5),
    ]
    ids = [store.add(m, scope=U1) for m in memories]
    store.memories.record_application(ids[2], scope=U1, success=True)
    paths = store.memories.export_yaml(tmp_path / "out", scope=U1)
    assert sorted(p.name for p in paths) == sorted(
        ["facts.yaml", "decisions.yaml", "learnings.yaml", "errors.yaml", "preferences.yaml"]
    )
    assert store.memories.import_yaml(tmp_path / "out", scope=U2) == ids
    assert store.memories.all(scope=U2) == store.memories.all(scope=U1)
    store.memories.export_yaml(tmp_path / "again", scope=U2)
    for p in paths:
        assert (tmp_path / "again" / p.name).read_bytes() == p.read_bytes()
    assert store.memories.import_yaml(tmp_path / "out", scope=U2) == ids  # idempotent
    assert store.memories.count(scope=U2) == 5


def test_format_is_readable_yaml_with_count_and_digest(store, tmp_path) -> None:
    data = _export_three(store, tmp_path)
    doc = yaml.safe_load(data.decode("utf-8"))
    assert (doc["format"], doc["version"], doc["category"], doc["count"]) == ("ctxfold-memories", 2, "fact", 3)
    body = data.split(b"\nrecords:\n", 1)[1]
    assert doc["sha256"] == hashlib.sha256(body).hexdigest()
    assert sorted(r["content"] for r in doc["records"]) == sorted(m.content for m in store.memories.all(scope=U1))
    assert sorted(store.memories.import_yaml(tmp_path / "out", scope=U2)) == sorted(m.id for m in store.memories.all(scope=U1))
    assert _by_id(store.memories.all(scope=U2)) == _by_id(store.memories.all(scope=U1))


def test_every_truncation_is_refused(store, tmp_path) -> None:
    data = _export_three(store, tmp_path)
    cut = tmp_path / "cut"
    cut.mkdir()
    target = cut / "facts.yaml"
    target.write_bytes(data)
    for n in reversed(range(len(data))):
        os.truncate(target, n)
        with pytest.raises(StoreError, match="facts.yaml") as info:
            store.memories.import_yaml(cut, scope=U2)
        assert "nothing was imported" in str(info.value), n
    assert store.memories.count(scope=U2) == 0
    target.write_bytes(data)
    assert len(store.memories.import_yaml(cut, scope=U2)) == 3


def test_every_changed_byte_is_refused(tmp_path) -> None:
    # Refused before the store is touched, so one backend is enough.
    store = SqliteStore(tmp_path / "memory.db")
    data = _export_three(store, tmp_path)
    changed = tmp_path / "changed"
    changed.mkdir()
    target = changed / "facts.yaml"
    target.write_bytes(data)
    with target.open("r+b") as f:
        for i in range(len(data)):
            f.seek(i)
            f.write(bytes([data[i] ^ 0x01]))
            f.flush()
            with pytest.raises(StoreError, match="facts.yaml"):
                store.memories.import_yaml(changed, scope=U2)
            f.seek(i)
            f.write(data[i : i + 1])
    assert target.read_bytes() == data
    assert store.memories.count(scope=U2) == 0
    store.close()


def test_changed_files_are_refused_with_the_reason(store, tmp_path) -> None:
    data = _export_three(store, tmp_path)
    head, body = data.split(b"\nrecords:\n", 1)
    d = tmp_path / "bad"
    d.mkdir()
    path = d / "facts.yaml"

    # one record removed, digest recomputed, count left at 3
    records = msgspec.yaml.decode(body)
    short = msgspec.yaml.encode(records[:2])
    path.write_bytes(head.replace(hashlib.sha256(body).hexdigest().encode(), hashlib.sha256(short).hexdigest().encode())
                     + b"\nrecords:\n" + short)
    assert "holds 2 records but its header says 3" in str(_import_refused(store, d))
    # the count changed, records intact
    path.write_bytes(data.replace(b"\ncount: 3\n", b"\ncount: 4\n"))
    assert "header says 4" in str(_import_refused(store, d))
    path.write_bytes(data.replace(b"\ncount: 3\n", b"\ncount: 03\n"))
    assert "header was changed" in str(_import_refused(store, d))
    # content edited, bytes appended
    path.write_bytes(data.replace(b"opens at 9", b"opens at 8"))
    assert "sha256" in str(_import_refused(store, d))
    path.write_bytes(data + b"- content: injected\n  category: fact\n")
    _import_refused(store, d)
    # line endings converted (git autocrlf)
    path.write_bytes(data.replace(b"\n", b"\r\n"))
    assert "CRLF" in str(_import_refused(store, d))
    # a newer format version
    path.write_bytes(data.replace(b"\nversion: 2\n", b"\nversion: 3\n"))
    assert "version 3" in str(_import_refused(store, d))
    # a facts file in another category's place
    path.unlink()
    (d / "decisions.yaml").write_bytes(data)
    assert "category 'fact'" in str(_import_refused(store, d, match="decisions.yaml"))
    assert store.memories.count(scope=U2) == 0


def test_import_is_all_or_nothing_across_files(store, tmp_path) -> None:
    store.memories.add_many([Memory(category="fact", content="f1"), Memory(category="decision", content="d1")], scope=U1)
    paths = store.memories.export_yaml(tmp_path / "out", scope=U1)
    assert sorted(p.name for p in paths) == ["decisions.yaml", "facts.yaml"]
    decisions = tmp_path / "out" / "decisions.yaml"
    decisions.write_bytes(decisions.read_bytes()[:-5])
    _import_refused(store, tmp_path / "out", match="decisions.yaml")
    assert store.memories.count(scope=U2) == 0


def test_previous_format_is_refused_unless_verify_is_off(store, tmp_path) -> None:
    _three(store)
    old = tmp_path / "old"
    old.mkdir()
    records = [msgspec.to_builtins(m) for m in store.memories.all(scope=U1)]
    for r in records:
        for name in ("score", "status", "archived_reason", "archived_at", "superseded_by"):
            r.pop(name)
    (old / "facts.yaml").write_bytes(msgspec.yaml.encode(records))  # how the previous version wrote it
    message = str(_import_refused(store, old))
    assert "no record count and digest" in message and "export_yaml" in message and "verify=False" in message
    assert store.memories.count(scope=U2) == 0
    assert len(store.memories.import_yaml(old, scope=U2, verify=False)) == 3
    assert _by_id(store.memories.all(scope=U2)) == _by_id(store.memories.all(scope=U1))


def test_verify_off_imports_an_edited_export(store, tmp_path) -> None:
    data = _export_three(store, tmp_path)
    (tmp_path / "out" / "facts.yaml").write_bytes(data.replace(b"opens at 9", b"opens at 8"))
    _import_refused(store, tmp_path / "out")
    store.memories.import_yaml(tmp_path / "out", scope=U2, verify=False)
    assert "Berlin office opens at 8" in [m.content for m in store.memories.all(scope=U2)]


def test_planted_symlink_is_not_followed(store, tmp_path) -> None:
    if not _can_symlink(tmp_path):
        pytest.skip("this platform or account cannot create symbolic links")
    store.memories.add_many([Memory(category="fact", content="f1"), Memory(category="decision", content="d1")], scope=U1)
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    (out / "facts.yaml").symlink_to(victim)
    with pytest.raises(StoreError, match="facts.yaml.*symbolic link.*Fix:"):
        store.memories.export_yaml(out, scope=U1)
    assert victim.read_bytes() == b"precious" and (out / "facts.yaml").is_symlink()
    assert sorted(p.name for p in out.iterdir()) == ["facts.yaml"]  # nothing written, no temporary left


def test_symlink_raced_in_after_the_check_is_replaced_not_followed(store, tmp_path, monkeypatch) -> None:
    if not _can_symlink(tmp_path):
        pytest.skip("this platform or account cannot create symbolic links")
    store.add(Memory(category="fact", content="f1"), scope=U1)
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    (out / "facts.yaml").symlink_to(victim)
    monkeypatch.setattr(export_module, "_check_target", lambda path: None)  # as if planted after the check
    store.memories.export_yaml(out, scope=U1)
    assert victim.read_bytes() == b"precious"
    assert not (out / "facts.yaml").is_symlink() and b"content: f1" in (out / "facts.yaml").read_bytes()


def test_planted_symlink_at_the_temporary_name_is_not_followed(store, tmp_path, monkeypatch) -> None:
    if not _can_symlink(tmp_path):
        pytest.skip("this platform or account cannot create symbolic links")
    store.add(Memory(category="fact", content="f1"), scope=U1)
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    monkeypatch.setattr(export_module.secrets, "token_hex", lambda n: "0" * (2 * n))
    (out / f".facts.yaml.{'0' * 16}.tmp").symlink_to(victim)
    with pytest.raises(StoreError, match="facts.yaml"):
        store.memories.export_yaml(out, scope=U1)
    assert victim.read_bytes() == b"precious" and not (out / "facts.yaml").exists()


def test_argument_types_are_checked(store, tmp_path) -> None:
    with pytest.raises(InvalidTypeError, match="directory.*Fix:"):
        store.memories.export_yaml(42, scope=U1)
    with pytest.raises(InvalidTypeError, match="directory.*Fix:"):
        store.memories.import_yaml(None, scope=U2)
    with pytest.raises(InvalidTypeError, match="verify.*Fix:"):
        store.memories.import_yaml(tmp_path, scope=U2, verify="no")


def test_non_regular_target_is_refused(store, tmp_path) -> None:
    store.add(Memory(category="fact", content="f1"), scope=U1)
    (tmp_path / "out" / "facts.yaml").mkdir(parents=True)
    with pytest.raises(StoreError, match="facts.yaml.*not a regular file"):
        store.memories.export_yaml(tmp_path / "out", scope=U1)


@pytest.mark.skipif(not POSIX, reason="POSIX permission bits")
def test_files_are_private(store, tmp_path) -> None:
    store.memories.add_many([Memory(category="fact", content="f1"), Memory(category="decision", content="d1")], scope=U1)
    out = tmp_path / "out"
    out.mkdir()
    (out / "facts.yaml").write_bytes(b"old")
    (out / "facts.yaml").chmod(0o644)
    for path in store.memories.export_yaml(out, scope=U1):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_failed_write_leaves_the_old_file_and_no_temporary(store, tmp_path, monkeypatch) -> None:
    data = _export_three(store, tmp_path)
    store.add(Memory(category="fact", content="a fourth fact"), scope=U1)

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(StoreError, match="facts.yaml.*No space left.*Fix:"):
        store.memories.export_yaml(tmp_path / "out", scope=U1)
    monkeypatch.undo()
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["facts.yaml"]
    assert (tmp_path / "out" / "facts.yaml").read_bytes() == data


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(signal, "SIGKILL"), reason="needs fork and SIGKILL")
def test_sigkill_during_export_leaves_old_or_new_file(opener: StoreOpener, tmp_path) -> None:
    store = opener()
    _fill(store, "a", 1)
    _fill(store, "b", 2)
    names = ("facts.yaml", "decisions.yaml")
    expected: dict[str, dict[str, bytes]] = {}
    for user in ("a", "b"):
        store.memories.export_yaml(tmp_path / user, scope=Scope(user_id=user))
        expected[user] = {name: (tmp_path / user / name).read_bytes() for name in names}
        # what the reference files hold is exactly the scope's records
        store.memories.import_yaml(tmp_path / user, scope=Scope(user_id="check-" + user))
        for category in ("fact", "decision"):
            got = store.memories.all(scope=Scope(user_id="check-" + user), category=category)
            want = store.memories.all(scope=Scope(user_id=user), category=category)
            assert sorted((m.id, m.content) for m in got) == sorted((m.id, m.content) for m in want)
    assert all(expected["a"][n] != expected["b"][n] for n in names)
    assert len(expected["a"]["facts.yaml"]) > 1_000_000

    out = tmp_path / "out"
    store.memories.export_yaml(out, scope=Scope(user_id="a"))
    state = {name: "a" for name in names}  # which export each file holds
    spec = {"backend": opener.backend, "directory": str(out)}
    spec.update({"path": opener.path} if opener.backend == "sqlite" else {"dsn": opener.dsn, "schema": opener.schema})
    errors = tmp_path / "forker.err"
    with errors.open("wb") as err:
        forker = subprocess.Popen(
            [sys.executable, "-c", _FORKER, json.dumps(spec)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, encoding="utf-8",
        )
    assert forker.stdin is not None and forker.stdout is not None
    killed = mid_write = 0
    try:
        assert forker.stdout.readline().strip() == "ready", errors.read_text(encoding="utf-8")
        for round_, delay in enumerate(_KILL_DELAYS):
            new = "b" if state["facts.yaml"] == "a" else "a"
            before = _snapshot(out)
            temporaries_before = {e[0] for e in before if e[0].endswith(".tmp")}
            forker.stdin.write(new + "\n")
            forker.stdin.flush()
            pid = int(forker.stdout.readline())
            deadline = time.monotonic() + 30
            while _snapshot(out) == before:
                assert time.monotonic() < deadline, errors.read_text(encoding="utf-8")
            if delay:
                time.sleep(delay)
            os.kill(pid, signal.SIGKILL)
            forker.stdin.write("reap\n")
            forker.stdin.flush()
            status = int(forker.stdout.readline())
            if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
                killed += 1
            else:
                assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, errors.read_text(encoding="utf-8")
            if {p.name for p in out.glob(".*.tmp")} - temporaries_before:
                mid_write += 1
            for name in names:
                data = (out / name).read_bytes()
                assert data in (expected[state[name]][name], expected[new][name]), (
                    f"round {round_} (kill {delay * 1000:.1f} ms after the export began): {name} is neither the "
                    f"old nor the new export ({len(data)} bytes)"
                )
                state[name] = "a" if data == expected["a"][name] else "b"
    finally:
        forker.stdin.close()
        forker.wait(timeout=30)
    assert killed >= 3, f"only {killed} of {len(_KILL_DELAYS)} exports were killed before they finished"
    # The directory, stray temporary files and all, imports to exactly what each file holds.
    check = Scope(user_id="check-out")
    store.memories.import_yaml(out, scope=check)
    for name, category in zip(names, ("fact", "decision")):
        want = store.memories.all(scope=Scope(user_id=state[name]), category=category)
        assert sorted(m.id for m in store.memories.all(scope=check, category=category)) == sorted(m.id for m in want)
    print(f"{opener.backend}: {killed} killed, {mid_write} while a temporary file was being written")
