"""The PostgreSQL examples as a newcomer runs them: with no server, and with a throwaway one."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
    env.pop("SECURE_SERDE_PG_DSN", None)
    return env


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_production_example_fails_fast_in_one_line_without_a_server() -> None:
    dsn = f"postgresql://app:hunter2-secret@127.0.0.1:{_closed_port()}/app"
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "postgres_production.py"), dsn],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("No PostgreSQL server answered at 127.0.0.1:")
    assert "local_postgres.py" in lines[0]
    assert "hunter2-secret" not in done.stdout + done.stderr
    # That one line comes from the example's own probe, before any pool is opened: it is
    # what keeps the failure from waiting out the pool's 10 s timeout (or a traceback).


def _clusters() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("secure-serde-local-pg-*"))


def test_local_postgres_runs_the_production_example() -> None:
    before = _clusters()
    done = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / "local_postgres.py"),
            "--run",
            sys.executable,
            str(EXAMPLES / "postgres_production.py"),
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rows whose plaintext metadata holds the API key: 0" in done.stdout
    # The throwaway cluster is stopped and deleted.
    assert _clusters() - before == set()
