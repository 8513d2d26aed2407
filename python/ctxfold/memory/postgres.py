"""`PostgresStore`: one memory shared by many agents on many machines.

psycopg 3 with a `psycopg_pool.ConnectionPool` (the ``postgres`` extra,
imported only when a `PostgresStore` is created). The schema and semantics are
`SqliteStore`'s: the same tables (``BYTEA`` embeddings), one transaction per
write call, a per-scope generation that invalidates other processes' cached
search matrices. ``schema=`` keeps the tables in their own PostgreSQL schema
(created if missing), e.g. one per tenant or per test.
"""

from __future__ import annotations

import contextlib
import re
import threading
import traceback
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from ctxfold.errors import InvalidInputError, InvalidTypeError, StoreError
from ctxfold.memory.backend import Backend
from ctxfold.memory.memories import check_options
from ctxfold.memory.store import SqlStore
from ctxfold.memory.updates import MERGE_THRESHOLD, SUPERSEDE_THRESHOLD

__all__ = ["PostgresBackend", "PostgresStore", "mask_dsn"]

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_MIGRATION_LOCK = 0x63747866  # pg_advisory_xact_lock key ("ctxf")


_URI_PREFIXES = ("postgresql://", "postgres://")
_SPACE = " \t\n\v\f\r"  # what C's isspace() accepts: libpq's separators
#: Keywords whose values are shown; every other value (password, sslpassword,
#: passfile, options, service, an unknown keyword...) is masked.
_SHOWN = frozenset({
    "host", "hostaddr", "port", "dbname", "user", "connect_timeout", "application_name",
    "fallback_application_name", "client_encoding", "sslmode", "sslnegotiation", "target_session_attrs",
    "load_balance_hosts", "gssencmode", "channel_binding", "require_auth", "keepalives", "keepalives_idle",
    "keepalives_interval", "keepalives_count", "tcp_user_timeout", "replication",
})
_PORTS = re.compile(r"[0-9]*(?:,[0-9]*)*")
_HEX = frozenset(b"0123456789abcdefABCDEF")
_MASK = "***"


class _MalformedDsn(ValueError):
    """libpq refuses the DSN; the message says why without quoting any of it."""


class _Part(NamedTuple):
    """A piece of a DSN: structure (``keyword`` empty: shown as written) or
    the value of ``keyword`` as written (``text``) and as libpq reads it."""

    text: str
    keyword: str = ""
    value: str = ""


class _DsnView(NamedTuple):
    masked: str
    hidden: tuple[str, ...]
    """Strings no message may show (the masked values, as written and as read)."""
    clear: bool
    """False when the DSN is masked whole: a message from the driver is then
    not shown either, since it may repeat any part of the DSN."""


def _parse_dsn(dsn: str) -> list[_Part]:
    """``dsn`` in parts, read the way libpq reads it (fe-connect.c:
    ``conninfo_uri_parse_options`` for postgresql:// and postgres:// URIs,
    ``conninfo_parse`` for key=value strings); `_MalformedDsn` where libpq
    refuses it. Unknown keywords are not refused here (libpq names them
    without their values)."""
    if "\x00" in dsn:
        raise _MalformedDsn("it contains a NUL character")
    try:
        dsn.encode("utf-8")
    except UnicodeEncodeError:
        raise _MalformedDsn("it is not valid Unicode text (it holds a lone surrogate)") from None
    for prefix in _URI_PREFIXES:  # case-sensitive and at the very start, as in libpq
        if dsn.startswith(prefix):
            return [_Part(prefix), *_parse_uri(dsn, len(prefix))]
    return _parse_keywords(dsn)


def _parse_keywords(dsn: str) -> list[_Part]:
    parts: list[_Part] = []
    i, n = 0, len(dsn)
    while i < n:
        if dsn[i] in _SPACE:
            start = i
            while i < n and dsn[i] in _SPACE:
                i += 1
            parts.append(_Part(dsn[start:i]))
            continue
        start = i
        while i < n and dsn[i] != "=" and dsn[i] not in _SPACE:
            i += 1
        keyword = dsn[start:i]
        while i < n and dsn[i] in _SPACE:
            i += 1
        if i == n or dsn[i] != "=":
            raise _MalformedDsn(
                'a word is not followed by "=" (pairs are separated by spaces: quote a value that holds spaces)'
            )
        if not keyword:
            raise _MalformedDsn('an "=" has no keyword before it')
        i += 1
        while i < n and dsn[i] in _SPACE:
            i += 1
        parts.append(_Part(dsn[start:i]))
        start, chars = i, []
        if i < n and dsn[i] == "'":
            i += 1
            while True:
                if i >= n:
                    raise _MalformedDsn("a quoted value has no closing quote")
                if dsn[i] == "\\":
                    chars.append(dsn[i + 1 : i + 2])
                    i += 2
                elif dsn[i] == "'":
                    i += 1
                    break
                else:
                    chars.append(dsn[i])
                    i += 1
        else:
            while i < n and dsn[i] not in _SPACE:
                if dsn[i] == "\\":
                    chars.append(dsn[i + 1 : i + 2])
                    i += 2
                else:
                    chars.append(dsn[i])
                    i += 1
            i = min(i, n)
        parts.append(_Part(dsn[start:i], keyword, "".join(chars)))
    return parts


