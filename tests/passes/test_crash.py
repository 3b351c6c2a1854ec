"""SIGKILL ``secure-serde rewrap`` at random moments on a 20k-row store: nothing is ever lost.

After every kill, every row still decrypts (under the old key or the new one) to exactly the
plaintext and inner type tag it had; after a final rerun, every row is under the new primary
and the graphs read their original state and history.

The rows are checked with plain ``sqlite3`` and the cipher, not through the store layer under
test. To keep every trial a real mid-run kill, the target key alternates: trial ``n`` moves the
store towards A when ``n`` is odd and towards B when it is even, so there is always work left
for the kill to interrupt, whatever the previous trial managed. The kill comes once the child's
progress line reports a random share of the remaining rows moved, then at a random moment
within the next batch: chosen by the work done, not by a clock.

The first trials run the console command in a fresh interpreter; the others run the same
``secure_serde.cli.main`` in a process forked from this one, which has the modules loaded
already, so that the trials cost the rewrap and not Python's start-up. Either way the rewrap
runs in a separate process with its own SQLite connection, and is killed with SIGKILL.
"""

from __future__ import annotations

import hashlib
import io
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from secure_serde import EncryptedSerializer
from tests.passes.progress_support import progress_lines
from tests.passes.rewrap_support import (
    KEY_A,
    KEY_B,
    TEMPLATES,
    KeyEnv,
    build_sqlite_store,
    cli_command,
    clone_name,
    decoded,
    histories,
    key_id,
    resume,
    rotation_serde,
    run_cli,
    sqlite_graph,
)

MIN_ROWS = 20_000
COPIES = 90
MID_RUN_KILLS = 20
MAX_TRIALS = 40
EXECED_TRIALS = 3
BATCH = "64"
# Full values are decoded for every STRIDE-th row (the digests cover every row).
STRIDE = 7
_CELLS = {
    "checkpoints": ("checkpoint", "thread_id, checkpoint_ns, checkpoint_id"),
    "writes": ("value", "thread_id, checkpoint_ns, checkpoint_id, task_id, idx"),
}


def _keys(primary: str) -> KeyEnv:
    # Both keys from the keyring file alone: LANGGRAPH_AES_KEY is not needed.
    return KeyEnv(env_key=None, keyring={"primary": primary, "keys": {"a": KEY_A, "b": KEY_B}})


def _survey(path: Path, serde: EncryptedSerializer) -> tuple[dict[Any, bytes], dict[str, int]]:
    """Every row's key -> digest of (inner type tag, plaintext); and rows per header key id."""
    cipher = serde.cipher
    digests: dict[Any, bytes] = {}
    counts: dict[str, int] = {}
    conn = sqlite3.connect(path)
    try:
        for table, (data, key) in _CELLS.items():
            for row in conn.execute(f"SELECT {key}, type, {data} FROM {table}"):  # noqa: S608
                tag, blob = row[-2], row[-1]
                inner, _, name = tag.rpartition("+")
                plaintext = cipher.decrypt_with_tag(name, blob, inner)
                digests[(table, *row[:-2])] = hashlib.sha256(tag.encode() + plaintext).digest()
                counts[blob[1:5].hex()] = counts.get(blob[1:5].hex(), 0) + 1
    finally:
        conn.close()
    return digests, counts


Started = tuple[int, int, Callable[[], bool]]  # pid, stderr read end, wait -> killed by SIGKILL?


def _start_execed(argv: list[str], env: dict[str, str]) -> Started:
    """The console command in a fresh interpreter."""
    child = subprocess.Popen(
        cli_command(*argv), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert child.stderr is not None
    stderr = os.dup(child.stderr.fileno())
    child.stderr.close()
    return child.pid, stderr, lambda: child.wait(timeout=60) == -signal.SIGKILL


def _start_forked(argv: list[str], env: dict[str, str]) -> Started:
    """secure_serde.cli.main(argv) in a process forked from this one."""
    from secure_serde.cli import main

    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 70
        try:
            os.close(read_end)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            os.dup2(write_end, 2)
            sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True)
            sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), write_through=True)
            os.environ.clear()
            os.environ.update(env)
            code = main(argv)
        finally:
            os._exit(code)
    os.close(write_end)

    def wait() -> bool:
        _, status = os.waitpid(pid, 0)
        return os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL

    return pid, read_end, wait


