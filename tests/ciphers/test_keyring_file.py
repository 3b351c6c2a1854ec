"""KeyringFile from code: the edits ``secure-serde keyring`` runs (tests/cli has the command)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from secure_serde import ConfigurationError
from secure_serde.ciphers import KeyringFile, KeyRotationCipher


def test_the_runbook_from_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keyring = KeyringFile(tmp_path / "keyring.json")
    keyring.create("a")
    keyring.edit("add", "b")
    assert keyring.edit("promote", "b") == "a"  # the former primary
    keyring.edit("retire", "a")
    keyring.edit("drop", "a")
    monkeypatch.delenv("LANGGRAPH_AES_KEY", raising=False)
    monkeypatch.setenv("SECURE_SERDE_KEYRING_FILE", str(keyring.path))
    assert KeyRotationCipher.from_env().labels == ("b",)
    entries, legacy_key = keyring.entries()
    assert [(e.label, e.role, e.key) for e in entries] == [("b", "primary", None)]
    assert legacy_key is None


def test_revealed_keys_stay_out_of_the_repr(tmp_path: Path) -> None:
    keyring = KeyringFile(tmp_path / "keyring.json")
    keyring.create("a")
    (entry,), _ = keyring.entries(reveal=True)
    key = json.loads(keyring.path.read_text())["keys"]["a"]
    assert entry.key == key
    assert key not in repr(entry)


def test_an_unknown_stage_is_refused_before_the_file_is_touched(tmp_path: Path) -> None:
    keyring = KeyringFile(tmp_path / "keyring.json")
    keyring.create("a")
    before = keyring.path.read_bytes()
    with pytest.raises(ConfigurationError, match="no keyring stage 'rename'"):
        keyring.edit("rename", "a")
    assert keyring.path.read_bytes() == before
