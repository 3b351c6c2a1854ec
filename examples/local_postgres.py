"""A throwaway local PostgreSQL for trying the PostgreSQL examples, started the way the tests do.

It needs the PostgreSQL server binaries (Debian/Ubuntu: ``apt-get install -y postgresql``;
macOS: ``brew install postgresql``), and no running service: it makes a private cluster in a
temporary folder, listening on 127.0.0.1 only, on a free port, with trust authentication, and
deletes it all when it stops. It is for trying things out; never put real data in it.

Either keep it running and use the printed DSN from another terminal::

    .venv/bin/python examples/local_postgres.py
    # SECURE_SERDE_PG_DSN=postgresql://postgres@127.0.0.1:PORT/postgres?sslmode=disable
    # (Ctrl-C stops and deletes the cluster)

or run one command against it, with ``SECURE_SERDE_PG_DSN`` set, and stop afterwards::

    .venv/bin/python examples/local_postgres.py --run \
        .venv/bin/python examples/postgres_production.py
"""

from __future__ import annotations

import argparse
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

DSN_ENV_VAR = "SECURE_SERDE_PG_DSN"
BINARIES = ("initdb", "pg_ctl", "postgres")


def find_bindir() -> Path | None:
    """``pg_config --bindir`` if it has the server binaries, else Debian's versioned folders."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        done = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=False)
        if done.returncode == 0 and done.stdout.strip():
            candidates.append(Path(done.stdout.strip()))
    candidates += [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    for bindir in candidates:
        if all((bindir / name).is_file() for name in BINARIES):
            return bindir
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LocalPostgres:
    """One private cluster: `start` it, use `dsn`, `stop` it (which deletes its folder)."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.port = free_port()
        self.base = Path(tempfile.mkdtemp(prefix="secure-serde-local-pg-"))
        self.data = self.base / "data"
        # initdb refuses to run as root: run the server as the `postgres` OS user then.
        self._as_postgres = os.geteuid() == 0

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres?sslmode=disable"

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self._as_postgres else []
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        done = subprocess.run(
            [*prefix, *command], capture_output=True, text=True, check=False, env=env
        )
        if done.returncode != 0:
            raise SystemExit(f"{Path(command[0]).name} failed:\n{done.stdout}{done.stderr}")

    def start(self) -> None:
        if self._as_postgres:
            owner = pwd.getpwnam("postgres")
            os.chown(self.base, owner.pw_uid, owner.pw_gid)
        initdb = str(self.bindir / "initdb")
        self._run(initdb, "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8")
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"\nlisten_addresses = '127.0.0.1'\nport = {self.port}\n"
                f"unix_socket_directories = '{self.base}'\n"
            )
        log = str(self.base / "server.log")
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", log, "-w", "start")

    def stop(self) -> None:
        try:
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "stop")
        finally:
            shutil.rmtree(self.base, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--run",
        nargs=argparse.REMAINDER,
        help=f"run this command with {DSN_ENV_VAR} set, then stop the cluster",
    )
    args = parser.parse_args(argv)
    bindir = find_bindir()
    if bindir is None:
        print(
            "No PostgreSQL server binaries found (initdb, pg_ctl). Install them, e.g."
            " 'apt-get install -y postgresql' or 'brew install postgresql'.",
            file=sys.stderr,
        )
        return 2
    cluster = LocalPostgres(bindir)
    cluster.start()
    try:
        if args.run:
            env = {**os.environ, DSN_ENV_VAR: cluster.dsn}
            return subprocess.run(args.run, env=env, check=False).returncode
        print(f"{DSN_ENV_VAR}={cluster.dsn}", flush=True)
        print("Ctrl-C stops the cluster and deletes it.", file=sys.stderr, flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        signal.pause()
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
