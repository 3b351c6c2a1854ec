"""Store-controlled text cannot drive the operator's terminal (issue 9: terminal injection).

Anyone who can write to the store chooses type tags, cipher names,
metadata keys, channel names and task ids. Printed raw, a newline forges a
report line ("findings: 0"), a carriage return overwrites one and
``ESC[8m`` hides everything after it. Rows carrying each are planted in a
real SQLite store written by a real graph; audit, inspect and rewrap must
print them escaped, on one line each. ``--json`` is escaped by ``json``.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.cli.cli_support import run_main
from tests.passes.rewrap_support import KEY_A, rotation_serde, run_turns, sqlite_graph

HIDE = "\x1b[8m"
TAG = f"msgpack\nfindings: 0{HIDE}"
CIPHER_TAG = f"msgpack+evil\r{HIDE}cipher"
META_KEY = f"note\nfindings: 0\r{HIDE}"
CHANNEL = f"chan\r{HIDE}\nfindings: 0"
THREAD = "t-1"


@pytest.fixture
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A store written by a real graph, then edited as an attacker with write access would."""
    for var in ("SECURE_SERDE_KEYRING_FILE", "SECURE_SERDE_KMS_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY_A)
    path = tmp_path / "store.sqlite"
    with sqlite_graph(path, rotation_serde({"env": KEY_A}, "env")) as graph:
        run_turns(graph, THREAD, 2)
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT rowid, type FROM writes ORDER BY rowid").fetchall()
        assert len(rows) >= 3
        conn.execute("UPDATE writes SET type = ? WHERE rowid = ?", (TAG, rows[0][0]))
        conn.execute("UPDATE writes SET type = ? WHERE rowid = ?", (CIPHER_TAG, rows[1][0]))
        conn.execute("UPDATE writes SET channel = ? WHERE rowid > ?", (CHANNEL, rows[1][0]))
        for rowid, metadata in conn.execute("SELECT rowid, metadata FROM checkpoints").fetchall():
            document = json.loads(metadata)
            document[META_KEY] = "x"
            conn.execute(
                "UPDATE checkpoints SET metadata = ? WHERE rowid = ?",
                (json.dumps(document).encode(), rowid),
            )
    conn.close()
    return path


def _escaped(text: str) -> str:
    """What the report must show for ``text``: each non-printable character as its escape."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def _assert_inert(out: str) -> None:
    assert "\x1b" not in out
    assert "\r" not in out
    # A planted newline would start a forged "findings: 0" line of its own.
    assert sum(line.lstrip().startswith("findings:") for line in out.splitlines()) <= 1


def test_for_terminal_escapes_what_a_terminal_acts_on() -> None:
    from secure_serde.cli._pretty import for_terminal

    assert for_terminal("a\nb\rc\x1b[8md\x7f\x85") == "a\\nb\\rc\\x1b[8md\\x7f\\x85"
    assert for_terminal("rtl\u202eevil\u200b") == "rtl\\u202eevil\\u200b"
    assert for_terminal("tab\there") == "tab\\there"
    # Printable text, accents and emoji included, is left alone.
    for text in ("msgpack+aesgcm", "clé 🔑 ünïcode", "a b", ""):
        assert for_terminal(text) == text
    assert for_terminal(42) == "42"


def test_audit_prints_planted_tags_and_metadata_keys_escaped(
    planted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(capsys, "audit", str(planted))
    assert code == 1
    _assert_inert(out + err)
    assert _escaped(TAG) in out
    assert _escaped(CIPHER_TAG.partition("+")[2]) in out
    assert _escaped(META_KEY) in out
    [findings] = [line for line in out.splitlines() if line.startswith("findings: ")]
    assert int(findings.removeprefix("findings: ")) >= 2  # the real findings are all listed


def test_audit_json_stays_escaped(planted: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_main(capsys, "audit", "--json", str(planted))
    assert code == 1
    _assert_inert(out)
    assert json.dumps(TAG)[1:-1] in out  # the exact tag, in json's own escapes


def test_inspect_prints_planted_channel_and_metadata_key_escaped(
    planted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(capsys, "inspect", "--thread", THREAD, "--limit", "50", str(planted))
    _assert_inert(out + err)
    assert _escaped(META_KEY) in out
    assert _escaped(CHANNEL) in out
    assert code in (0, 1)


def test_rewrap_prints_planted_rows_escaped(
    planted: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(capsys, "rewrap", "--dry-run", str(planted))
    _assert_inert(out + err)
    assert "rows that could not be rewrapped" in out
    assert code != 0