def test_sigkill_at_random_moments_loses_nothing(tmp_path: Path) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)  # noqa: S311 - timing, not secrets
    path = tmp_path / "big.sqlite"
    both = rotation_serde({"a": KEY_A, "b": KEY_B}, "b")
    rows = build_sqlite_store(path, rotation_serde({"a": KEY_A}, "a"), COPIES)
    assert rows >= MIN_ROWS
    original, counts = _survey(path, both)
    assert len(original) == rows
    original_values = decoded(path, both, stride=STRIDE)
    sample = [*TEMPLATES, clone_name(TEMPLATES[1], 7), clone_name(TEMPLATES[3], COPIES - 1)]
    with sqlite_graph(path, both) as graph:
        original_history = histories(graph, sample)
    ids = {"a": key_id(KEY_A), "b": key_id(KEY_B)}

    # One uninterrupted run towards B.
    proc = run_cli(_keys("b"), tmp_path, "rewrap", str(path), "--batch-size", BATCH)
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"rows in [0-9.]+ s", proc.stdout), proc.stdout
    digests, counts = _survey(path, both)
    assert digests == original
    assert counts == {ids["b"]: rows}

    mid_run, trials, log = 0, 0, []
    while mid_run < MID_RUN_KILLS and trials < MAX_TRIALS:
        trials += 1
        target = "a" if trials % 2 else "b"
        before = counts.get(ids[target], 0)
        # The kill comes once the child reports a random share of the rows left, 20 % to 80 %,
        # moved: each trial leaves at least a fifth of the store to move in either direction.
        left = rows - before
        goal = rng.randint(max(1, left // 5), max(1, 4 * left // 5))
        start = _start_execed if trials <= EXECED_TRIALS else _start_forked
        pid, stderr, wait = start(
            ["rewrap", str(path), "--batch-size", BATCH, "--progress"],
            _keys(target).environ(tmp_path),
        )
        seen = None
        delay = 0.0
        try:
            for seen in progress_lines(stderr):
                if seen.rewrapped >= goal or seen.finished:
                    break
            if seen is not None and not seen.finished:
                # A random moment within the next batch, at the child's own pace.
                delay = rng.uniform(0, int(BATCH) / max(seen.rate, 1))
                time.sleep(delay)
        finally:
            os.kill(pid, signal.SIGKILL)  # not reaped yet, so the pid is still this child's
            killed = wait()
            os.close(stderr)
        assert seen is not None, "the child drew no progress line"
        digests, counts = _survey(path, both)
        after = counts.get(ids[target], 0)
        log.append((trials, target, goal, seen.rewrapped, round(delay, 4), killed, before, after))
        # Nothing lost, nothing half-written: every row opens to its original plaintext.
        assert digests == original, f"seed {seed}, trial {trials}"
        assert set(counts) <= set(ids.values())
        assert sum(counts.values()) == rows
        # What the child reported committed is there, whatever the kill interrupted.
        assert after >= before + seen.rewrapped, f"seed {seed}: {log}"
        if killed and before < after < rows:
            mid_run += 1
    assert mid_run >= MID_RUN_KILLS, f"only {mid_run} kills landed mid-run (seed {seed}): {log}"

    proc = run_cli(_keys("b"), tmp_path, "rewrap", str(path), "--batch-size", "500")
    assert proc.returncode == 0, proc.stderr
    assert _survey(path, both) == (original, {ids["b"]: rows})
    again = run_cli(_keys("b"), tmp_path, "rewrap", str(path))
    assert f"rewrapped 0, already current {rows:,}" in again.stdout
    only_b = rotation_serde({"b": KEY_B}, "b")
    assert decoded(path, only_b, stride=STRIDE) == original_values
    with sqlite_graph(path, only_b) as graph:
        assert histories(graph, sample) == original_history
        resume(graph, sample[-1], "after the crashes")
        state = graph.get_state({"configurable": {"thread_id": sample[-1]}})
        assert state.values["approvals"][-1] == "after the crashes"
