"""`SqliteStore`'s files: a store under the former name is opened, and
non-SQLite, corrupt, read-only and unreachable paths each raise `StoreError`
naming the path and the fix."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from ctxfold.errors import StoreError
from ctxfold.memory import Memory, Scope, SqliteStore
from memory_stores import U1, assert_names_fix


CHILD_DIM = 32  # embeddings the tests pass themselves (the children, the dimension checks)


# --------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------
def open_and_use(path: str) -> None:
    """Open a store at ``path`` and read and write it: whatever is wrong must surface."""
    with SqliteStore(path) as store:
        scope = Scope(user_id="u")
        store.memories.count(scope=scope)
        store.search("anything", scope=scope, k=3)
        store.add(Memory(content="a memory"), scope=scope)


def _filled_store(path: Path) -> None:
    rng = np.random.default_rng(0)
    with SqliteStore(path) as store:
        store.memories.add_many(
            [Memory(content=f"memory number {i} " + "x" * 300) for i in range(200)],
            scope=Scope(user_id="u"),
            embeddings=rng.standard_normal((200, CHILD_DIM)),
        )


def _make_immutable(path: Path) -> None:
    """Read-only even for root: the immutable attribute (chattr +i)."""
    chattr = shutil.which("chattr")
    if chattr is None:
        pytest.skip("running as root, and chattr (to make a path read-only for root) is not installed")
    r = subprocess.run([chattr, "+i", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"running as root, and chattr +i is refused here ({r.stderr.strip()}): no read-only path to test")


def _undo_immutable(path: Path) -> None:
    chattr = shutil.which("chattr")
    if chattr and path.exists():
        subprocess.run([chattr, "-i", str(path)], capture_output=True)


def test_a_store_written_under_the_former_name_is_read(tmp_path) -> None:
    # Releases before the rename wrote the same schema to ctxengine-memory.db.
    with SqliteStore(tmp_path / "written.db") as s:
        mid = s.add(Memory(category="fact", content="The staging database is on port 5433"), scope=U1)
    (tmp_path / "written.db").rename(tmp_path / "ctxengine-memory.db")
    with SqliteStore(tmp_path) as s:
        assert Path(s.location).name == "ctxengine-memory.db"
        got = s.get(mid, scope=U1)
        assert got is not None and got.content == "The staging database is on port 5433"
        assert [h.id for h in s.search("which port is staging on", scope=U1, k=1)] == [mid]
        s.add(Memory(content="written after the rename"), scope=U1)
    assert not (tmp_path / "ctxfold-memory.db").exists()  # opened in place, never copied aside
    with SqliteStore(tmp_path / "ctxfold-memory.db") as fresh:  # once the new file exists, it is the one used
        fresh.add(Memory(content="new file"), scope=U1)
    with SqliteStore(tmp_path) as s:
        assert Path(s.location).name == "ctxfold-memory.db" and s.memories.count(scope=U1) == 1


def test_a_directory_with_two_former_stores_is_not_guessed(tmp_path) -> None:
    for name in ("ctxengine-memory.db", "ctxother-memory.db"):
        with SqliteStore(tmp_path / name) as s:
            s.add(Memory(content=name), scope=U1)
    with pytest.raises(StoreError, match="pass the path of the file to open"):
        SqliteStore(tmp_path)
    assert not (tmp_path / "ctxfold-memory.db").exists()


# --- bad input (SQLite files, PostgreSQL DSNs) --------------------------------------------
def test_sqlite_bad_files(tmp_path) -> None:
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StoreError, match="not a SQLite database") as e:
        SqliteStore(junk)
    assert str(junk) in str(e.value) and "Fix" in str(e.value)
    with pytest.raises(StoreError, match="does not exist"):
        SqliteStore(tmp_path / "missing" / "a.db")
    with pytest.raises(TypeError):
        SqliteStore(42)  # type: ignore[arg-type]


def test_sqlite_read_only_file(tmp_path) -> None:
    path = tmp_path / "ro.db"
    SqliteStore(path).close()
    uri_store = SqliteStore(path)
    uri_store.close()
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        pytest.skip("root ignores file permissions")
    os.chmod(path, 0o444)
    os.chmod(tmp_path, 0o555)
    try:
        with pytest.raises(StoreError, match="writable"):
            s = SqliteStore(path)
            s.add(Memory(content="x"), scope=U1)
    finally:
        os.chmod(tmp_path, 0o755)
        os.chmod(path, 0o644)


@pytest.mark.parametrize(
    "content",
    [b"this is a text file, not a database\n" * 200, bytes(random.Random(7).randrange(256) for _ in range(8192))],
    ids=["text", "random-bytes"],
)
def test_non_sqlite_file(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "agent.db"
    path.write_bytes(content)
    with pytest.raises(StoreError) as info:
        open_and_use(str(path))
    assert str(path) in str(info.value)
    assert_names_fix(str(info.value))
    assert path.read_bytes() == content, "the store wrote into a file that is not its own"


@pytest.mark.parametrize("damage", ["schema-page", "truncated", "zeroed-header"])
def test_corrupt_sqlite_file(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "agent.db"
    _filled_store(path)
    data = bytearray(path.read_bytes())
    assert data.startswith(b"SQLite format 3\x00") and len(data) > 16384
    if damage == "schema-page":  # the b-tree of page 1 (sqlite_schema) after the 100-byte header
        data[100:4096] = random.Random(1).randbytes(3996)
    elif damage == "truncated":  # the header still claims every page
        data = data[: len(data) // 3]
    else:
        data[:100] = bytes(100)
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError) as info:
        open_and_use(str(path))
    assert str(path) in str(info.value)
    assert_names_fix(str(info.value))


@pytest.mark.parametrize("what", ["directory", "existing-file"])
def test_read_only_path(tmp_path: Path, what: str) -> None:
    """A path the process cannot write. chmod does not stop root, so as root the path
    is made immutable (chattr +i: no process may write it or create files in it, root
    included); as another user it is chmod 0o555 / 0o444. Either way the OS refuses
    the write, as on a read-only mount or a file owned by someone else."""
    directory = tmp_path / "ro"
    directory.mkdir()
    path = directory / "agent.db"
    if what == "existing-file":
        _filled_store(path)
        for extra in directory.iterdir():
            if extra != path:
                extra.unlink()  # the -shm a clean close may leave
        target, mode = path, 0o444
    else:
        target, mode = directory, 0o555
    try:
        if os.geteuid() == 0:
            _make_immutable(target)
        else:
            target.chmod(mode)
            if what == "existing-file":
                directory.chmod(0o555)
        with pytest.raises(StoreError) as info:
            open_and_use(str(path))
    finally:
        _undo_immutable(target)
        directory.chmod(0o755)
        if path.exists():
            path.chmod(0o644)
    assert str(path) in str(info.value)
    assert_names_fix(str(info.value))


def test_path_whose_parent_is_a_file(tmp_path: Path) -> None:
    """A path that can never be created (its "directory" is a regular file)."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file")
    path = blocker / "agent.db"
    with pytest.raises(StoreError) as info:
        open_and_use(str(path))
    assert str(path) in str(info.value)
    assert_names_fix(str(info.value))
