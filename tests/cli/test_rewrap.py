"""``secure-serde rewrap`` and ``secure-serde keygen``: exit codes, output, configuration errors."""

from __future__ import annotations

import base64
import json
import shlex
import signal
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from secure_serde.cli import main
from tests.passes.rewrap_support import (
    KEY_A,
    KEY_B,
    SECRET,
    KeyEnv,
    build_sqlite_store,
    cli_command,
    header_key_ids,
    key_id,
    rotation_serde,
    run_turns,
    sqlite_graph,
)


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., None]:
    """Configure the environment the way an operator would, for in-process runs of main()."""
    monkeypatch.delenv("SECURE_SERDE_KEYRING_FILE", raising=False)
    monkeypatch.delenv("LANGGRAPH_AES_KEY", raising=False)

    def configure(env_key: str | None = KEY_A, keyring: dict[str, Any] | None = None) -> None:
        if env_key is not None:
            monkeypatch.setenv("LANGGRAPH_AES_KEY", env_key)
        if keyring is not None:
            path = tmp_path / "keyring.json"
            path.write_text(json.dumps(keyring))
            path.chmod(0o600)  # keyring files must be private to their owner
            monkeypatch.setenv("SECURE_SERDE_KEYRING_FILE", str(path))

    return configure


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store.sqlite"
    with sqlite_graph(path, rotation_serde({"a": KEY_A}, "a")) as graph:
        run_turns(graph, "t1", 2)
        run_turns(graph, "t2", 1)
    return path


STAGE3 = {"primary": "b", "keys": {"b": KEY_B}}


def test_rewrap_reports_and_exits_zero(
    store: Path, keys: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    keys(KEY_A, STAGE3)
    rows = sum(header_key_ids(store).values())
    assert main(["rewrap", str(store), "--progress", "--batch-size", "3"]) == 0
    out, err = capsys.readouterr()
    assert f"store: {store}" in out
    assert f"primary: aesgcm/{key_id(KEY_B)} (b)" in out
    assert f"scanned {rows:,} rows" in out
    assert f"rewrapped {rows:,}, already current 0" in out
    assert f"rewrapped from aesgcm/{key_id(KEY_A)} (env): {rows:,}" in out
    # The progress line is redrawn in place on stderr, with a rate.
    assert err.startswith("\rrewrap [")
    assert "rows/s" in err
    assert f"{rows:,}/{rows:,} rows 100.0%" in err
    assert err.endswith("\n")
    for secret in (SECRET, KEY_A, KEY_B):
        assert secret not in out + err
    assert header_key_ids(store) == {key_id(KEY_B): rows}


def test_dry_run_writes_nothing(store: Path, keys: Any, capsys: pytest.CaptureFixture[str]) -> None:
    keys(KEY_A, STAGE3)
    before = store.read_bytes()
    assert main(["rewrap", str(store), "--dry-run", "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert "would rewrap" in out
    assert err == ""
    assert store.read_bytes() == before


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["rewrap", "{missing}"], (KEY_A, None), "no SQLite file"),
        (["rewrap", "{notastore}"], (KEY_A, None), "no langgraph checkpoint tables"),
        (["rewrap", "{store}"], (None, None), "no keys configured"),
        (["rewrap", "{store}", "--workers", "2"], (KEY_A, STAGE3), "PostgreSQL stores only"),
        (["rewrap", "{store}"], (KEY_A, {"primary": "zz"}), "primary 'zz' is not in keys"),
        (["rewrap", "{store}"], ("too short", None), "LANGGRAPH_AES_KEY must be"),
        (
            ["rewrap", "postgresql://user:hunter2secret@127.0.0.1:1/db?connect_timeout=2"],
            (KEY_A, None),
            "cannot connect to postgresql://user@127.0.0.1:1/db",
        ),
    ],
)
def test_configuration_and_store_errors_exit_two(
    store: Path,
    tmp_path: Path,
    keys: Any,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    env: tuple[str | None, dict[str, Any] | None],
    message: str,
) -> None:
    keys(*env)
    notastore = tmp_path / "other.sqlite"
    sqlite3.connect(notastore).execute("CREATE TABLE t (x)").connection.close()
    paths = {"missing": tmp_path / "nope.sqlite", "notastore": notastore, "store": store}
    before = store.read_bytes()
    assert main([arg.format(**paths) for arg in argv]) == 2
    _, err = capsys.readouterr()
    assert err.startswith("secure-serde: error: ")
    assert message in err
    assert "hunter2secret" not in err
    assert "too short" not in err
    assert store.read_bytes() == before