def _uri_value(raw: str, keyword: str) -> _Part:
    """``raw`` decoded as libpq decodes a URI's parts: spaces around it
    dropped, one inside refused (libpq 17 and later), ``%XX`` decoded, ``+``
    kept."""
    value = raw.strip(" ")
    if " " in value:
        raise _MalformedDsn(f"the {keyword} in the URI holds a space (write it as %20)")
    if "%" not in value:
        return _Part(raw, keyword, value)
    data, out, i = value.encode("utf-8"), bytearray(), 0
    while i < len(data):
        if data[i] != 0x25:  # "%"
            out.append(data[i])
            i += 1
            continue
        pair = data[i + 1 : i + 3]
        if len(pair) < 2 or not all(c in _HEX for c in pair):
            raise _MalformedDsn(f"the {keyword} in the URI has a % not followed by two hex digits (write % as %25)")
        if pair == b"00":
            raise _MalformedDsn(f"the {keyword} in the URI holds %00, which libpq refuses")
        out.append(int(pair, 16))
        i += 3
    return _Part(raw, keyword, out.decode("utf-8", "replace"))


def _parse_uri(dsn: str, i: int) -> list[_Part]:
    parts: list[_Part] = []
    n = len(dsn)
    # user[:password]@ when an "@" comes before the first "/" (a "?" or "#" does not end the search)
    at = i
    while at < n and dsn[at] not in "@/":
        at += 1
    if at < n and dsn[at] == "@":
        colon = dsn.find(":", i, at)
        if colon < 0:
            parts.append(_uri_value(dsn[i:at], "user"))
        else:
            parts += [_uri_value(dsn[i:colon], "user"), _Part(":"), _uri_value(dsn[colon + 1 : at], "password")]
        parts.append(_Part("@"))
        i = at + 1
    hosts: list[str] = []  # as written, one port per host ("" when none)
    ports: list[str] = []
    while True:  # host[:port] or [ipv6][:port], separated by commas
        if i < n and dsn[i] == "[":
            end = dsn.find("]", i + 1)
            if end < 0:
                raise _MalformedDsn('an IPv6 host in the URI has no closing "]"')
            if end == i + 1:
                raise _MalformedDsn("an IPv6 host in the URI is empty")
            parts += [_Part("["), _uri_value(dsn[i + 1 : end], "host"), _Part("]")]
            hosts.append(dsn[i + 1 : end])
            i = end + 1
            if i < n and dsn[i] not in ":/?,":
                raise _MalformedDsn('an IPv6 host in the URI is followed by something else than ":", "/", "?" or ","')
        else:
            end = i
            while end < n and dsn[end] not in ":/?,":
                end += 1
            parts.append(_uri_value(dsn[i:end], "host"))
            hosts.append(dsn[i:end])
            i = end
        ports.append("")
        if i < n and dsn[i] == ":":
            end = i + 1
            while end < n and dsn[end] not in "/?,":
                end += 1
            parts += [_Part(":"), _uri_value(dsn[i + 1 : end], "port")]
            ports[-1] = dsn[i + 1 : end]
            i = end
        if i < n and dsn[i] == ",":
            parts.append(_Part(","))
            i += 1
            continue
        break
    # libpq decodes the hosts, and the ports, as one comma-separated string: a space between two is refused
    _uri_value(",".join(hosts), "host")
    _uri_value(",".join(ports), "port")
    if i < n and dsn[i] == "/":
        end = dsn.find("?", i + 1)
        end = n if end < 0 else end
        parts += [_Part("/"), _uri_value(dsn[i + 1 : end], "dbname")]
        i = end
    if i < n:  # "?" and keyword=value parameters separated by "&"
        parts.append(_Part("?"))
        pieces = dsn[i + 1 :].split("&")
        if pieces[-1] == "":  # nothing, or a trailing "&"
            pieces.pop()
        for k, piece in enumerate(pieces):
            if "=" not in piece:
                raise _MalformedDsn('a parameter in the URI\'s query has no "="')
            keyword_text, value_text = piece.split("=", 1)
            if "=" in value_text:
                raise _MalformedDsn('a parameter in the URI\'s query has a second "=" (write it as %3D)')
            keyword = _uri_value(keyword_text, "query parameter").value
            value = _uri_value(value_text, "query parameter").value
            if not keyword:
                raise _MalformedDsn("a parameter in the URI's query has no keyword")
            if keyword == "ssl" and value == "true":  # libpq's JDBC spelling
                keyword, value = "sslmode", "require"
            parts += [_Part(keyword_text + "="), _Part(value_text, keyword, value)]
            if k < len(pieces) - 1 or dsn.endswith("&"):
                parts.append(_Part("&"))
    return parts


