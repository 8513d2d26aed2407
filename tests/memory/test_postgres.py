"""`PostgresStore` on the PostgreSQL server the test run starts (tests/pg_server.py,
the fixtures in conftest.py).

- DSN masking: `mask_dsn` reads a DSN the way libpq does, checked against
  libpq itself (through psycopg) on generated DSNs of both forms. A table of
  passwords holding ``#``, ``?``, ``@``, ``/``, spaces, quotes and
  backslashes, in every DSN form, never shows in ``repr(store)``,
  ``store.location`` or any `StoreError` (chained causes included), with the
  right password and with a wrong one. A DSN libpq cannot parse is refused
  without being quoted; an unreachable server's error names the DSN masked.
- Dead pooled connections are replaced, and an operation is run again after
  a dropped connection only when that cannot apply it twice."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from ctxfold.errors import InvalidInputError, StoreError, InvalidTypeError
from ctxfold.memory import AgentMessage, Memory, PostgresStore, Scope, SqliteStore, mask_dsn
from hypothesis import HealthCheck, example, given, settings, strategies as st
from memory_stores import assert_names_fix, full_error, unit

psycopg = pytest.importorskip("psycopg")

from ctxfold.memory.backend import Part  # noqa: E402
from ctxfold.memory.postgres import _MalformedDsn, _parse_dsn, _Part  # noqa: E402
from psycopg import sql  # noqa: E402
from psycopg.conninfo import conninfo_to_dict  # noqa: E402


# --------------------------------------------------------------------------------------
# DSN masking
# --------------------------------------------------------------------------------------
MASK_TABLE = [
    # URIs: the password ends at the "@" before the first "/" ("#" and "?" do not end it)
    ("postgresql://bob:pa#ss@db.example:5432/mem", "postgresql://bob:***@db.example:5432/mem"),
    ("postgresql://bob:pa?ss@db.example/mem", "postgresql://bob:***@db.example/mem"),
    ("postgres://bob:p%40ss%2Fw%20rd@h1:5432,h2:5433/mem?sslmode=require",
     "postgres://bob:***@h1:5432,h2:5433/mem?sslmode=require"),
    ("postgresql://bob@h/mem?password=pa%23ss&application_name=agent",
     "postgresql://bob@h/mem?password=***&application_name=agent"),
    ("postgresql://[::1]:5432/mem?pass%77ord=s3cret", "postgresql://[::1]:5432/mem?pass%77ord=***"),
    ("postgresql://bob:@h/mem", "postgresql://bob:***@h/mem"),
    ("postgresql://h/mem?password=a&password=b", "postgresql://h/mem?password=***&password=***"),
    # key=value: quotes and backslash escapes
    ("host=h user=bob password='pa ss\\'#?@/' dbname=mem", "host=h user=bob password='***' dbname=mem"),
    ("host=h password = pa\\ ss port=5432", "host=h password = *** port=5432"),
    ("password='x'host=h", "password='***'host=h"),
    ("host=h sslpassword=k3y options='-c search_path=x'", "host=h sslpassword=*** options='***'"),
    ("host=h passwrd=typo", "host=h passwrd=***"),  # an unknown keyword: its value could be anything
    ("dbname='host=h password=s3cret'", "dbname='***'"),  # a dbname that is itself a connection string
    ("", ""),
    # libpq reads these otherwise than meant (a raw "@" or "/" in the password): masked whole
    ("postgresql://bob:pa@ss@h/mem", "postgresql://***"),
    ("postgresql://bob:pa/ss@h/mem", "postgresql://***"),
    ("postgresql://bob:12/ss@h/mem", "postgresql://***"),
    ("host=h port=s3cret", "***"),
    # libpq refuses these, and its own message would quote them: masked whole
    ("postgresql://bob:pa%zzss@h/mem", "postgresql://***"),
    ("postgresql://h/mem?password", "postgresql://***"),
    ("host=h password=pa ss", "***"),
    ("host=h password='pa ss", "***"),
    ("POSTGRESQL://bob:s3cret@h/mem", "***"),
    (" postgresql://bob:s3cret@h/mem", "***"),
]


# --- the parser against libpq ------------------------------------------------------------
KNOWN = {o.keyword.decode() for o in psycopg.pq.Conninfo.get_defaults()}


KEYWORDS = ["host", "port", "dbname", "user", "password", "sslmode", "application_name", "options", "bogus"]


# Pieces that exercise libpq's rules: separators of both forms, quotes and escapes,
# percent-encoding (valid, cut short, forbidden), IPv6 brackets.
VALUE_PIECES = ["a", "b1", "5432", " ", "'", "\\", "\\'", "@", ":", "/", "?", "#", "&", "=", ",", "%41", "%2F", "%", "%2",
                "%zz", "%00", "[", "]", "::1", "\t", "é"]


URI_PIECES = [*VALUE_PIECES, "password=", "host=", "port=", "ssl=true", "pass%77ord=", "@h", "/db", "?", "&"]


def _value(pieces: list[str], quoted: bool) -> str:
    return "'" + "".join(pieces) + "'" if quoted else "".join(pieces)


keyword_dsns = st.lists(
    st.tuples(
        st.sampled_from(KEYWORDS),
        st.sampled_from(["=", " = ", "  =", "= "]),
        st.lists(st.sampled_from(VALUE_PIECES), max_size=5),
        st.booleans(),
    ),
    max_size=4,
).map(lambda pairs: " ".join(f"{k}{eq}{_value(v, q)}" for k, eq, v, q in pairs))


uri_dsns = st.tuples(
    st.sampled_from(["postgresql://", "postgres://"]), st.lists(st.sampled_from(URI_PIECES), max_size=10)
).map(lambda t: t[0] + "".join(t[1]))


def libpq_reading(dsn: str) -> dict[str, str] | str:
    """What libpq reads from ``dsn``, or its error message. Read from libpq's
    bytes (as `conninfo_to_dict` does), a percent-escape that is not UTF-8
    decoded as the parser here decodes it, with U+FFFD."""
    try:
        options = psycopg.pq.Conninfo.parse(dsn.encode())
    except psycopg.Error as e:
        return str(conninfo_error(dsn, e))
    return {o.keyword.decode(): o.val.decode(errors="replace") for o in options if o.val is not None}


def conninfo_error(dsn: str, error: Exception) -> Exception:
    """The error `conninfo_to_dict` raises for ``dsn`` (its message is the one compared)."""
    try:
        conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as e:
        return e
    return error


def our_reading(dsn: str) -> dict[str, str] | None:
    """What `_parse_dsn` reads, stored by libpq's rules (later keywords win; in a
    URI the hosts and ports joined by commas, empty parts not stored); None when
    it refuses the DSN."""
    try:
        parts = _parse_dsn(dsn)
    except _MalformedDsn:
        return None
    assert "".join(p.text for p in parts) == dsn, "the parts do not cover the DSN exactly"
    if not parts or parts[0].text not in ("postgresql://", "postgres://"):
        return {p.keyword: p.value for p in parts if p.keyword}
    # libpq's order for a URI: user, password, hosts, ports, dbname, then the query parameters
    query_at = next((i for i, p in enumerate(parts) if p.text == "?" and not p.keyword), len(parts))
    # (a part is stored when it is not empty as written, even if empty once decoded)
    out: dict[str, str] = {}
    hosts: list[_Part] = []
    ports: list[_Part] = []
    for p in parts[:query_at]:
        if p.keyword == "host":
            hosts.append(p)
            ports.append(_Part(""))
        elif p.keyword == "port":
            ports[-1] = p
        elif p.keyword and p.text:
            out[p.keyword] = p.value
    for keyword, found in (("host", hosts), ("port", ports)):
        if ",".join(p.text for p in found):
            out[keyword] = ",".join(p.value for p in found)
    for p in parts[query_at:]:
        if p.keyword:
            out[p.keyword] = p.value
    return out


def check_like_libpq(dsn: str) -> None:
    theirs, ours = libpq_reading(dsn), our_reading(dsn)
    unknown_keyword = isinstance(theirs, str) and ("invalid connection option" in theirs or "invalid URI query" in theirs)
    if ours is None:
        assert isinstance(theirs, str), f"{dsn!r}: refused here, libpq reads {theirs}"
    elif unknown_keyword:  # libpq names the keyword only; it is not refused here, its value is masked
        assert set(ours) - KNOWN, f"{dsn!r}: libpq says {theirs!r}, read here as {ours}"
    else:
        assert ours == theirs, f"{dsn!r}: libpq reads {theirs}, read here as {ours}"
    masked = mask_dsn(dsn)
    if isinstance(ours, dict) and "password" in ours and masked not in ("***", "postgresql://***", "postgres://***"):
        # read again, the masked DSN has the same structure with "***" as the password
        assert (our_reading(masked) or {}).get("password") == "***", f"{dsn!r} masked as {masked!r}"


# --- against the server: a role that must give its password ----------------------------
PASSWORDS = [
    "pa#ss-w0rd",
    "pa?ss=x&y",
    "p@ss@w0rd",
    "pa/ss/w0rd",
    "pa ss w0rd",
    "it's \"quoted\"",
    "back\\slash%41",
    "all #?@/ '\\\"&=,:[]%",
]


def keyword_quoted(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def dsn_forms(role: str, password: str, port: int, db: str) -> dict[str, str]:
    """The DSN forms that give libpq ``password`` as the password."""
    encoded = urllib.parse.quote(password, safe="")
    forms = {
        "uri": f"postgresql://{role}:{encoded}@127.0.0.1:{port}/{db}",
        "uri-query": f"postgresql://{role}@127.0.0.1:{port}/{db}?password={encoded}",
        "keywords": f"host=127.0.0.1 port={port} user={role} dbname={db} password={keyword_quoted(password)}",
    }
    if not set(password) & set("@/% "):  # as written: libpq reads the other characters raw in a URI
        forms["uri-raw"] = f"postgresql://{role}:{password}@127.0.0.1:{port}/{db}"
    return forms


@pytest.fixture(scope="module")
def password_role(pg_server):
    """(role, database): a role that logs in over TCP with a password only
    (scram-sha-256, by a pg_hba.conf line for it alone), owning a database."""
    role = "ctxfold_pw_" + uuid.uuid4().hex[:8]
    db = "ctxfold_pw_db_" + uuid.uuid4().hex[:8]
    hba = pg_server.data_dir / "pg_hba.conf"
    original = hba.read_text(encoding="utf-8")
    admin = pg_server.dsn("postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(sql.Identifier(role), sql.Literal("initial")))
    pg_server.create_database(db)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER DATABASE {} OWNER TO {}").format(sql.Identifier(db), sql.Identifier(role)))
        hba.write_text(f"host all {role} 127.0.0.1/32 scram-sha-256\n" + original, encoding="utf-8")
        conn.execute("SELECT pg_reload_conf()")
    deadline = time.monotonic() + 20
    while True:  # the reload is asynchronous: wait until a login without the password is refused
        try:
            psycopg.connect(f"postgresql://{role}@127.0.0.1:{pg_server.port}/{db}", connect_timeout=5).close()
        except psycopg.OperationalError:
            break
        assert time.monotonic() < deadline, "the server did not start asking for the password"
        time.sleep(0.05)
    try:
        yield role, db
    finally:
        hba.write_text(original, encoding="utf-8")
        pg_server.drop_database(db)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("SELECT pg_reload_conf()")
            conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def assert_never_shown(secrets: list[str], *texts: str) -> None:
    for secret in secrets:
        for variant in {secret, urllib.parse.quote(secret, safe=""), keyword_quoted(secret)}:
            for t in texts:
                assert variant not in t, f"{variant!r} shows in: {t}"


# --------------------------------------------------------------------------------------
# Dead pooled connections
# --------------------------------------------------------------------------------------
def database_of(dsn: str) -> str:
    return dsn.rsplit("/", 1)[1].split("?", 1)[0]


def terminate(pg_server, *, database: str | None = None, pid: int | None = None) -> int:
    """Terminate the backends of ``database`` (or the one ``pid``) from another
    connection, waiting until each is gone; how many."""
    with psycopg.connect(pg_server.dsn("postgres"), autocommit=True) as conn:
        if pid is not None:
            return int(bool(conn.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,)).fetchone()[0]))
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        ).fetchall()
    return sum(bool(r[0]) for r in rows)


def backends(pg_server, database: str) -> int:
    with psycopg.connect(pg_server.dsn("postgres"), autocommit=True) as conn:
        return int(conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", (database,)).fetchone()[0])


def lost_connections(store: PostgresStore) -> list[bool]:
    """Record every lost connection the store reports (True: while committing)."""
    seen: list[bool] = []
    real = store.backend._error

    def error(e, doing, *, lost=False, commit_sent=False):
        if lost:
            seen.append(commit_sent)
        return real(e, doing, lost=lost, commit_sent=commit_sent)

    store.backend._error = error  # type: ignore[method-assign]
    return seen


CALLS: list[tuple[str, Callable[[PostgresStore, Scope, int], Any]]] = [
    ("add", lambda s, sc, i: s.add(Memory(content=f"memory {i}"), scope=sc, embedding=unit(i))),
    ("count", lambda s, sc, i: s.memories.count(scope=sc)),
    ("search", lambda s, sc, i: s.search(unit(i), scope=sc, k=3)),
    ("append_messages", lambda s, sc, i: s.chat.extend([{"role": "user", "content": f"message {i}"}], scope=sc)),
    ("send_message", lambda s, sc, i: s.agent_messages.send(AgentMessage(source="a", target="b", content=f"m{i}"), scope=sc)),
    ("record_application", lambda s, sc, i: s.memories.record_application(s.memories.all(scope=sc)[0].id, scope=sc, success=True)),
]


@contextlib.contextmanager
def terminated_while_committing(store: PostgresStore, pg_server) -> Any:
    """The next write transaction loses its connection after its last statement,
    as its COMMIT is sent: whether it committed is unknown to the client."""
    real = store.backend.transaction
    armed = [True]

    @contextlib.contextmanager
    def transaction(write: bool) -> Any:
        with real(write) as cur:
            yield cur
            if write and armed[0]:
                armed[0] = False
                terminate(pg_server, pid=cur.connection.info.backend_pid)

    store.backend.transaction = transaction  # type: ignore[method-assign]
    try:
        yield armed
    finally:
        del store.backend.transaction


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


SECRET = "Pa55-word_that-must-not-leak"


def test_unreachable_postgres_masks_the_password() -> None:
    pytest.importorskip("psycopg")
    for dsn in ("postgresql://bob:hunter2@127.0.0.1:1/db", "host=127.0.0.1 port=1 user=bob password=hunter2 dbname=x"):
        with pytest.raises(StoreError) as e:
            PostgresStore(dsn, timeout=2)
        assert "hunter2" not in str(e.value) and "***" in str(e.value) and "Fix" in str(e.value)
    assert mask_dsn("postgres://u:p%40ss@h/db") == "postgres://u:***@h/db"


@pytest.mark.parametrize(("dsn", "masked"), MASK_TABLE)
def test_mask_dsn(dsn: str, masked: str) -> None:
    assert mask_dsn(dsn) == masked


def test_mask_dsn_refuses_a_non_str() -> None:
    with pytest.raises(InvalidTypeError, match="dsn"):
        mask_dsn(b"host=h")  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dsn=keyword_dsns)
def test_keyword_dsns_are_read_as_libpq_reads_them(dsn: str) -> None:
    check_like_libpq(dsn)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dsn=uri_dsns)
@example(dsn="postgresql://%b1")  # a percent-escape that is not UTF-8
@example(dsn="postgresql://u:%b1@h/db")
@example(dsn="postgresql://?password='")  # a quote in a URI is part of the value
def test_uri_dsns_are_read_as_libpq_reads_them(dsn: str) -> None:
    check_like_libpq(dsn)


@pytest.mark.parametrize(("dsn", "masked"), MASK_TABLE)
def test_the_mask_table_is_read_as_libpq_reads_it(dsn: str, masked: str) -> None:
    check_like_libpq(dsn)


@pytest.mark.parametrize("password", PASSWORDS)
def test_the_password_never_shows(pg_server, password_role, password: str) -> None:
    role, db = password_role
    with psycopg.connect(pg_server.dsn("postgres"), autocommit=True) as conn:
        conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(role), sql.Literal(password)))
    wrong = "wrong-" + password
    for form, dsn in dsn_forms(role, password, pg_server.port, db).items():
        # the right password: libpq reads it as meant (the login works); it shows nowhere
        schema = "s_" + uuid.uuid4().hex[:12]
        with PostgresStore(dsn, schema=schema, timeout=10) as store:
            assert "127.0.0.1" in store.location and str(pg_server.port) in store.location, store.location
            assert "***" in store.location
            scope = Scope(user_id="u")
            store.add(Memory(content="a memory"), scope=scope, embedding=unit(1))
            with pytest.raises(StoreError) as dimension:  # an error of the store
                store.add(Memory(content="another"), scope=scope, embedding=unit(2, 8))
            with psycopg.connect(pg_server.dsn(db), autocommit=True) as conn:
                conn.execute(sql.SQL("DROP TABLE {}.memories").format(sql.Identifier(schema)))
            with pytest.raises(StoreError) as driver:  # an error of the server
                store.memories.count(scope=scope)
            assert "missing" in str(driver.value) and store.location in str(driver.value)
            assert_never_shown(
                [password], repr(store), store.location, full_error(dimension.value), full_error(driver.value)
            )
        # a wrong password: refused, and neither shows
        with pytest.raises(StoreError) as refused:
            PostgresStore(dsn_forms(role, wrong, pg_server.port, db)[form], timeout=10)
        message = str(refused.value)
        assert "127.0.0.1" in message and "password" in message and "Fix" in message, message
        assert_never_shown([password, wrong], message, full_error(refused.value), repr(refused.value.args))


@pytest.mark.parametrize("password", ["Zq7@Xw8/Kv9", "90817/Qs9x"])
def test_a_dsn_libpq_misreads_is_masked_whole(pg_server, password_role, password: str) -> None:
    """An unencoded "@" or "/" in a URI's password: libpq reads part of it as
    the host, port or database, so the DSN and the driver's messages are hidden."""
    role, db = password_role
    dsn = f"postgresql://{role}:{password}@127.0.0.1:{pg_server.port}/{db}"
    with pytest.raises(StoreError) as info:
        PostgresStore(dsn, timeout=5)
    assert "postgresql://***" in str(info.value) and "%40" in str(info.value)
    for fragment in (password, *password.split("/"), *password.split("@")):
        assert fragment not in full_error(info.value).replace("postgresql://***", "")


