"""SIGKILL ``secure-serde rewrap`` at random moments on a 20k-row store: nothing is ever lost.

After every kill, every row still decrypts (under the old key or the new one) to exactly the
plaintext and inner type tag it had; after a final rerun, every row is under the new primary
and the graphs read their original state and history.

To keep every trial a real mid-run kill, the target key alternates: trial ``n`` moves the
store towards A when ``n`` is odd and towards B when it is even, so there is always work left
for the kill to interrupt, whatever the previous trial managed.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import time
from pathlib import Path

from tests.rewrap_support import (
    KEY_A,
    KEY_B,
    TEMPLATES,
    KeyEnv,
    cli_command,
    clone_name,
    decoded,
    header_key_ids,
    histories,
    key_id,
    resume,
    rotation_serde,
    run_cli,
    sqlite_graph,
    survey,
)

MIN_ROWS = 20_000
COPIES = 90
MID_RUN_KILLS = 20
MAX_TRIALS = 40
BATCH = "64"
# Full values are decoded for every STRIDE-th row (the digests cover every row).
STRIDE = 7


def _keys(primary: str) -> KeyEnv:
    # Both keys from the keyring file alone: LANGGRAPH_AES_KEY is not needed.
    return KeyEnv(env_key=None, keyring={"primary": primary, "keys": {"a": KEY_A, "b": KEY_B}})


def test_sigkill_at_random_moments_loses_nothing(tmp_path: Path) -> None:
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)  # noqa: S311 - timing, not secrets
    path = tmp_path / "big.sqlite"
    both = rotation_serde({"a": KEY_A, "b": KEY_B}, "b")
    rows = _build(path)
    assert rows >= MIN_ROWS
    original, counts = survey(path, both)
    assert len(original) == rows
    original_values = decoded(path, both, stride=STRIDE)
    sample = [*TEMPLATES, clone_name(TEMPLATES[1], 7), clone_name(TEMPLATES[3], COPIES - 1)]
    with sqlite_graph(path, both) as graph:
        original_history = histories(graph, sample)
    ids = {"a": key_id(KEY_A), "b": key_id(KEY_B)}

    # One uninterrupted run towards B measures how long the work itself takes.
    proc = run_cli(_keys("b"), tmp_path, "rewrap", str(path), "--batch-size", BATCH)
    assert proc.returncode == 0, proc.stderr
    work = float(re.search(r"rows in ([0-9.]+) s", proc.stdout).group(1))  # type: ignore[union-attr]
    digests, counts = survey(path, both)
    assert digests == original
    assert counts == {ids["b"]: rows}

    mid_run, trials, log = 0, 0, []
    while mid_run < MID_RUN_KILLS and trials < MAX_TRIALS:
        trials += 1
        target = "a" if trials % 2 else "b"
        before = counts.get(ids[target], 0)
        child = subprocess.Popen(
            cli_command("rewrap", str(path), "--batch-size", BATCH, "--progress"),
            env=_keys(target).environ(tmp_path),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        # The first progress line is drawn once the first batch is committed: from then on,
        # kill at a random moment within the work left (Python's start-up is not the point).
        assert child.stderr is not None
        first = child.stderr.read(8)
        assert first.startswith(b"\rrewrap"), first
        delay = rng.uniform(0, 0.95 * work * (rows - before) / rows)
        time.sleep(delay)
        child.send_signal(signal.SIGKILL)
        code = child.wait(timeout=60)
        child.stderr.close()
        digests, counts = survey(path, both)
        after = counts.get(ids[target], 0)
        log.append((trials, target, round(delay, 3), code, before, after))
        # Nothing lost, nothing half-written: every row opens to its original plaintext.
        assert digests == original, f"seed {seed}, trial {trials}"
        assert set(counts) <= set(ids.values())
        assert sum(counts.values()) == rows
        if code == -signal.SIGKILL and before < after < rows:
            mid_run += 1
    assert mid_run >= MID_RUN_KILLS, f"only {mid_run} kills landed mid-run (seed {seed}): {log}"

    proc = run_cli(_keys("b"), tmp_path, "rewrap", str(path), "--batch-size", "500")
    assert proc.returncode == 0, proc.stderr
    assert header_key_ids(path) == {ids["b"]: rows}
    again = run_cli(_keys("b"), tmp_path, "rewrap", str(path))
    assert f"rewrapped 0, already current {rows:,}" in again.stdout
    only_b = rotation_serde({"b": KEY_B}, "b")
    assert decoded(path, only_b, stride=STRIDE) == original_values
    with sqlite_graph(path, only_b) as graph:
        assert histories(graph, sample) == original_history
        resume(graph, sample[-1], "after the crashes")
        assert graph.get_state({"configurable": {"thread_id": sample[-1]}}).values["approvals"][
            -1
        ] == ("after the crashes")


def _build(path: Path) -> int:
    from tests.rewrap_support import build_sqlite_store

    return build_sqlite_store(path, rotation_serde({"a": KEY_A}, "a"), COPIES)
