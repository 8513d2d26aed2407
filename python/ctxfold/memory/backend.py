"""The connection layer every store of one database shares (`Backend`), and
the base of those stores (`Part`).

`Backend` speaks a small SQL subset that SQLite and PostgreSQL both accept
(``?`` placeholders rewritten to ``%s`` for psycopg, ``ON CONFLICT``,
``RETURNING``); a subclass (`ctxfold.memory.sqlite.SqliteBackend`,
`ctxfold.memory.postgres.PostgresBackend`) supplies only the connection and
its transactions (`transaction`). Beside them it holds what every store of
the database reads inside a transaction: the row ids of the scopes, the
embedding dimension and the embedder. Every public call of a `Part` is one
`Backend.call`, which a backend may run again after a lost connection.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar

from ctxfold.errors import StoreError
from ctxfold.memory.embedding import default_embedder
from ctxfold.memory.schema import MIGRATIONS, SCHEMA_VERSION, render
from ctxfold.memory.scope import SCOPE_FIELDS, Scope

__all__ = ["Backend", "Part", "wide_filter"]


@functools.lru_cache(maxsize=512)
def _pg_sql(sql: str) -> str:
    return sql.replace("?", "%s")


class Backend:
    """One database: its connection (or pool), transactions and the state
    the stores over it share."""

    dialect = "sqlite"
    #: The path or the DSN (password masked), for messages.
    location = ""

    def __init__(self, embedder: Any = None) -> None:
        self._embedder = embedder
        self._scope_ids: dict[tuple[str | None, ...], int] = {}
        self._dim: int | None = None
        self.closed = False
        self._tx_local = threading.local()

    # --- what a backend supplies ---------------------------------------------------------

    def transaction(self, write: bool) -> contextlib.AbstractContextManager[Any]:  # pragma: no cover
        """A transaction on a connection, yielding its cursor (``write``: it may write)."""
        raise NotImplementedError

    def close(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def writer_turn(self) -> contextlib.AbstractContextManager[Any]:
        """Held around each write transaction (SQLite: the writers of one file take turns)."""
        return contextlib.nullcontext()

    def call(self, method: Callable[..., Any], target: Any, args: Any, kwargs: Any, idempotent: bool) -> Any:
        """Run one public call of a store (``idempotent``: running it twice changes nothing)."""
        return method(target, *args, **kwargs)

    # --- SQL and transactions --------------------------------------------------------------

    def sql(self, sql: str) -> str:
        return sql if self.dialect == "sqlite" else _pg_sql(sql)

    def execute(self, cur: Any, sql: str, params: Sequence[Any] = ()) -> Any:
        return cur.execute(self.sql(sql), params)

    def executemany(self, cur: Any, sql: str, rows: Sequence[Sequence[Any]]) -> Any:
        return cur.executemany(self.sql(sql), rows)

    def read(self) -> contextlib.AbstractContextManager[Any]:
        self.check_open()
        return self.transaction(False)

    def write(self) -> contextlib.AbstractContextManager[Any]:
        self.check_open()
        return self._forgetting_on_rollback(self.transaction(True))

    @contextlib.contextmanager
    def _forgetting_on_rollback(self, transaction: contextlib.AbstractContextManager[Any]) -> Iterator[Any]:
        """A write that fails rolls back; what the backend learnt inside it (a
        scope's row id, the embedding dimension) may not exist any more, and a
        reused row id would hand one scope's records to another, so those
        caches are dropped and read again from the database. What the write
        registered with `after_commit` runs only once it has committed."""
        local = self._tx_local
        stack = local.__dict__.setdefault("pending", [])
        actions: list[Callable[[], None]] = []
        stack.append(actions)
        try:
            with self.writer_turn(), transaction as cur:
                yield cur
        except BaseException:
            self._scope_ids.clear()
            self._dim = None
            raise
        finally:
            stack.pop()
            if not stack:
                local.__dict__.pop("scratch", None)
        for action in actions:
            action()

    def after_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` when the write transaction of this thread commits (never if it rolls back)."""
        stack = self._tx_local.__dict__.get("pending")
        if not stack:
            raise RuntimeError("after_commit outside a write transaction")
        stack[-1].append(action)

    def scratch(self) -> dict[str, Any]:
        """This thread's notes for its next write (dropped when that write ends)."""
        found: dict[str, Any] = self._tx_local.__dict__.setdefault("scratch", {})
        return found

    def check_open(self) -> None:
        if self.closed:
            raise StoreError(f"the store {self.location} is closed. Fix: open a new store (or use it in a with block)")

    def migrate(self, cur: Any) -> None:
        self.execute(cur, "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = self.execute(cur, "SELECT MAX(version) FROM schema_version").fetchone()
        current = int(row[0] or 0)
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"the store {self.location} has schema version {current}, newer than this ctxfold "
                f"supports ({SCHEMA_VERSION}). Fix: upgrade ctxfold, or use another store"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version - 1]:
                self.execute(cur, render(statement, self.dialect))
            self.execute(cur, "INSERT INTO schema_version (version) VALUES (?)", (version,))

    @property
    def embedder(self) -> Any:
        """The embedder texts are searched with (the shared `StaticEmbedder` by default)."""
        if self._embedder is None:
            self._embedder = default_embedder()
        return self._embedder

    # --- scopes ------------------------------------------------------------------------------

    def scope_id(self, cur: Any, scope: Scope, create: bool) -> int | None:
        key = scope.values()
        sid = self._scope_ids.get(key)
        if sid is not None:
            return sid
        where = "user_id = ? AND agent_id = ? AND session_id = ? AND conversation_id = ?"
        row = self.execute(cur, f"SELECT id FROM scopes WHERE {where}", key).fetchone()
        if row is None and create:
            self.execute(
                cur,
                "INSERT INTO scopes (user_id, agent_id, session_id, conversation_id, gen) VALUES (?, ?, ?, ?, 0) "
                "ON CONFLICT (user_id, agent_id, session_id, conversation_id) DO NOTHING",
                key,
            )
            row = self.execute(cur, f"SELECT id FROM scopes WHERE {where}", key).fetchone()
            # Not cached yet: the transaction that created the row may still roll back.
            return None if row is None else int(row[0])
        if row is None:
            return None
        self._scope_ids[key] = int(row[0])
        return int(row[0])

    def scope_ids_of(self, cur: Any, scope: Scope) -> list[int]:
        """The ids of the stored scopes ``scope`` covers (one at most when exact)."""
        if scope.exact:
            sid = self.scope_id(cur, scope, create=False)
            return [] if sid is None else [sid]
        where, params = wide_filter(scope)
        return [int(r[0]) for r in self.execute(cur, f"SELECT id FROM scopes WHERE {where}", params).fetchall()]

    def scope_filter(self, cur: Any, scope: Scope, column: str = "scope_id") -> tuple[str, tuple[Any, ...]]:
        """A WHERE clause (and its parameters) selecting the rows of ``scope``."""
        if scope.exact:
            sid = self.scope_id(cur, scope, create=False)
            return f"{column} = ?", (-1 if sid is None else sid,)
        where, params = wide_filter(scope)
        return f"{column} IN (SELECT id FROM scopes WHERE {where})", params

    def bump(self, cur: Any, sid: int) -> int:
        """Mark the scope's searchable rows changed (removed or replaced: cached
        matrices are rebuilt; rows only added advance ``gen`` alone); the new generation."""
        row = self.execute(cur, "UPDATE scopes SET gen = gen + 1, cut_gen = gen + 1 WHERE id = ? RETURNING gen", (sid,))
        return int(row.fetchone()[0])

    def generation(self, cur: Any, scope: Scope, sids: list[int]) -> tuple[object, int | None]:
        """The generation of the scope's searchable rows (a wide scope: of every
        scope it covers) and, for an exact scope, the last one that removed rows."""
        if scope.exact:
            row = self.execute(cur, "SELECT gen, cut_gen FROM scopes WHERE id = ?", (sids[0],)).fetchone()
            return (int(row[0]), int(row[1])) if row else (-1, None)
        where, params = wide_filter(scope)
        row = self.execute(cur, f"SELECT COALESCE(SUM(gen), 0), COUNT(*) FROM scopes WHERE {where}", params).fetchone()
        return (int(row[0]), int(row[1])), None

    # --- the embedding dimension ----------------------------------------------------------------

    def check_dim(self, cur: Any, dim: int, what: str) -> None:
        if self._dim is None:
            self.execute(cur, "INSERT INTO meta (key, value) VALUES ('dim', ?) ON CONFLICT (key) DO NOTHING", (str(dim),))
            self._dim = int(self.execute(cur, "SELECT value FROM meta WHERE key = 'dim'").fetchone()[0])
        if dim != self._dim:
            raise StoreError(
                f"{what}: {dim}-dimensional embedding, but the store {self.location} holds "
                f"{self._dim}-dimensional ones. Fix: use the embedder the store was filled with "
                "(embedder=...), or a new store for this embedder"
            )

    def stored_dim(self, cur: Any) -> int | None:
        if self._dim is None:
            row = self.execute(cur, "SELECT value FROM meta WHERE key = 'dim'").fetchone()
            self._dim = None if row is None else int(row[0])
        return self._dim


def wide_filter(scope: Scope) -> tuple[str, tuple[Any, ...]]:
    """A WHERE clause on the ``scopes`` table matching every scope ``scope`` covers."""
    parts, params = [], []
    for name in SCOPE_FIELDS:
        value = getattr(scope, name)
        if value is not None:
            parts.append(f"{name} = ?")
            params.append(value)
    return (" AND ".join(parts) or "1 = 1"), tuple(params)


def _operation(name: str, method: Callable[..., Any], idempotent: bool) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(self: Part, *args: Any, **kwargs: Any) -> Any:
        return self.backend.call(method, self, args, kwargs, idempotent)

    return call


class Part:
    """A store of one concern over a shared `Backend`. Each public method it
    defines is one `Backend.call` (wrapped when the class is made, so a
    method added later is covered without a list to keep in step)."""

    #: The public methods that change nothing when run twice (see `Backend.call`).
    idempotent: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, value in list(vars(cls).items()):
            if not name.startswith("_") and name != "close" and inspect.isfunction(value):
                setattr(cls, name, _operation(name, value, name in cls.idempotent))