def _shown(part: _Part) -> bool:
    if part.keyword not in _SHOWN:
        return False
    # A dbname may be a whole connection string that libpq expands, password included.
    return part.keyword != "dbname" or ("=" not in part.value and not part.value.startswith(_URI_PREFIXES))


def _view(dsn: str) -> _DsnView:
    """How ``dsn`` may be shown (`_MalformedDsn` when libpq refuses it)."""
    parts = _parse_dsn(dsn)
    values = [p for p in parts if p.keyword]
    # A port that is not a number may be part of a password libpq read as host:port.
    clear = all(_PORTS.fullmatch(p.value) for p in values if p.keyword == "port")
    if parts and parts[0].text in _URI_PREFIXES:
        if any(p.text == "@" and not p.keyword for p in parts):
            # An "@" in a host or the database: a password with an unencoded "@" or "/".
            clear = clear and not any("@" in p.text for p in values if p.keyword in ("host", "port", "dbname"))
        else:
            clear = clear and "@" not in dsn
    secret = {k for k, p in enumerate(parts) if p.keyword and not (clear and _shown(p))}
    hidden = tuple(sorted({s for k in secret for s in (parts[k].text, parts[k].value) if s}, key=len, reverse=True))
    if not clear:
        return _DsnView(_whole_mask(dsn), hidden, False)
    # A quoted value stays quoted: "password='x'host=h" is two pairs, "password=***host=h" one.
    # In a URI a quote is a character of the value, not a quote.
    quoting = not (parts and parts[0].text in _URI_PREFIXES)
    masked = "".join(
        p.text if k not in secret else f"'{_MASK}'" if quoting and p.text.startswith("'") else _MASK
        for k, p in enumerate(parts)
    )
    return _DsnView(masked, hidden, True)


def _whole_mask(dsn: str) -> str:
    return next((p + _MASK for p in _URI_PREFIXES if dsn.startswith(p)), _MASK)


def mask_dsn(dsn: str) -> str:
    """``dsn`` safe to show: read the way libpq reads it (key=value pairs with
    quotes and backslash escapes, or a postgresql:// URI with percent-encoding,
    several hosts and query parameters), every value but the host, port,
    database, user and a few other harmless settings replaced by ``***``, the
    password wherever it is given. A DSN libpq refuses, or one it would read
    otherwise than meant (an unencoded ``@`` or ``/`` in a URI's password, a
    port that is not a number), is masked whole."""
    if not isinstance(dsn, str):
        raise InvalidTypeError(f"dsn: expected a str, got {type(dsn).__name__}")
    try:
        return _view(dsn).masked
    except _MalformedDsn:
        return _whole_mask(dsn)


