"""examples/kms_postgres.py runs as documented: on SQLite without a DSN, and on PostgreSQL."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kms_postgres.py"


def _run(*args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "SECURE_SERDE_PG_DSN"}
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_example_runs(store: str, request: pytest.FixtureRequest) -> None:
    if store == "postgres":
        out = _run("--dsn", request.getfixturevalue("postgres_url"))
        assert "Using PostgreSQL" in out
    else:
        out = _run()
        assert "using SQLite in a temporary folder instead" in out
    assert "warm(): {'DescribeKey': 1, 'GenerateDataKey': 1}" in out
    assert "60 checkpoints written and read back; KMS calls meanwhile: none" in out
    assert "after a restart: 60 checkpoints read, 40 messages in the latest" in out
    assert "KMS calls: {'DescribeKey': 1, 'Decrypt': 1}" in out
    assert "values with the codeword in clear: 0" in out
