"""Export and import typed memories as YAML, one file per category
(``facts.yaml``, ``decisions.yaml``, ``learnings.yaml``, ``errors.yaml``,
``preferences.yaml``): a list of records with every field (ids, sources,
timestamps, resolved TTLs, effectiveness), so an import into an empty scope
gives back the same memories and exporting that again the same files.
Embeddings are not exported: the importing store embeds the content again.

Each file is a YAML mapping that any YAML reader can load: a comment line,
then ``format``, ``version``, ``category``, ``count`` (the number of records)
and ``sha256`` (of the bytes after the ``records:`` line), then ``records``::

    # ctxfold memory export: import_yaml checks count and sha256 and refuses a changed or cut-short file
    format: ctxfold-memories
    version: 2
    category: fact
    count: 3
    sha256: 5f0c...
    records:
    - content: Berlin office opens at 9
      ...

Crash safety: a file is written to a hidden temporary file in the same
directory (created exclusively, never through a link, mode 0o600 on POSIX),
flushed to disk, then renamed over the old one, and the directory is synced
(POSIX; Windows has no directory sync). So a crash leaves the old file or the
new one, never a mix; at worst a stray ``.<name>.<random>.tmp`` file that
import ignores and that can be deleted. Each file is replaced on its own: a
crash in the middle of an export can leave some categories old and some new.
A symbolic link (or any non-regular file) at a target path is refused, never
written through.

Import is all-or-nothing: every file is read and checked (header, count,
digest, categories) before anything is added, and the memories of all files
are added in one transaction. A file that was cut short, edited or had its
line endings converted is refused with the file named. Files of the previous
format (a bare YAML list, no count or digest) are refused too, since a cut
short one cannot be told from a complete one: export them again from the
store that holds the memories, or pass ``verify=False`` to import such a file
(or an intentionally edited one) unchecked.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any

import msgspec

from ctxfold.errors import InvalidTypeError, StoreError
from ctxfold.memory.records import Memory
from ctxfold.memory.scope import Scope, check_scope
from ctxfold.memory.typed import CATEGORY_FILES

__all__ = ["FORMAT_VERSION", "export_yaml", "import_yaml"]

#: The version written in the header of every exported file.
FORMAT_VERSION = 2

# Search results and archive state are not part of an exported memory.
_SKIP = ("score", "status", "archived_reason", "archived_at", "superseded_by")

_MAGIC = (
    b"# ctxfold memory export: import_yaml checks count and sha256 and refuses a changed or cut-short file\n"
)
_VERSION_LINE = re.compile(rb"format: ctxfold-memories\nversion: (\d+)\n")
_HEADER_REST = re.compile(rb"category: ([a-z]+)\ncount: (\d+)\nsha256: ([0-9a-f]{64})\nrecords:\n")

_RESTORE = "Fix: restore the file export_yaml wrote, or export again from the store that holds the memories"


def _header(category: str, count: int, digest: str) -> bytes:
    return _MAGIC + (
        f"format: ctxfold-memories\nversion: {FORMAT_VERSION}\ncategory: {category}\n"
        f"count: {count}\nsha256: {digest}\nrecords:\n"
    ).encode("ascii")


def _encode_file(category: str, memories: list[Memory]) -> bytes:
    records = []
    for m in sorted(memories, key=lambda m: (m.created_at or 0.0, m.id)):
        data = msgspec.to_builtins(m)
        for name in _SKIP:
            data.pop(name, None)
        records.append(data)
    body = msgspec.yaml.encode(records)
    return _header(category, len(records), hashlib.sha256(body).hexdigest()) + body


def export_yaml(memories: Any, directory: str | os.PathLike[str], *, scope: Scope) -> list[Path]:
    """Write ``<directory>/<category>s.yaml`` for each category with memories
    in ``memories`` (a store's ``store.memories``), each replaced atomically
    (see the module docstring); the paths."""
    check_scope(scope, write=False)
    if not isinstance(directory, (str, os.PathLike)):
        raise InvalidTypeError(
            f"directory: expected a str or path, got {type(directory).__name__}. Fix: pass the directory as a str "
            "or pathlib.Path"
        )
    target = Path(directory)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreError(f"cannot create the export directory {target}: {e}. Fix: pass a writable directory") from e
    files: list[tuple[Path, bytes]] = []
    for category, filename in CATEGORY_FILES.items():
        records = memories.all(scope=scope, category=category)
        if records:
            files.append((target / filename, _encode_file(category, records)))
    # Checked before anything is written, so a refused export changes no file.
    for path, _ in files:
        _check_target(path)
    temporaries: list[tuple[Path, Path]] = []
    renamed = 0
    try:
        for path, data in files:
            temporaries.append((_write_temporary(path, data), path))
        for temporary, path in temporaries:
            try:
                os.replace(temporary, path)
            except OSError as e:
                raise StoreError(
                    f"cannot replace {path}: {e}. Fix: pass a writable directory and close programs that hold the file"
                ) from e
            renamed += 1
        _sync_directory(target)
    finally:
        for temporary, _ in temporaries[renamed:]:
            with contextlib.suppress(OSError):
                temporary.unlink()
    return [path for path, _ in files]


def _check_target(path: Path) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as e:
        raise StoreError(f"cannot check {path}: {e}. Fix: pass a readable, writable directory") from e
    if stat.S_ISLNK(info.st_mode):
        raise StoreError(
            f"{path} is a symbolic link; export_yaml does not write through links. "
            "Fix: remove the link or export to another directory"
        )
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(f"{path} exists and is not a regular file. Fix: remove it or export to another directory")


def _write_temporary(path: Path, data: bytes) -> Path:
    """``data`` in a new private file next to ``path``, flushed to disk; its path."""
    # O_EXCL: never reuse a file (or a link) someone planted under the same name.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
    flags |= getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    try:
        fd = os.open(temporary, flags, 0o600)
    except OSError as e:
        raise StoreError(
            f"cannot write {path} (temporary file {temporary}): {e}. Fix: pass a writable directory"
        ) from e
    try:
        with open(fd, "wb") as f:
            if hasattr(os, "fchmod"):  # exactly 0o600 whatever the umask; Windows has no fchmod
                os.fchmod(f.fileno(), 0o600)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError as e:
        with contextlib.suppress(OSError):
            temporary.unlink()
        raise StoreError(f"cannot write {path}: {e}. Fix: free disk space or pass a writable directory") from e
    return temporary


def _sync_directory(directory: Path) -> None:
    """Make the renames durable (POSIX); Windows cannot open a directory to sync it."""
    if os.name == "nt":
        return
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError as e:
        raise StoreError(f"cannot open {directory} to sync it: {e}. Fix: pass a readable directory") from e
    try:
        os.fsync(fd)
    except OSError as e:
        # Some file systems cannot sync a directory; the renames are done.
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EBADF):
            raise StoreError(f"cannot sync {directory}: {e}. Fix: check the disk and export again") from e
    finally:
        os.close(fd)


def import_yaml(
    memories: Any, directory: str | os.PathLike[str], *, scope: Scope, verify: bool = True
) -> list[str]:
    """Add the memories of the category files in ``directory`` to ``scope`` in
    ``memories`` (a store's ``store.memories``; ids, timestamps and TTLs kept;
    a memory already there is left as it is); their ids.

    All or nothing: every file is checked before anything is added, and a file
    that is cut short, changed or of the previous format (no count and digest)
    raises `StoreError` naming it. ``verify=False`` skips the count and digest
    check, for a file edited on purpose or written by an older ctxfold."""
    check_scope(scope, write=True)
    if not isinstance(directory, (str, os.PathLike)):
        raise InvalidTypeError(
            f"directory: expected a str or path, got {type(directory).__name__}. Fix: pass the directory as a str "
            "or pathlib.Path"
        )
    if not isinstance(verify, bool):
        raise InvalidTypeError(f"verify: expected a bool, got {type(verify).__name__}. Fix: pass True or False")
    source = Path(directory)
    if not source.is_dir():
        raise StoreError(f"no export directory {source}. Fix: pass the directory export_yaml wrote")
    records: list[Memory] = []
    for category, filename in CATEGORY_FILES.items():
        path = source / filename
        if path.is_file():
            records.extend(_read_file(path, category, verify))
    if not records:
        return []
    return list(memories.add_many(records, scope=scope, merge=False))


def _read_file(path: Path, category: str, verify: bool) -> list[Memory]:
    try:
        data = path.read_bytes()
    except OSError as e:
        raise StoreError(f"cannot read {path}: {e}; nothing was imported. Fix: pass a readable export directory") from e
    if verify:
        body, count = _verified_body(path, data, category)
        memories: list[Memory] = _decode(path, body, list[Memory])
        if len(memories) != count:  # the digest does not cover the header's count
            raise StoreError(
                f"cannot import {path}: it holds {len(memories)} records but its header says {count}; "
                f"nothing was imported. {_RESTORE}"
            )
    elif data.startswith(_MAGIC):
        memories = _decode(path, data, _Document).records
    else:
        memories = _decode(path, data, list[Memory])
    wrong = [m.id for m in memories if m.category != category]
    if wrong:
        raise StoreError(
            f"{path} holds memories of another category (ids {wrong[:3]}); nothing was imported. "
            "Fix: move them to their file"
        )
    return memories


class _Document(msgspec.Struct):
    records: list[Memory]


def _decode(path: Path, data: bytes, type: Any) -> Any:
    try:
        return msgspec.yaml.decode(data, type=type)
    except (msgspec.ValidationError, msgspec.DecodeError) as e:
        raise StoreError(f"cannot import {path}: {e}; nothing was imported. {_RESTORE}") from e


def _verified_body(path: Path, data: bytes, category: str) -> tuple[bytes, int]:
    """The records part of ``data`` and its count, after checking the header and
    the digest; `StoreError` naming ``path`` for anything else."""

    def refuse(why: str, fix: str = _RESTORE) -> StoreError:
        return StoreError(f"cannot import {path}: {why}; nothing was imported. {fix}")

    if not data.startswith(_MAGIC):
        if _MAGIC.startswith(data):
            raise refuse("the file is cut short (it ends inside its first line)")
        if data.startswith(_MAGIC[:-1] + b"\r\n"):
            raise refuse(
                "its line endings were converted to CRLF after export_yaml wrote it",
                "Fix: restore LF line endings (with git: add '*.yaml -text' to .gitattributes) or export again",
            )
        raise refuse(
            "it has no record count and digest (written by an older ctxfold, or not by export_yaml), "
            "so a cut-short file cannot be told from a complete one",
            "Fix: export it again with this version (store.memories.export_yaml(directory, scope=...)) from the store "
            "that holds the memories, or pass verify=False to import it unchecked",
        )
    at = len(_MAGIC)
    version = _VERSION_LINE.match(data, at)
    if version is None:
        raise refuse("its header is cut short or changed")
    if int(version[1]) != FORMAT_VERSION:
        raise refuse(
            f"it is format version {int(version[1])}, this ctxfold reads version {FORMAT_VERSION}",
            "Fix: import it with the ctxfold version that wrote it",
        )
    rest = _HEADER_REST.match(data, version.end())
    if rest is None:
        raise refuse("its header is cut short or changed")
    found, count, digest = rest[1].decode("ascii"), int(rest[2]), rest[3].decode("ascii")
    if data[: rest.end()] != _header(found, count, digest):
        raise refuse("its header was changed")
    if found != category:
        raise refuse(f"its header says category {found!r}, but {path.name} holds {category!r} memories")
    body = data[rest.end() :]
    if hashlib.sha256(body).hexdigest() != digest:
        raise refuse(
            "its records do not match the sha256 in its header: the file was cut short or changed "
            "after export_yaml wrote it (to import an edited file on purpose, pass verify=False)"
        )
    return body, count
