"""A throwaway PostgreSQL server for the memory tests.

`PgServer` runs the system's `initdb` and `pg_ctl` (found in PATH or in
/usr/lib/postgresql/*/bin) on a fresh data directory inside a temporary
directory, listening on a free loopback port with its unix socket inside that
same directory, trust authentication for local and loopback connections. The
server uses PostgreSQL's default durability settings (fsync, synchronous_commit
and full_page_writes all on): the tests that kill writers mid-flight are then
as meaningful against PostgreSQL as they are against a production server.
Only `initdb --no-sync` is used, which skips flushing the freshly created
template files to disk once; it changes nothing about how the running server
commits.

initdb refuses to run as root, so when the effective uid is 0 the server
commands run as the `postgres` system user (`runuser -u postgres --`) and the
temporary directory is chowned to it; otherwise they run as the current user.

    with PgServer() as server:
        dsn = server.dsn("postgres")

`stop()` shuts the server down (`pg_ctl stop -m fast`) and removes the directory.
Run `python tests/pg_server.py` to start one by hand and print its DSN.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["PgServer", "PgServerError", "find_pg_bin"]


class PgServerError(RuntimeError):
    """The test server could not be started; the message says why."""


def _version_key(path: str) -> tuple[int, ...]:
    m = re.search(r"/postgresql/([0-9.]+)/bin", path)
    return tuple(int(p) for p in m.group(1).split(".") if p) if m else (0,)


def find_pg_bin() -> Path | None:
    """The directory holding `initdb`, `pg_ctl` and `postgres`, or None.

    PATH first (where the server binaries sit in most images and on macOS),
    then the newest Debian/Ubuntu versioned directory /usr/lib/postgresql/N/bin
    (the `postgresql` package does not put the server binaries in PATH)."""
    candidates: list[Path] = []
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(Path(initdb).resolve().parent)
        candidates.append(Path(initdb).parent)
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True):
        candidates.append(Path(d))
    for d in candidates:
        if all(os.access(d / exe, os.X_OK) for exe in ("initdb", "pg_ctl", "postgres")):
            return d
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PgServer:
    """One PostgreSQL server in a temporary directory (see the module docstring)."""

    def __init__(self, bin_dir: Path | None = None, start_timeout: float = 60.0) -> None:
        self.bin_dir = bin_dir or find_pg_bin()
        self.start_timeout = start_timeout
        self.tmp: Path | None = None
        self.port: int | None = None
        self.user = "postgres"  # the database superuser created by initdb -U
        self._as_postgres = os.geteuid() == 0

    # -- paths -----------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        assert self.tmp is not None
        return self.tmp / "data"

    @property
    def socket_dir(self) -> Path:
        assert self.tmp is not None
        return self.tmp / "sock"

    @property
    def log_file(self) -> Path:
        assert self.tmp is not None
        return self.tmp / "server.log"

    # -- process helpers ---------------------------------------------------------
    def _cmd(self, exe: str, *args: str) -> list[str]:
        assert self.bin_dir is not None
        cmd = [str(self.bin_dir / exe), *args]
        if self._as_postgres:
            runuser = shutil.which("runuser") or "/usr/sbin/runuser"
            cmd = [runuser, "-u", "postgres", "--", *cmd]
        return cmd

    def _run(self, exe: str, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["LC_ALL"] = "C"
        env["LANG"] = "C"
        try:
            return subprocess.run(
                self._cmd(exe, *args),
                cwd=self.tmp,
                env=env,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise PgServerError(f"{exe} {' '.join(args)}: {e}") from e

    def _log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> PgServer:
        if self.bin_dir is None:
            raise PgServerError(
                "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found in PATH nor in "
                "/usr/lib/postgresql/*/bin; install them with `apt-get install postgresql` "
                "(.ci/run does this in CI)"
            )
        if self._as_postgres:
            try:
                import pwd

                pw = pwd.getpwnam("postgres")
            except KeyError as e:
                raise PgServerError(
                    "running as root and there is no `postgres` system user to run initdb as "
                    "(initdb refuses root); install the postgresql package or run as a normal user"
                ) from e
        self.tmp = Path(tempfile.mkdtemp(prefix="ctxfold-pg-"))
        try:
            self.socket_dir.mkdir()
            if self._as_postgres:
                for p in (self.tmp, self.socket_dir):
                    os.chown(p, pw.pw_uid, pw.pw_gid)
            self._initdb()
            last_error = ""
            for _ in range(3):  # the free port may be taken between probe and bind: retry
                self.port = _free_port()
                r = self._run(
                    "pg_ctl",
                    "start",
                    "-D", str(self.data_dir),
                    "-l", str(self.log_file),
                    "-w", "-t", str(int(self.start_timeout)),
                    "-o", (
                        f"-p {self.port} -k {self.socket_dir} "
                        "-c listen_addresses=127.0.0.1 "
                        "-c max_connections=200 "  # several stores, each with its own pool
                        "-c logging_collector=off"
                    ),
                    timeout=self.start_timeout + 30,
                )
                if r.returncode == 0:
                    return self
                last_error = (r.stdout + r.stderr).strip()
                if "could not bind" not in self._log_tail() and "in use" not in self._log_tail():
                    break
            raise PgServerError(f"pg_ctl start failed: {last_error}\n--- server log ---\n{self._log_tail()}")
        except BaseException:
            self.stop()
            raise

    def _initdb(self) -> None:
        r = self._run(
            "initdb",
            "-D", str(self.data_dir),
            "-U", self.user,
            "--auth-local=trust",
            "--auth-host=trust",
            "--encoding=UTF8",
            "--no-locale",
            "--no-sync",  # initdb's own one-off flush of the template files; see module docstring
            "--no-instructions",
        )
        if r.returncode != 0:
            raise PgServerError(f"initdb failed (exit {r.returncode}): {(r.stdout + r.stderr).strip()}")
        # trust for loopback only (initdb's default pg_hba has 127.0.0.1/32 and ::1/128 host
        # lines plus local socket lines, which --auth-host/--auth-local set to trust); the server
        # listens on 127.0.0.1 only.

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its directory. Safe to call twice."""
        if self.tmp is None:
            return
        try:
            if (self.data_dir / "postmaster.pid").exists():
                r = self._run("pg_ctl", "stop", "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "30", timeout=60)
                if r.returncode != 0:
                    self._run("pg_ctl", "stop", "-D", str(self.data_dir), "-m", "immediate", "-w", timeout=60)
        except PgServerError:
            pass
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def __enter__(self) -> PgServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- connecting --------------------------------------------------------------
    def dsn(self, dbname: str = "postgres", password: str | None = None) -> str:
        """A libpq URI for `dbname` over TCP on the loopback port."""
        assert self.port is not None, "server not started"
        auth = f"{self.user}:{password}" if password else self.user
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{dbname}"

    def create_database(self, name: str) -> str:
        """CREATE DATABASE `name` (a plain identifier) and return its DSN."""
        import psycopg

        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            raise ValueError(f"database name {name!r}: use lower-case letters, digits and _")
        with psycopg.connect(self.dsn("postgres"), autocommit=True, connect_timeout=10) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.dsn(name)

    def drop_database(self, name: str) -> None:
        """DROP DATABASE `name`, disconnecting whatever is still connected to it."""
        import psycopg

        with psycopg.connect(self.dsn("postgres"), autocommit=True, connect_timeout=10) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


if __name__ == "__main__":
    t0 = time.perf_counter()
    with PgServer() as server:
        print(f"started in {time.perf_counter() - t0:.2f}s: {server.dsn()}  (dir {server.tmp})")
        if os.isatty(0):
            input("press Enter to stop ")
    print("stopped")
