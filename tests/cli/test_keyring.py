"""``secure-serde keyring``: the rotation runbook as commands, on a real store."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from secure_serde.ciphers import EnvKeyCipher, KeyRotationCipher
from tests.cli.cli_support import run_main
from tests.passes.rewrap_support import (
    KEY_A,
    header_key_ids,
    history,
    run_turns,
    sqlite_graph,
)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The keyring file an application would name, with LANGGRAPH_AES_KEY unset."""
    monkeypatch.delenv("LANGGRAPH_AES_KEY", raising=False)
    path = tmp_path / "keyring.json"
    monkeypatch.setenv("SECURE_SERDE_KEYRING_FILE", str(path))
    return path


def _file(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def test_new_writes_a_loadable_keyring_at_0600_and_prints_no_key(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(capsys, "keyring", "new", str(env), "--label", "2026-01")
    assert code == 0, err
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    written = _file(env)
    assert written["primary"] == "2026-01"
    (key,) = written["keys"].values()
    assert key not in out + err
    cipher = KeyRotationCipher.from_env()
    assert cipher.label_for(cipher.primary_key_id) == "2026-01"


def test_new_never_overwrites(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(capsys, "keyring", "new", str(env), "--label", "a")[0] == 0
    before = env.read_bytes()
    code, _, err = run_main(capsys, "keyring", "new", str(env), "--label", "b")
    assert code == 2
    assert "already exists" in err
    assert env.read_bytes() == before


def test_the_whole_runbook_moves_a_store_to_a_new_key(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store.sqlite"
    assert run_main(capsys, "keyring", "new", str(env), "--label", "old")[0] == 0
    old_id = KeyRotationCipher.from_env().primary_key_id
    with sqlite_graph(store, _serde()) as graph:
        run_turns(graph, "t1", 2)
        before = [snap.values for snap in history(graph, "t1")]

    # 1. add: the new key only decrypts, so rows stay under the old one.
    code, out, _ = run_main(capsys, "keyring", "add", str(env), "--label", "new")
    assert code == 0
    assert "only decrypts" in out
    assert KeyRotationCipher.from_env().primary_key_id == old_id
    # 2. promote, 3. rewrap: every row moves to the new key.
    assert run_main(capsys, "keyring", "promote", str(env), "new")[0] == 0
    new_id = KeyRotationCipher.from_env().primary_key_id
    assert new_id != old_id
    code, _, err = run_main(capsys, "rewrap", str(store))
    assert code == 0, err
    assert set(header_key_ids(store)) == {new_id}
    # 4. retire: the old key stops decrypting, and the store still reads in full.
    assert run_main(capsys, "keyring", "retire", str(env), "old")[0] == 0
    with sqlite_graph(store, _serde()) as graph:
        assert [snap.values for snap in history(graph, "t1")] == before
    # 5. drop.
    assert run_main(capsys, "keyring", "drop", str(env), "old")[0] == 0
    assert set(_file(env)["keys"]) == {"new"}
    assert stat.S_IMODE(env.stat().st_mode) == 0o600


def test_retired_key_refuses_its_rows_by_name(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store_then_promote_a_new_key(env, tmp_path, capsys)
    assert run_main(capsys, "keyring", "retire", str(env), "old")[0] == 0
    code, out, _ = run_main(capsys, "rewrap", str(store), "--dry-run", "--verify")
    assert code == 1
    assert "RetiredKeyError" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("retire", "a"), "is the primary"),
        (("drop", "b"), "before dropping"),
        (("promote", "nope"), "no key labelled 'nope'"),
        (("add", "--label", "a"), "already taken"),
    ],
)
def test_refused_edits_leave_the_file_unchanged(
    env: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    assert run_main(capsys, "keyring", "new", str(env), "--label", "a")[0] == 0
    assert run_main(capsys, "keyring", "add", str(env), "--label", "b")[0] == 0
    before = env.read_bytes()
    action, *rest = argv
    code, _, err = run_main(capsys, "keyring", action, str(env), *rest)
    assert code == 2
    assert message in err
    assert env.read_bytes() == before


def test_promoting_a_retired_key_is_refused(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(capsys, "keyring", "new", str(env), "--label", "a")[0] == 0
    assert run_main(capsys, "keyring", "add", str(env), "--label", "b")[0] == 0
    assert run_main(capsys, "keyring", "retire", str(env), "b")[0] == 0
    code, _, err = run_main(capsys, "keyring", "promote", str(env), "b")
    assert code == 2
    assert "retired" in err


def test_show_prints_keys_only_when_asked(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_main(capsys, "keyring", "new", str(env), "--label", "a")[0] == 0
    (key,) = _file(env)["keys"].values()
    code, out, _ = run_main(capsys, "keyring", "show", str(env))
    assert code == 0
    assert "primary" in out
    assert KeyRotationCipher.from_env().primary_key_id in out
    assert key not in out
    code, out, _ = run_main(capsys, "keyring", "show", str(env), "--reveal")
    assert code == 0
    assert key in out


def test_a_drop_in_deployment_rotates_away_from_its_env_key(
    env: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The runbook from step 0: no keyring file yet, LANGGRAPH_AES_KEY is the key "env".
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY_A)
    assert not env.exists()
    assert run_main(capsys, "keyring", "add", str(env), "--label", "2026")[0] == 0
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    cipher = KeyRotationCipher.from_env()
    assert cipher.label_for(cipher.primary_key_id) == "env"
    monkeypatch.delenv("LANGGRAPH_AES_KEY")
    assert run_main(capsys, "keyring", "promote", str(env), "2026")[0] == 0
    assert run_main(capsys, "keyring", "retire", str(env), "env")[0] == 0
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY_A)
    cipher = KeyRotationCipher.from_env()
    assert cipher.label_for(cipher.primary_key_id) == "2026"


def test_inspect_json_into_a_closed_pipe_exits_quietly(env: Path, tmp_path: Path) -> None:
    env.unlink(missing_ok=True)
    store = tmp_path / "store.sqlite"
    environ = {**os.environ, "LANGGRAPH_AES_KEY": KEY_A}
    environ.pop("SECURE_SERDE_KEYRING_FILE", None)
    with sqlite_graph(store, _env_serde()) as graph:
        run_turns(graph, "t1", 12)
    # `| head -c 1`: the reader closes the pipe after one byte, long before inspect's
    # output (well over the 64 KiB a pipe buffers) is written.
    script = (
        f"{sys.executable!s} -m secure_serde.cli inspect {store!s} --thread t1 --json | head -c 1"
    )
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", script],
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stderr
    assert "BrokenPipeError" not in done.stderr
    assert done.returncode == 0, done.stderr


def _store_then_promote_a_new_key(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Path:
    """A store written under key "old", with key "new" then added and promoted."""
    store = tmp_path / "store.sqlite"
    assert run_main(capsys, "keyring", "new", str(env), "--label", "old")[0] == 0
    with sqlite_graph(store, _serde()) as graph:
        run_turns(graph, "t1", 1)
    assert run_main(capsys, "keyring", "add", str(env), "--label", "new")[0] == 0
    assert run_main(capsys, "keyring", "promote", str(env), "new")[0] == 0
    return store


def _serde() -> Any:
    from secure_serde import EncryptedSerializer

    return EncryptedSerializer(KeyRotationCipher.from_env())


def _env_serde() -> Any:
    from secure_serde import EncryptedSerializer

    return EncryptedSerializer.from_pycryptodome_aes(key=KEY_A)


def test_rewrap_dry_run_progress_says_would_rewrap(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _store_then_promote_a_new_key(env, tmp_path, capsys)
    code, out, err = run_main(capsys, "rewrap", str(store), "--dry-run", "--progress")
    assert code == 0
    assert "would rewrap" in err
    assert "rewrapped" not in err + out


def test_rewrap_help_names_every_key_variable(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run_main(capsys, "rewrap", "--help")
    out = " ".join(capsys.readouterr().out.split())
    for variable in (
        "LANGGRAPH_AES_KEY",
        "SECURE_SERDE_KEYRING_FILE",
        "SECURE_SERDE_KMS_KEY",
        "SECURE_SERDE_KMS_DECRYPT_KEYS",
    ):
        assert variable in out


def test_audit_shows_progress_on_request(
    env: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store.sqlite"
    assert run_main(capsys, "keyring", "new", str(env), "--label", "a")[0] == 0
    with sqlite_graph(store, _serde()) as graph:
        run_turns(graph, "t1", 3)
    code, out, err = run_main(capsys, "audit", str(store), "--progress", "--batch-size", "2")
    assert code == 0, out + err
    lines = [part for part in err.split("\r") if part.startswith("audit:")]
    assert len(lines) >= 2
    total = lines[-1].split()[1].split("/")[1]
    assert lines[-1].split()[1] == f"{total}/{total}"
    assert "audit:" not in out  # the report itself stays clean on stdout
    code, _, err = run_main(capsys, "audit", str(store), "--no-progress")
    assert "audit:" not in err


def test_show_names_each_key_by_label_and_key_id(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_main(capsys, "keyring", "new", str(env), "--label", "a")[0] == 0
    assert run_main(capsys, "keyring", "add", str(env), "--label", "b")[0] == 0
    cipher = KeyRotationCipher.from_env()
    assert cipher.primary_label == "a"
    assert cipher.labels == ("a", "b")
    b_id = EnvKeyCipher(_file(env)["keys"]["b"], legacy_mode=None).key_id
    assert cipher.label_for(b_id) == "b"
    code, out, _ = run_main(capsys, "keyring", "show", str(env))
    assert code == 0
    lines = out.splitlines()[1:]
    assert lines[0].split() == ["a", "primary", "key", "id", cipher.primary_key_id]
    assert lines[1].split() == ["b", "decrypt", "only", "key", "id", b_id]


@pytest.mark.parametrize("command", [("new",), ("add",)])
def test_the_removed_id_flag_is_a_usage_error(
    env: Path, capsys: pytest.CaptureFixture[str], command: tuple[str, ...]
) -> None:
    # --id, 0.2's name of --label, warned through 0.3 and was removed in 0.4 (CHANGELOG.md).
    if command == ("add",):
        assert run_main(capsys, "keyring", "new", str(env), "--label", "first")[0] == 0
    before = env.read_bytes() if env.exists() else None
    with pytest.raises(SystemExit) as usage_error:
        run_main(capsys, "keyring", *command, str(env), "--id", "2026-01")
    assert usage_error.value.code == 2
    assert "required: --label" in capsys.readouterr().err
    assert (env.read_bytes() if env.exists() else None) == before


def test_label_is_required_and_listed_in_help(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        run_main(capsys, "keyring", "new", "--help")
    helptext = capsys.readouterr().out
    assert "--label LABEL" in helptext
    assert "--id" not in helptext
    with pytest.raises(SystemExit) as usage_error:
        run_main(capsys, "keyring", "new", str(env))
    assert usage_error.value.code == 2
    assert "required: --label" in capsys.readouterr().err
    assert not env.exists()


def test_keygen_takes_label_and_refuses_its_removed_old_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_main(capsys, "keygen", "--label", "2026-02")
    assert (code, err) == (0, "")
    printed = json.loads(out)
    assert printed["primary"] == "2026-02"
    assert list(printed["keys"]) == ["2026-02"]
    with pytest.raises(SystemExit) as usage_error:
        run_main(capsys, "keygen", "--id", "2026-02")
    assert usage_error.value.code == 2
