"""``secure-serde rewrap STORE`` on a store SealedSaver sealed: the report, and SIGKILL mid-pass.

The command runs as an operator runs it: a separate process, keys from a keyring file (B
primary, A still decrypting). A kill at any moment leaves a store that reads exactly as before
under A and B; a rerun finishes the job, after which key B alone reads it.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.passes.progress_support import progress_lines
from tests.passes.rewrap_support import KEY_A, KEY_B, KeyEnv, cli_command, run_cli
from tests.passes.sealed_support import (
    audit,
    digest,
    factory,
    observe,
    populate,
    raw_rows,
    serde_a,
    serde_b,
    serde_rotated,
)

KEYS = KeyEnv(env_key=None, keyring={"primary": "b", "keys": {"a": KEY_A, "b": KEY_B}})
TAMPERED = 25


def _written(tmp_path: Path, turns: int = 2) -> tuple[Path, dict[str, Any]]:
    path = tmp_path / "sealed.sqlite"
    populate(factory(path), turns=turns)
    return path, observe(factory(path), serde_a())


def _tamper_writes(path: Path, count: int) -> set[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, value FROM writes"
            " WHERE thread_id != '__secure_serde_store__' ORDER BY 1, 2, 3, 4, 5 LIMIT ?",
            (count,),
        ).fetchall()
        for row in rows:
            value = bytearray(row[5])
            value[-1] ^= 1
            conn.execute(
                "UPDATE writes SET value = ? WHERE thread_id = ? AND checkpoint_ns = ?"
                " AND checkpoint_id = ? AND task_id = ? AND idx = ?",
                (bytes(value), *row[:5]),
            )
        conn.commit()
    finally:
        conn.close()
    assert len(rows) == count
    return {tuple(row[:5]) for row in rows}


def test_text_lists_twenty_failures_and_json_lists_all(tmp_path: Path) -> None:
    path, _ = _written(tmp_path)
    bad = _tamper_writes(path, TAMPERED)

    text = run_cli(KEYS, tmp_path, "rewrap", str(path), "--no-progress")
    assert text.returncode == 1, text.stderr
    listed = [line for line in text.stdout.splitlines() if line.startswith("  writes ")]
    assert len(listed) == 20
    assert f"... and {TAMPERED - 20} more (--json lists them)" in text.stdout
    assert "DecryptionError" in text.stdout or "BindingError" in text.stdout
    assert f"{TAMPERED:,} row(s) could not be rewrapped" in text.stderr

    rerun = run_cli(KEYS, tmp_path, "rewrap", str(path), "--json", "--no-progress")
    assert rerun.returncode == 1, rerun.stderr
    report = json.loads(rerun.stdout)
    assert report["failure_count"] == TAMPERED
    assert report["rewrapped"] == 0  # the first run moved everything else
    keys = {
        tuple(
            f["key"][c] for c in ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx")
        )
        for f in report["failures"]
    }
    assert keys == bad
    assert {f["table"] for f in report["failures"]} == {"writes"}


def test_dry_run_says_would_and_writes_nothing(tmp_path: Path) -> None:
    path, _ = _written(tmp_path)
    rows = digest(raw_rows(path))
    result = run_cli(KEYS, tmp_path, "rewrap", str(path), "--dry-run", "--no-progress")
    assert result.returncode == 0, result.stderr
    assert "would rewrap" in result.stdout
    assert digest(raw_rows(path)) == rows


def _kill_mid_pass(path: Path, tmp_path: Path, jitter: float) -> bool:
    """Run the command, SIGKILL it within the batch after its first rewrap; True if killed.

    The moment is chosen by the work the command reports (a progress line with a row
    rewrapped and rows left), then ``jitter`` of one batch's time at its own pace.
    """
    proc = subprocess.Popen(
        cli_command("rewrap", str(path), "--batch-size", "1", "--progress"),
        env=KEYS.environ(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    try:
        seen = None
        for seen in progress_lines(proc.stderr.fileno()):
            if seen.rewrapped or seen.finished:
                break
        if seen is not None and not seen.finished:
            time.sleep(jitter / max(seen.rate, 1))
        killed = proc.poll() is None
        if killed:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        proc.stderr.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return killed and proc.returncode == -signal.SIGKILL


def test_sigkill_mid_pass_then_rerun_completes(tmp_path: Path) -> None:
    rng = random.Random(20261203)  # noqa: S311 - kill timing, not crypto

    def kill_and_check(path: Path, before: dict[str, Any]) -> int:
        """Kill a pass on ``path``; the rows left off the primary if the kill came mid-pass."""
        killed = _kill_mid_pass(path, tmp_path, rng.uniform(0, 1))
        # Whatever moment the kill came at, A and B together read exactly what A wrote.
        assert observe(factory(path), serde_rotated()) == before
        found = audit(factory(path), serde_rotated())
        assert found.findings == ()
        return found.not_under_primary if killed else 0

    # A pass that outran every kill leaves nothing to kill on that store, and a loaded
    # machine can make that happen: each try gets a fresh store until one kill lands mid-pass.
    for attempt in range(6):
        (tmp_path / str(attempt)).mkdir()
        path, before = _written(tmp_path / str(attempt), turns=3)
        if kill_and_check(path, before) > 0:
            break
    else:
        raise AssertionError("no kill came in the middle of a pass in 6 tries")
    for _ in range(3):  # more kills on the half-rotated store, each resuming the last
        kill_and_check(path, before)
    pending = audit(factory(path), serde_rotated()).not_under_primary

    result = run_cli(KEYS, tmp_path, "rewrap", str(path), "--json", "--no-progress")

    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["failure_count"] == 0
    assert (report["rewrapped"] > 0) == (pending > 0)
    assert observe(factory(path), serde_b()) == before
    assert audit(factory(path), serde_b()).not_under_primary == 0
