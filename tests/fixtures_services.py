"""Real backing services for integration tests: a throwaway PostgreSQL cluster and a moto KMS.

Loaded from ``tests/conftest.py`` via ``pytest_plugins``. These fixtures never skip: a missing
PostgreSQL installation is a hard failure, because CI is expected to provide it. The cluster
itself is `throwaway_cluster`, a plain context manager, so the benchmarks start theirs the same
way.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import psycopg
import pytest
from psycopg import sql
from psycopg.rows import DictRow, dict_row

_INSTALL_HINT = "PostgreSQL server binaries are required: run `apt-get install -y postgresql`."
_REQUIRED_BINARIES = ("initdb", "pg_ctl", "postgres", "pg_dump")
_STARTUP_TIMEOUT_S = 30.0


class ClusterError(Exception):
    """The throwaway cluster could not be set up; the message says which step failed and why."""


@dataclass(frozen=True)
class PostgresServer:
    host: str
    port: int
    user: str
    bindir: Path

    def url(self, dbname: str = "postgres") -> str:
        """A libpq URL for ``dbname`` on this server (TCP on loopback, trust auth)."""
        return f"postgresql://{self.user}@{self.host}:{self.port}/{dbname}?sslmode=disable"

    @property
    def conninfo(self) -> str:
        """Base conninfo, pointing at the maintenance database ``postgres``."""
        return self.url("postgres")


def _clean_env() -> dict[str, str]:
    """The current environment minus PG* variables that could redirect the client tools."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PG")}


def _has_binaries(bindir: Path) -> bool:
    return all((bindir / name).is_file() for name in _REQUIRED_BINARIES)


def find_bindir() -> Path:
    """Locate the PostgreSQL server bindir, preferring ``pg_config --bindir``."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        proc = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        if proc.returncode == 0 and proc.stdout.strip():
            candidates.append(Path(proc.stdout.strip()))

    def version_key(path: str) -> tuple[int, str]:
        version = Path(path).parent.name
        return (int(version) if version.isdigit() else -1, version)

    candidates += [
        Path(p)
        for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version_key, reverse=True)
    ]
    for bindir in candidates:
        if _has_binaries(bindir):
            return bindir
    raise ClusterError(
        f"No PostgreSQL bindir with {', '.join(_REQUIRED_BINARIES)} found "
        f"(looked in: {[str(c) for c in candidates] or 'nothing'}). {_INSTALL_HINT}"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_as_owner(cmd: list[str], as_postgres: bool) -> subprocess.CompletedProcess[str]:
    """Run a server-side command, as the ``postgres`` OS user when we are root."""
    full = ["runuser", "-u", "postgres", "--", *cmd] if as_postgres else cmd
    return subprocess.run(full, capture_output=True, text=True, check=False, env=_clean_env())


def _read_log(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        return f"<could not read {path}: {exc}>"


def _postgres_os_user() -> pwd.struct_passwd:
    """The ``postgres`` OS user, which runs the server when we are root (initdb refuses root)."""
    if shutil.which("runuser") is None:
        raise ClusterError("Running as root but `runuser` is missing (util-linux).")
    try:
        return pwd.getpwnam("postgres")
    except KeyError:
        raise ClusterError(
            f"Running as root but no `postgres` OS user exists. {_INSTALL_HINT}"
        ) from None


@contextlib.contextmanager
def throwaway_cluster(prefix: str = "secure-serde-pg-") -> Iterator[PostgresServer]:
    """A private PostgreSQL cluster on 127.0.0.1:<free port>, stopped and deleted afterwards.

    Trust authentication and no durability (fsync off): for tests and benchmarks only. Raises
    `ClusterError`, with the server log, when a step of starting it fails.
    """
    bindir = find_bindir()
    as_postgres = os.geteuid() == 0
    owner = _postgres_os_user() if as_postgres else None
    base = Path(tempfile.mkdtemp(prefix=prefix))
    if owner is not None:
        os.chown(base, owner.pw_uid, owner.pw_gid)
    data, log = base / "data", base / "server.log"
    server = PostgresServer(host="127.0.0.1", port=_free_port(), user="postgres", bindir=bindir)
    pg_ctl = str(bindir / "pg_ctl")

    def fail(step: str, proc: subprocess.CompletedProcess[str] | None = None) -> NoReturn:
        out = f"\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}" if proc else ""
        raise ClusterError(f"PostgreSQL {step} failed.{out}\nserver log:\n{_read_log(log)}")

    try:
        initdb = [str(bindir / "initdb"), "-D", str(data), "-U", server.user, "-A", "trust"]
        proc = _run_as_owner([*initdb, "-E", "UTF8", "--no-locale", "--no-sync"], as_postgres)
        if proc.returncode != 0:
            fail("initdb", proc)
        with (data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"\nlisten_addresses = '127.0.0.1'\nport = {server.port}\n"
                f"unix_socket_directories = '{base}'\nfsync = off\nsynchronous_commit = off\n"
                "full_page_writes = off\nmax_connections = 100\n"
            )
        proc = _run_as_owner(
            [pg_ctl, "-D", str(data), "-l", str(log), "-w", "-t", "30", "start"], as_postgres
        )
        if proc.returncode != 0:
            fail("pg_ctl start", proc)
        deadline = time.monotonic() + _STARTUP_TIMEOUT_S
        while True:
            try:
                with psycopg.connect(server.conninfo, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                break
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    fail(f"startup (not ready after {_STARTUP_TIMEOUT_S:.0f}s)")
                time.sleep(0.2)
        yield server
    finally:
        # Also after a failed start: pg_ctl stop on a cluster that never ran just says so.
        _run_as_owner([pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop"], as_postgres)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """Start a private PostgreSQL cluster on 127.0.0.1:<free port> for the whole session."""
    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(throwaway_cluster())
        except ClusterError as exc:
            pytest.fail(str(exc), pytrace=False)
        yield server


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A fresh, uniquely named database for one test; dropped (forcefully) afterwards."""
    dbname = f"test_{uuid.uuid4().hex[:16]}"
    ident = sql.Identifier(dbname)
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(ident))
    try:
        yield postgres_server.url(dbname)
    finally:
        with psycopg.connect(postgres_server.conninfo, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (dbname,),
            )
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))


def saver_connection(url: str) -> psycopg.Connection[DictRow]:
    """A connection as langgraph's PostgreSQL savers want one: autocommit, dict rows, and no
    server-side prepared statements (the savers' own ``from_conn_string`` sets the same)."""
    return psycopg.Connection.connect(
        url, autocommit=True, prepare_threshold=0, row_factory=dict_row
    )


def pg_dump(server: PostgresServer, url: str) -> bytes:
    """Plain-format ``pg_dump`` of the database at ``url``, using the cluster's own binary."""
    proc = subprocess.run(
        [str(server.bindir / "pg_dump"), "--format=plain", "--no-owner", f"--dbname={url}"],
        capture_output=True,
        check=False,
        env=_clean_env(),
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"pg_dump failed ({proc.returncode}): {proc.stderr.decode(errors='replace')}"
        )
    return proc.stdout


@pytest.fixture(scope="session")
def kms_endpoint() -> Iterator[str]:
    """URL of a moto server (KMS et al.) running in a background thread on a free port."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def kms_client(kms_endpoint: str) -> Any:
    """A boto3 KMS client talking HTTP to the moto server, with explicit dummy credentials."""
    import boto3

    return boto3.client(
        "kms",
        region_name="us-east-1",
        endpoint_url=kms_endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