@pytest.mark.parametrize(
    "dsn",
    ["host=127.0.0.1 password=s3cret word", "postgresql://bob:s3%zzcret@127.0.0.1/db", "password='s3cret",
     "host=127.0.0.1 passwords3cret", "postgresql://h/db?password=s3cret=x"],
)
def test_a_dsn_libpq_refuses_is_refused_unquoted(dsn: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        PostgresStore(dsn, timeout=2)
    assert "dsn" in str(info.value) and "Fix" in str(info.value)
    assert "s3cret" not in full_error(info.value) and "s3" not in str(info.value)


@pytest.mark.parametrize("threads", [1, 4])
def test_terminated_pool_connections_are_replaced(pg_server, pg_fresh_dsn, threads: int) -> None:
    """The issue's probe: the server terminates all 8 pooled connections; the
    next adds (one after another, or from 4 threads at once) all succeed, and
    without waiting out the pool's backoff."""
    database = database_of(pg_fresh_dsn)
    scope = Scope(user_id="ops")
    with PostgresStore(pg_fresh_dsn, min_size=8, max_size=8, timeout=10) as store:
        store.add(Memory(content="before the termination"), scope=scope, embedding=unit(0))
        assert backends(pg_server, database) == 8
        assert terminate(pg_server, database=database) == 8
        errors: list[BaseException] = []

        def add(offset: int) -> None:
            try:
                for i in range(10):
                    store.add(Memory(content=f"after the termination {offset}-{i}"), scope=scope,
                              embedding=unit(1000 * offset + i + 1))
            except BaseException as e:
                errors.append(e)

        t0 = time.monotonic()
        workers = [threading.Thread(target=add, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        elapsed = time.monotonic() - t0
        assert not errors, [str(e) for e in errors]
        assert elapsed < 8, f"{elapsed:.1f} s: the adds waited for the pool's backoff"
        assert store.memories.count(scope=scope) == 1 + 10 * threads
        assert len(store.search(unit(1), scope=scope, k=100)) == 1 + 10 * threads


def test_a_connection_lost_after_the_check_is_run_again(pg_server, pg_fresh_dsn) -> None:
    """A connection dies between the pool's check and its use: the call fails
    on it before committing anything, so it runs again once on a fresh one,
    reads and writes alike, and every write happens once."""
    scope = Scope(user_id="ops")
    with PostgresStore(pg_fresh_dsn, max_size=2, timeout=10) as store:
        store.add(Memory(content="the first memory"), scope=scope, embedding=unit(0))
        lost = lost_connections(store)
        armed = [False]
        real_check = store.backend._check_connection

        def check_then_terminate(conn: Any) -> None:
            real_check(conn)
            if armed[0]:
                armed[0] = False
                assert terminate(pg_server, pid=conn.info.backend_pid) == 1

        store.backend._check_connection = check_then_terminate  # type: ignore[method-assign]
        for i, (name, call) in enumerate(CALLS, start=1):
            armed[0] = True
            lost.clear()
            call(store, scope, i)
            assert not armed[0], f"{name}: no connection was handed out"
            assert lost == [False], f"{name}: expected one connection lost before committing, got {lost}"
        assert store.memories.count(scope=scope) == 2
        assert [m.content for m in store.chat.recent(scope=scope)] == ["message 4"]
        assert len(store.agent_messages.query_by_target("b", scope=scope)) == 1
        assert store.memories.all(scope=scope)[0].effectiveness.applications == 1


@pytest.mark.parametrize(("name", "repeated"), [("add", True), ("append_messages", False), ("send_message", False),
                                                ("record_application", False)])
def test_a_connection_lost_while_committing(pg_server, pg_fresh_dsn, name: str, repeated: bool) -> None:
    """Only a call that changes nothing when repeated runs again; any other
    raises `StoreError` saying that the write may or may not have been committed."""
    scope = Scope(user_id="ops")
    call = dict(CALLS)[name]
    with PostgresStore(pg_fresh_dsn, max_size=2, timeout=10) as store:
        store.add(Memory(content="the first memory"), scope=scope, embedding=unit(0))
        lost = lost_connections(store)
        with terminated_while_committing(store, pg_server) as armed:
            if repeated:
                call(store, scope, 1)
            else:
                with pytest.raises(StoreError, match="may or may not have been committed") as info:
                    call(store, scope, 1)
                assert store.location in str(info.value) and "Fix" in str(info.value)
            assert not armed[0]
        assert lost == [True]
        # the terminated COMMIT never reached the server: what ran again is there once, the rest not at all
        assert store.memories.count(scope=scope) == (2 if name == "add" else 1)
        assert store.chat.recent(scope=scope) == []
        assert store.agent_messages.query_by_target("b", scope=scope) == []
        assert store.memories.all(scope=scope)[0].effectiveness.applications == 0


def test_the_idempotent_calls_exist() -> None:
    """Each store of one concern names only its own public methods as safe to
    run twice, and these are the writes that change nothing when repeated."""
    with SqliteStore(":memory:") as store:
        parts = [store, *(v for v in vars(store).values() if isinstance(v, Part))]
    for part in parts:
        cls = type(part)
        public = {n for n in dir(cls) if not n.startswith("_")}
        assert cls.idempotent <= public, (cls.__name__, sorted(cls.idempotent - public))
    assert {f"{type(p).__name__}.{n}" for p in parts for n in type(p).idempotent} == {
        "SqliteStore.add", "Memories.add", "Memories.add_many", "Memories.supersede", "Memories.import_yaml",
        "Memories.export_yaml", "WorkingMemories.set", "WorkingMemories.update", "Episodes.add",
        "Caches.put_compaction", "Caches.put_summary", "Caches.put_embeddings", "Caches.memo_set",
        "Caches.memo_set_many",
    }


@pytest.mark.parametrize("form", ["url", "key-value"])
def test_unreachable_postgres(form: str) -> None:
    pytest.importorskip("psycopg")
    from ctxfold.memory import PostgresStore

    port = _unused_port()  # nothing listens there: connection refused, at once and offline
    if form == "url":
        dsn = f"postgresql://agent:{SECRET}@127.0.0.1:{port}/fleet"
    else:
        dsn = f"host=127.0.0.1 port={port} user=agent password={SECRET} dbname=fleet"
    t0 = time.monotonic()
    with pytest.raises(StoreError) as info:
        PostgresStore(dsn, timeout=3)
    assert time.monotonic() - t0 < 20
    message = str(info.value)
    assert "127.0.0.1" in message and str(port) in message, message
    assert SECRET not in full_error(info.value), "the password leaks into the error (or its chained cause)"
    assert SECRET not in repr(info.value.args)
    assert_names_fix(message)
