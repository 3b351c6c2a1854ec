"""Planted and relabelled rows in a real SQLite store: inspect, rewrap and audit never run them.

The store is written by real graphs through real savers: one thread by secure_serde, one by
langgraph's built-in ``EncryptedSerializer`` under the same key (legacy rows the drop-in reads).
Then, as an attacker with write access to the database:

* the newest checkpoint of the secure_serde thread is replaced by a plaintext ``msgpack`` row
  whose extension names a callable (a harmless recorder, or ``os.system`` creating a marker);
* the newest checkpoint of the legacy thread is replaced by a built-in ``bytes+aes`` row of the
  same content (what an upload would be), relabelled ``msgpack+aes``: no key needed.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as BuiltinSerializer

from secure_serde import EncryptedSerializer, Migration, StrictDecodeError, rewrap
from secure_serde.ciphers import KeyRotationCipher
from tests.cli.cli_support import only_env_key, run_console_script, run_main
from tests.passes.rewrap_support import KEY_A, rotation_serde, run_turns, sqlite_graph
from tests.planted_msgpack import (
    SENTINEL_MODULE,
    SENTINEL_NAME,
    PlantedCall,
    os_system_value,
    planted_value,
)

OURS, LEGACY = "ours", "legacy"


@pytest.fixture(autouse=True)
def _reset() -> None:
    PlantedCall.reset()


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    only_env_key(monkeypatch, KEY_A)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("readrule") / "store.sqlite"
    with sqlite_graph(path, rotation_serde({"env": KEY_A}, "env")) as graph:
        run_turns(graph, OURS, 2)
    with sqlite_graph(path, BuiltinSerializer.from_pycryptodome_aes(key=KEY_A.encode())) as graph:
        run_turns(graph, LEGACY, 2)
    return path


def newest_checkpoint(conn: sqlite3.Connection, thread_id: str) -> str:
    (checkpoint_id,) = conn.execute(
        "SELECT max(checkpoint_id) FROM checkpoints WHERE thread_id = ?", (thread_id,)
    ).fetchone()
    return str(checkpoint_id)


def plant(path: Path, thread_id: str, type_tag: str, data: bytes) -> str:
    with sqlite3.connect(path) as conn:
        checkpoint_id = newest_checkpoint(conn, thread_id)
        conn.execute(
            "UPDATE checkpoints SET type = ?, checkpoint = ? WHERE thread_id = ?"
            " AND checkpoint_id = ?",
            (type_tag, data, thread_id, checkpoint_id),
        )
    return checkpoint_id


def relabelled(content: bytes) -> tuple[str, bytes]:
    tag, blob = BuiltinSerializer.from_pycryptodome_aes(key=KEY_A.encode()).dumps_typed(content)
    assert tag == "bytes+aes"
    return "msgpack+aes", blob


@pytest.fixture
def store(template: Path, tmp_path: Path) -> dict[str, Any]:
    """A copy of the store with both rows planted; says which checkpoints they replaced."""
    path = tmp_path / "store.sqlite"
    shutil.copy(template, path)
    planted = plant(path, OURS, "msgpack", planted_value())
    legacy = plant(path, LEGACY, *relabelled(planted_value()))
    return {"path": path, OURS: planted, LEGACY: legacy}


def stored_row(path: Path, thread_id: str, checkpoint_id: str) -> tuple[str, bytes]:
    with sqlite3.connect(path) as conn:
        tag, data = conn.execute(
            "SELECT type, checkpoint FROM checkpoints WHERE thread_id = ? AND checkpoint_id = ?",
            (thread_id, checkpoint_id),
        ).fetchone()
    return str(tag), bytes(data)


def inspect_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    _, out, err = run_main(capsys, "inspect", *args, "--json")
    assert out, err
    document: dict[str, Any] = json.loads(out)
    return document


def entry(document: dict[str, Any], checkpoint_id: str) -> dict[str, Any]:
    matches: list[dict[str, Any]] = [
        e for e in document["checkpoints"] if e["checkpoint_id"] == checkpoint_id
    ]
    (found,) = matches
    return found


# ---------------------------------------------------------------------------------------------
# inspect


@pytest.mark.parametrize("flags", [(), ("--allow-plaintext",), ("--allow-legacy-pickle",)])
def test_inspect_never_runs_a_relabelled_legacy_row(
    keys: None, store: dict[str, Any], capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]
) -> None:
    document = inspect_json(capsys, str(store["path"]), "--thread", LEGACY, *flags)
    assert not PlantedCall.ran
    assert entry(document, store[LEGACY])["error"].startswith(StrictDecodeError.__name__)
    # The legacy thread's other checkpoints still read.
    assert any(e["error"] is None for e in document["checkpoints"])


def test_inspect_allow_plaintext_never_runs_a_planted_row(
    keys: None, store: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    default = inspect_json(capsys, str(store["path"]), "--thread", OURS)
    assert entry(default, store[OURS])["error"].startswith("PlaintextRefusedError")
    document = inspect_json(capsys, str(store["path"]), "--thread", OURS, "--allow-plaintext")
    assert not PlantedCall.ran
    assert entry(document, store[OURS])["error"].startswith(StrictDecodeError.__name__)


def test_console_script_never_runs_os_system(
    store: dict[str, Any], template: Path, tmp_path: Path
) -> None:
    path = tmp_path / "os.sqlite"
    shutil.copy(template, path)
    markers = {name: tmp_path / f"ran-{name}" for name in ("plain", "legacy")}
    plant(path, OURS, "msgpack", os_system_value(str(markers["plain"])))
    plant(path, LEGACY, *relabelled(os_system_value(str(markers["legacy"]))))
    env = {"LANGGRAPH_AES_KEY": KEY_A}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    runs = [
        run_console_script("inspect", str(path), "--thread", thread, *flags, env=env)
        for thread, flags in ((OURS, ["--allow-plaintext"]), (LEGACY, []))
    ]
    runs.append(
        run_console_script("rewrap", str(path), "--allow-plaintext", "--no-progress", env=env)
    )
    assert not any(marker.exists() for marker in markers.values())
    for done in runs:
        assert done.returncode == 1, done.stderr
        assert StrictDecodeError.__name__ in done.stdout


# ---------------------------------------------------------------------------------------------
# rewrap


def test_rewrap_cli_refuses_to_seal_planted_and_relabelled_rows(
    keys: None, store: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    path = store["path"]
    before = {t: stored_row(path, t, store[t]) for t in (OURS, LEGACY)}
    code, out, err = run_main(capsys, "rewrap", str(path), "--allow-plaintext", "--no-progress")
    assert code == 1, (out, err)
    assert not PlantedCall.ran
    # Neither row was sealed: a v1 tag would authenticate the attacker's type tag from now on.
    assert {t: stored_row(path, t, store[t]) for t in (OURS, LEGACY)} == before
    listed = [
        line
        for line in out.splitlines()
        if StrictDecodeError.__name__ in line and not line.lstrip().startswith("fix (")
    ]
    assert len(listed) == 2
    for thread in (OURS, LEGACY):
        assert any(f"thread_id={thread!r}" in line or thread in line for line in listed)
    # Listed by table and key, never by content: not even the names the bytes spell.
    for text in (SENTINEL_MODULE, SENTINEL_NAME, "payload"):
        assert text not in out + err
    # Everything else was rewrapped, the legacy thread's data rows included.
    with sqlite3.connect(path) as conn:
        tags = {str(t) for (t,) in conn.execute("SELECT type FROM checkpoints")}
    assert tags == {"msgpack+aesgcm", "msgpack", "msgpack+aes"}


def test_rewrap_api_lists_refusals_with_their_error_class(
    keys: None, store: dict[str, Any]
) -> None:
    # As the CLI configures it: LANGGRAPH_AES_KEY also reads the built-in's rows.
    serde = EncryptedSerializer(KeyRotationCipher.from_env())
    # 0.1.0's alias first, then the Migration setting: the same refusals.
    dry = rewrap(store["path"], serde, migration=Migration(plaintext=True), dry_run=True)
    assert not PlantedCall.ran
    assert {f.error for f in dry.failures} == {StrictDecodeError}
    report = rewrap(store["path"], serde, migration=Migration(plaintext=True))
    assert not PlantedCall.ran
    refused = {f.ref.thread_id: f.error for f in report.failures}
    assert refused == {OURS: StrictDecodeError, LEGACY: StrictDecodeError}
    assert report.failure_count == 2
    assert report.sources["aes"] > 0


# ---------------------------------------------------------------------------------------------
# audit


def test_audit_flags_what_the_strict_decoder_refuses(
    keys: None, store: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run_main(capsys, "audit", str(store["path"]), "--json")
    assert not PlantedCall.ran
    document = json.loads(out)
    assert code == 1
    refused = document["refused"]
    assert refused["count"] == 2
    assert refused["by_error"] == {StrictDecodeError.__name__: 2}
    assert {r["key"]["thread_id"] for r in refused["rows"]} == {OURS, LEGACY}
    (builtin,) = [g for g in document["ciphers"] if g["cipher"] == "aes"]
    assert builtin["refused"] == 1
    assert builtin["readable"] == builtin["count"] - 1
    assert any("strict decoder refuses" in f for f in document["findings"])
    # Not counted as keys that cannot decrypt: the key is fine, the content is not.
    assert document["undecryptable"]["count"] == 0
    code, text, _ = run_main(capsys, "audit", str(store["path"]))
    assert "refused by the strict decoder (type tag not authenticated): 2" in text
    for name in (SENTINEL_MODULE, SENTINEL_NAME):
        assert name not in out + text