class PostgresStore(SqlStore):
    """A memory store in a PostgreSQL database.

    ``PostgresStore("postgresql://user:password@host:5432/db")`` (any libpq
    DSN). ``schema``: a PostgreSQL schema for the tables (default: the
    connection's search_path, usually ``public``); ``min_size``/``max_size``:
    the connection pool; ``timeout``: seconds to connect or wait for a pooled
    connection; ``embedder``, ``merge_threshold``, ``supersede_threshold``, ``matrix_cache_bytes``: as
    for `SqliteStore`.

    Operations: a pooled connection is checked (one round trip) before it is
    handed out, and every idle one when that check fails, so connections the
    server dropped (a restart, ``pg_terminate_backend``) are replaced instead
    of failing calls. A call whose connection is lost anyway is run again once
    on a fresh one when that is safe: nothing of it had been committed yet, or
    it only reads, or repeating it changes nothing (adding memories or
    episodes, setting working memory, the cache upserts). Otherwise (appending
    messages, counting an application, a delete that reports what it removed)
    the `StoreError` says that the write may or may not have been committed.

    The DSN is never shown: ``location``, ``repr()`` and every error show it
    masked (`mask_dsn`). A DSN libpq cannot parse raises `InvalidInputError`
    without quoting it. Raises `StoreError` naming the masked DSN and the fix
    when the server cannot be reached or refuses the login, and when psycopg
    is not installed.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        embedder: Any = None,
        merge_threshold: float | None = MERGE_THRESHOLD,
        supersede_threshold: float | None = SUPERSEDE_THRESHOLD,
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = 10.0,
        matrix_cache_bytes: int = 1 << 30,
    ) -> None:
        check_options(merge_threshold, supersede_threshold, matrix_cache_bytes)
        self.backend: PostgresBackend = PostgresBackend(
            dsn, schema=schema, embedder=embedder, min_size=min_size, max_size=max_size, timeout=timeout
        )
        super().__init__(
            self.backend, merge_threshold=merge_threshold, supersede_threshold=supersede_threshold,
            matrix_cache_bytes=matrix_cache_bytes,
        )

    @property
    def schema(self) -> str | None:
        """The PostgreSQL schema of the tables (None: the connection's search_path)."""
        return self.backend.schema

    def __repr__(self) -> str:
        return f"PostgresStore({self.location!r}, schema={self.schema!r})"


class PostgresBackend(Backend):
    """One PostgreSQL database's connection pool, shared by the stores over it
    (see `PostgresStore`)."""

    dialect = "postgres"

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        embedder: Any = None,
        min_size: int = 1,
        max_size: int = 8,
        timeout: float = 10.0,
    ) -> None:
        if not isinstance(dsn, str):
            raise InvalidTypeError(f"dsn: expected a str (a libpq connection string or URL), got {type(dsn).__name__}")
        if schema is not None and (not isinstance(schema, str) or not _IDENTIFIER.match(schema)):
            raise InvalidInputError(f"schema: {schema!r} is not a plain SQL identifier (letters, digits, _; max 63)")
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise InvalidInputError(f"timeout: must be a positive number of seconds, got {timeout!r}")
        super().__init__(embedder)
        try:
            view = _view(dsn)
        except _MalformedDsn as e:
            raise InvalidInputError(
                f"dsn: libpq cannot parse this connection string: {e} (it is not shown: it may hold a password). "
                "Fix: write key=value pairs separated by spaces, a value with spaces, quotes or backslashes "
                "in single quotes with \\' and \\\\ inside, or a postgresql:// URI with reserved characters of "
                "the user and password percent-encoded (urllib.parse.quote(password, safe=''))"
            ) from None
        self._dsn = dsn
        self.location = view.masked
        self._hidden = view.hidden
        self._clear = view.clear
        self._calls = threading.local()
        self.schema = schema
        self.timeout = float(timeout)
        try:
            import psycopg
            from psycopg_pool import ConnectionPool
        except ImportError as e:
            raise StoreError(
                f"PostgresStore needs psycopg 3 and psycopg_pool ({e}). Fix: pip install 'ctxfold[postgres]'"
            ) from e
        self._psycopg = psycopg
        # Connect once directly: the pool would only report a timeout, this says why.
        try:
            with psycopg.connect(self._dsn, connect_timeout=max(1, round(self.timeout))) as conn:
                if schema is not None:
                    conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
        except psycopg.Error as e:
            raise self._error(e, "connect to")

        def configure(conn: Any) -> None:
            if schema is not None:
                conn.execute(f'SET search_path TO "{schema}"')
                conn.commit()

        self._check_connection = ConnectionPool.check_connection
        self._pool = ConnectionPool(
            self._dsn,
            min_size=min_size,
            max_size=max(max_size, min_size),
            timeout=self.timeout,
            configure=configure,
            check=self._check_pooled,
            kwargs={"connect_timeout": max(1, round(self.timeout))},
            open=False,
        )
        try:
            self._pool.open(wait=True, timeout=self.timeout)
            with self.transaction(True) as cur:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
                self.migrate(cur)
        except BaseException as e:
            self._pool.close()
            if isinstance(e, StoreError):
                raise
            if isinstance(e, Exception) and type(e).__name__ == "PoolTimeout":
                raise self._error(e, "connect to")
            raise

    def __repr__(self) -> str:
        return f"PostgresBackend({self.location!r}, schema={self.schema!r})"

    def close(self) -> None:
        """Close the pool (idempotent)."""
        if not self.closed:
            self.closed = True
            self._pool.close()

    def _check_pooled(self, conn: Any) -> None:
        """The pool's check before it hands out ``conn``. When ``conn`` is dead
        the server has probably dropped every connection (a restart, an
        administrator's ``pg_terminate_backend``): every idle one is tested at
        once, since the pool's own loop waits a second, then two, four... before
        it tries each next one."""
        try:
            self._check_connection(conn)
        except Exception:
            self._pool.check()
            raise

    @contextlib.contextmanager
    def transaction(self, write: bool) -> Iterator[Any]:
        psycopg = self._psycopg
        conn = None
        committing = False
        try:
            with self._pool.connection() as conn:
                with conn.transaction(), conn.cursor() as cur:
                    yield cur
                    committing = True
        except psycopg.Error as e:
            lost = conn is not None and conn.closed
            doing = "write to" if write else "read"
            raise self._error(e, doing, lost=lost, commit_sent=write and committing)
        except Exception as e:
            if type(e).__name__ == "PoolTimeout":
                raise self._error(e, "connect to")
            raise
        if write:
            self._calls.wrote = True

    def _error(self, e: BaseException, doing: str, *, lost: bool = False, commit_sent: bool = False) -> StoreError:
        """The `StoreError` for the driver's error ``e``: its message with every
        masked part of the DSN removed (none of it when the DSN is masked
        whole), a fix that fits its SQLSTATE, and ``e`` as the cause only when
        nothing in it (its chain included) shows a masked part."""
        if self._clear:
            detail = str(e).strip()
            for secret in self._hidden:
                detail = detail.replace(secret, _MASK)
        else:
            detail = (
                f"{type(e).__name__}; the driver's message is not shown, as it may repeat part of this DSN, "
                "which cannot be masked reliably (percent-encode '@' and '/' in a URI's password as %40 and %2F)"
            )
        where = f"the PostgreSQL memory store {self.location}"
        if lost:
            unknown = " It may or may not have been committed: check before repeating it." if commit_sent else ""
            error: StoreError = _ConnectionLost(
                f"cannot {doing} {where}: the connection was lost ({detail}).{unknown} Fix: check that the server "
                "is up and reachable; the store reconnects by itself on the next call"
            )
            error.commit_sent = commit_sent  # type: ignore[attr-defined]
        else:
            error = StoreError(f"cannot {doing} {where}: {detail}. Fix: {_fix(e)}")
        shown = "".join(traceback.format_exception(type(e), e, e.__traceback__))
        safe = self._clear and not any(secret in shown for secret in self._hidden)
        error.__cause__ = e if safe else None
        error.__suppress_context__ = True
        return error


    def call(self, method: Callable[..., Any], target: Any, args: Any, kwargs: Any, idempotent: bool) -> Any:
        """Run one public call of a store; after a lost connection once more
        when that is safe: nothing of it can have been committed, or
        ``idempotent`` (running it twice changes nothing)."""
        calls = self._calls
        if getattr(calls, "active", False):  # inside another public call: that one retries
            return method(target, *args, **kwargs)
        calls.active, calls.wrote = True, False
        try:
            try:
                return method(target, *args, **kwargs)
            except _ConnectionLost as e:
                if not idempotent and (e.commit_sent or calls.wrote):
                    raise
            calls.wrote = False
            return method(target, *args, **kwargs)
        finally:
            calls.active = False

