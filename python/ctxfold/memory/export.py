"""Export and import typed memories as YAML, one file per category
(``facts.yaml``, ``decisions.yaml``, ``learnings.yaml``, ``errors.yaml``,
``preferences.yaml``): a list of records with every field (ids, sources,
timestamps, resolved TTLs, effectiveness), so an import into an empty scope
gives back the same memories and exporting that again the same files.
Embeddings are not exported: the importing store embeds the content again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import msgspec

from ctxfold.errors import StoreError
from ctxfold.memory.records import Memory
from ctxfold.memory.scope import Scope, check_scope
from ctxfold.memory.typed import CATEGORY_FILES

__all__ = ["export_yaml", "import_yaml"]

# Search results and archive state are not part of an exported memory.
_SKIP = ("score", "status", "archived_reason", "archived_at", "superseded_by")


def export_yaml(store: Any, directory: str | os.PathLike[str], *, scope: Scope) -> list[Path]:
    """Write ``<directory>/<category>s.yaml`` for each category with memories; the paths."""
    check_scope(scope, write=False)
    target = Path(directory)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreError(f"cannot create the export directory {target}: {e}. Fix: pass a writable directory") from e
    written = []
    for category, filename in CATEGORY_FILES.items():
        memories = store.memories(scope=scope, category=category)
        if not memories:
            continue
        records = []
        for m in sorted(memories, key=lambda m: (m.created_at or 0.0, m.id)):
            data = msgspec.to_builtins(m)
            for name in _SKIP:
                data.pop(name, None)
            records.append(data)
        path = target / filename
        try:
            path.write_bytes(msgspec.yaml.encode(records))
        except OSError as e:
            raise StoreError(f"cannot write {path}: {e}. Fix: pass a writable directory") from e
        written.append(path)
    return written


def import_yaml(store: Any, directory: str | os.PathLike[str], *, scope: Scope) -> list[str]:
    """Add the memories of the category files in ``directory`` to ``scope`` (ids,
    timestamps and TTLs kept; a memory already there is left as it is); their ids."""
    check_scope(scope, write=True)
    source = Path(directory)
    if not source.is_dir():
        raise StoreError(f"no export directory {source}. Fix: pass the directory export_yaml wrote")
    ids: list[str] = []
    for category, filename in CATEGORY_FILES.items():
        path = source / filename
        if not path.is_file():
            continue
        try:
            memories = msgspec.yaml.decode(path.read_bytes(), type=list[Memory])
        except (OSError, msgspec.ValidationError, msgspec.DecodeError) as e:
            raise StoreError(f"cannot import {path}: {e}. Fix: restore the file export_yaml wrote") from e
        wrong = [m.id for m in memories if m.category != category]
        if wrong:
            raise StoreError(f"{path} holds memories of another category (ids {wrong[:3]}). Fix: move them to their file")
        ids.extend(store.add_many(memories, scope=scope, merge=False))
    return ids