@pytest.mark.parametrize("argv", [["rewrap"], ["rewrap", "x", "--batch-size", "0"]])
def test_usage_errors_exit_two(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2


def _plant_bad_writes(store: Path, count: int) -> None:
    """``count`` rows no key opens: a one-byte value under the aesgcm cipher name."""
    with sqlite3.connect(store) as conn:
        conn.executemany(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,"
            " type, value) VALUES (?, '', 'c', 'task', 0, 'ch', 'msgpack+aesgcm', x'00')",
            [(f"bad-{i:05d}",) for i in range(count)],
        )


def _listed(out: str) -> list[str]:
    return [line for line in out.splitlines() if "thread_id='bad-" in line]


def test_failure_lists_show_twenty_rows_and_a_count_and_json_lists_all(
    store: Path, keys: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = 25
    _plant_bad_writes(store, bad)
    keys(KEY_A, STAGE3)
    assert main(["rewrap", str(store), "--dry-run"]) == 1
    out, err = capsys.readouterr()
    listed = _listed(out)
    assert len(listed) == 20
    # The first twenty, in the order the report keeps them.
    assert [line.split("thread_id='")[1][:9] for line in listed] == [
        f"bad-{i:05d}" for i in range(20)
    ]
    assert "  ... and 5 more (--json lists them)" in out.splitlines()
    assert f"{bad:,} row(s) could not be rewrapped" in err

    assert main(["rewrap", str(store), "--dry-run", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["failure_count"] == bad
    assert sorted(f["key"]["thread_id"] for f in document["failures"]) == [
        f"bad-{i:05d}" for i in range(bad)
    ]


def test_twenty_failures_are_all_listed_with_no_count_line(
    store: Path, keys: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant_bad_writes(store, 20)
    keys(KEY_A, STAGE3)
    assert main(["rewrap", str(store), "--dry-run"]) == 1
    out, _ = capsys.readouterr()
    assert len(_listed(out)) == 20
    assert "more (--json" not in out


def test_past_what_the_report_keeps_json_lists_the_first_thousand(
    store: Path, keys: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from secure_serde.passes import MAX_LISTED_FAILURES

    bad = MAX_LISTED_FAILURES + 7
    _plant_bad_writes(store, bad)
    keys(KEY_A, STAGE3)
    assert main(["rewrap", str(store), "--batch-size", "250"]) == 1
    out, err = capsys.readouterr()
    assert len(_listed(out)) == 20
    assert f"  ... and {bad - 20:,} more (--json lists the first 1,000)" in out.splitlines()
    assert f"{bad:,} row(s) could not be rewrapped" in err
    assert main(["rewrap", str(store), "--batch-size", "250", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert (document["failure_count"], len(document["failures"])) == (bad, MAX_LISTED_FAILURES)


def test_each_kind_of_failure_is_followed_by_its_fix_and_the_printed_fix_runs(
    store: Path, keys: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant_bad_writes(store, 2)
    with sqlite3.connect(store) as conn:
        conn.execute(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,"
            " type, value) VALUES ('plain', '', 'c', 'task', 0, 'ch', 'msgpack', x'a161')"
        )
    keys(KEY_A, STAGE3)
    assert main(["rewrap", str(store)]) == 1
    out, _ = capsys.readouterr()
    fixes = [line.removeprefix("  ") for line in out.splitlines() if line.startswith("  fix (")]
    rerun = f"secure-serde rewrap {store}"
    assert fixes == [
        f"fix (PlaintextRefusedError): {rerun} --allow-plaintext"
        "  # seals unencrypted rows the strict decoder accepts",
        "fix (DecryptionError): the rows were changed outside the application (tampered,"
        f" planted or relabelled): restore them from a backup or delete them, then {rerun}",
    ]
    # The plaintext fix, run as printed (its explanation is a shell comment), seals that row.
    argv = shlex.split(fixes[0].partition(": ")[2], comments=True)
    assert argv[:2] == ["secure-serde", "rewrap"]
    assert main(argv[1:]) == 1  # the two truncated rows are still there
    out, _ = capsys.readouterr()
    assert "PlaintextRefusedError" not in out
    assert [line for line in out.splitlines() if line.startswith("  fix (")] == [f"  {fixes[1]}"]


def test_sigint_stops_between_batches_and_a_rerun_finishes(tmp_path: Path) -> None:
    path = tmp_path / "big.sqlite"
    rows = build_sqlite_store(path, rotation_serde({"a": KEY_A}, "a"), copies=25)
    env = KeyEnv(KEY_A, STAGE3)
    child = subprocess.Popen(
        cli_command("rewrap", str(path), "--batch-size", "20", "--progress"),
        env=env.environ(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stderr is not None
    # The first progress line: one batch of hundreds is committed.
    assert child.stderr.read(7) == b"\rrewrap"
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert b"interrupted; committed batches stay committed, rerun to finish" in err
    counts = header_key_ids(path)
    assert sum(counts.values()) == rows
    assert 0 < counts.get(key_id(KEY_B), 0) < rows
    done = subprocess.run(
        cli_command("rewrap", str(path)),
        env=env.environ(tmp_path),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert header_key_ids(path) == {key_id(KEY_B): rows}


# ---------------------------------------------------------------------------------------------
# keygen


def test_keygen_prints_a_fresh_full_entropy_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["keygen"]) == 0
    assert main(["keygen"]) == 0
    first, second = capsys.readouterr().out.split()
    assert first != second
    assert first.startswith("base64:")
    assert len(base64.b64decode(first[len("base64:") :], validate=True)) == 32


def test_keygen_entry_goes_straight_into_a_keyring_file(
    keys: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["keygen", "--label", "2025-06"]) == 0
    keyring_file = json.loads(capsys.readouterr().out)
    assert keyring_file["primary"] == "2025-06"
    assert list(keyring_file["keys"]) == ["2025-06"]
    keys(KEY_A, keyring_file)
    from secure_serde.ciphers import KeyRotationCipher

    cipher = KeyRotationCipher.from_env()
    assert cipher.label_for(cipher.primary_key_id) == "2025-06"
    assert cipher.primary_key_id != key_id(KEY_A)


def test_retire_check_lists_rows_left_under_the_retired_key(
    store: Path, keys: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # The runbook's check before step 4: with the retiring configuration, a dry run that
    # verifies every value fails while any value is still under the old key.
    keys(KEY_A, {**STAGE3, "retired": ["env"]})
    assert main(["rewrap", str(store), "--dry-run", "--verify"]) == 1
    out, _ = capsys.readouterr()
    assert f"RetiredKeyError: key id {key_id(KEY_A)} (label 'env') is retired" in out
    keys(KEY_A, STAGE3)
    assert main(["rewrap", str(store)]) == 0
    keys(KEY_A, {**STAGE3, "retired": ["env"]})
    capsys.readouterr()
    assert main(["rewrap", str(store), "--dry-run", "--verify"]) == 0
    assert "failed 0" in capsys.readouterr().out


def test_a_kms_key_in_the_environment_moves_an_env_key_store_to_kms(
    store: Path,
    keys: Any,
    monkeypatch: pytest.MonkeyPatch,
    kms_endpoint: str,
    kms_client: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cmk = kms_client.create_key(Description="rewrap target")["KeyMetadata"]["Arn"]
    keys(env_key=KEY_A)
    for name, value in {
        "AWS_ENDPOINT_URL_KMS": kms_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "SECURE_SERDE_KMS_KEY": cmk,
    }.items():
        monkeypatch.setenv(name, value)
    with sqlite3.connect(store) as conn:
        before = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
    # Workers split PostgreSQL stores only (KMS is fine with workers: see test_secrets_kms_workers).
    assert main(["rewrap", str(store), "--workers", "2"]) == 2
    assert "PostgreSQL stores only" in capsys.readouterr().err
    assert main(["rewrap", str(store), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert cmk in out
    with sqlite3.connect(store) as conn:
        tags = {row[0] for row in conn.execute("SELECT type FROM checkpoints")}
        tags |= {row[0] for row in conn.execute("SELECT type FROM writes")}
        assert conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0] == before
    assert tags
    assert all(tag.endswith("+kms") for tag in tags)
    # A second run finds everything current, and the store still reads through KMS alone.
    assert main(["rewrap", str(store), "--no-progress"]) == 0
    assert "rewrapped 0," in capsys.readouterr().out