class _ConnectionLost(StoreError):
    """The connection broke during a call (``commit_sent``: while committing,
    so whether the write went through is unknown)."""

    commit_sent = False


_CONNECT_FIX = (
    "check that the server is running and reachable at that host and port, and the user, password and database name"
)
#: (SQLSTATE prefix, fix), the first match wins.
_FIXES = (
    ("28", "check the user name and password (and the server's pg_hba.conf for this user and host)"),
    ("3D000", "create the database, or correct the database name in the DSN"),
    ("42501", "grant this user the privilege the message names, or connect as the owner of the store's tables"),
    ("3F000", "create the schema, or pass schema= of one this user may use"),
    ("42P01", "a table of the store is missing (dropped by something else?): reopen the store to create it again"),
    ("53100", "free disk space on the database server"),
    ("53200", "the server is out of memory: lower its load or give it more memory"),
    ("53300", "the server has no free connection slot: lower max_size= of the stores, or raise max_connections"),
    ("25006", "the server is a read-only standby: connect to the primary"),
    ("57P", "the server is shutting down or restarting: repeat the call once it is back"),
    ("40", "a concurrent transaction conflicted with this one: repeat the call"),
    ("08", _CONNECT_FIX),
)


def _fix(e: BaseException) -> str:
    state = getattr(e, "sqlstate", None) or ""
    for prefix, fix in _FIXES:
        if state.startswith(prefix):
            return fix
    if not state and type(e).__name__ in ("OperationalError", "PoolTimeout"):
        return _CONNECT_FIX
    return f"see the server's log for this error (SQLSTATE {state or 'none'}) and the state of the database"
