"""`MemoryArchive` (``store.archive``): memories that are no longer current
(expired, superseded, or moved there by hand), kept with the reason and,
for a superseded one, the id of the memory that replaced it. Search and
``store.memories.get`` never return them; `ctxfold.memory.memories.Memories.history`
links them into a chain."""

from __future__ import annotations

import time
from typing import Any

import msgspec

from ctxfold.memory.backend import Part
from ctxfold.memory.checks import text
from ctxfold.memory.records import Memory, decoder, encode
from ctxfold.memory.scope import Scope, check_scope

__all__ = ["MemoryArchive"]


class MemoryArchive(Part):
    """The archive of memories, by scope."""

    def move(self, memory_id: str, *, scope: Scope, reason: str = "archived") -> bool:
        """Move a memory to the archive; False if it was not active in ``scope``."""
        check_scope(scope, write=True)
        text(memory_id, "memory_id", column=True)
        text(reason, "reason", column=True)
        db = self.backend
        with db.write() as cur:
            sid = db.scope_id(cur, scope, create=False)
            return sid is not None and self._move(cur, sid, [memory_id], reason, time.time()) > 0

    def expire(self, *, scope: Scope | None = None) -> int:
        """Move every expired memory (of ``scope``, default all) to the archive;
        how many. Writes do this for their own scope on the way."""
        db = self.backend
        with db.write() as cur:
            if scope is None:
                sids = [int(r[0]) for r in db.execute(cur, "SELECT id FROM scopes").fetchall()]
            else:
                check_scope(scope, write=False)
                sids = db.scope_ids_of(cur, scope)
            return self._expire(cur, sids, time.time())

    def all(self, *, scope: Scope, category: str | None = None) -> list[Memory]:
        """The archived memories of ``scope`` (``status == "archived"``, with the reason)."""
        check_scope(scope, write=False)
        text(category, "category", column=True, optional=True)
        db = self.backend
        with db.read() as cur:
            where, params = db.scope_filter(cur, scope)
            sql, args = f"SELECT record FROM archive WHERE {where}", list(params)
            if category is not None:
                sql += " AND category = ?"
                args.append(category)
            rows = db.execute(cur, sql + " ORDER BY archived_at, rid", args).fetchall()
        return [decoder.decode(r[0]) for r in rows]

    def get(self, memory_id: str, *, scope: Scope) -> Memory | None:
        """The archived memory ``memory_id`` of ``scope`` (None if it is not
        archived): ``archived_reason`` says why, ``superseded_by`` names the
        memory that replaced a superseded one."""
        check_scope(scope, write=False)
        text(memory_id, "memory_id", column=True)
        db = self.backend
        with db.read() as cur:
            where, params = db.scope_filter(cur, scope)
            row = db.execute(
                cur, f"SELECT record FROM archive WHERE {where} AND id = ? LIMIT 1", (*params, memory_id)
            ).fetchone()
        return None if row is None else decoder.decode(row[0])

    # --- inside a write of the memories ------------------------------------------------

    def _expire(self, cur: Any, sids: list[int], now: float) -> int:
        moved = 0
        for sid in sids:
            ids = [r[0] for r in self.backend.execute(
                cur, "SELECT id FROM memories WHERE scope_id = ? AND expires_at <= ?", (sid, now)
            ).fetchall()]
            if ids:
                moved += self._move(cur, sid, ids, "expired", now)
        return moved

    def _move(self, cur: Any, sid: int, ids: list[str], reason: str, now: float, superseded_by: str = "") -> int:
        """Move the active memories ``ids`` of scope ``sid`` to the archive; how many were there."""
        db = self.backend
        moved = 0
        for mid in ids:
            row = db.execute(cur, "SELECT record FROM memories WHERE scope_id = ? AND id = ?", (sid, mid)).fetchone()
            if row is None:
                continue
            record = msgspec.structs.replace(
                decoder.decode(row[0]), status="archived", archived_reason=reason, archived_at=now,
                superseded_by=superseded_by,
            )
            db.execute(cur, "DELETE FROM archive WHERE scope_id = ? AND id = ?", (sid, mid))
            db.execute(
                cur,
                "INSERT INTO archive (scope_id, id, category, reason, archived_at, record) VALUES (?, ?, ?, ?, ?, ?)",
                (sid, mid, record.category, reason, now, encode(record)),
            )
            db.execute(cur, "DELETE FROM memories WHERE scope_id = ? AND id = ?", (sid, mid))
            moved += 1
        if moved:
            db.bump(cur, sid)
        return moved
