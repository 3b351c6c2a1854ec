"""Keyring files open to group or others are refused, as ssh refuses such private keys (issue 9).

The error names the file and its mode, never its content; the documented
override ``SECURE_SERDE_KEYRING_STRICT_MODES=no`` accepts the file with a
logged warning. The mode is read from the open file, so a file swapped
after the check cannot slip through.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from secure_serde import ConfigurationError
from secure_serde.ciphers import KEYRING_FILE_VAR, KeyRotationCipher
from tests.cli.cli_support import run_main

KEY = "base64:" + "a2V5cmluZy1maWxlLW1vZGUtdGVzdC1rZXktMzJieXQ="


@pytest.fixture
def keyring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("LANGGRAPH_AES_KEY", raising=False)
    monkeypatch.delenv("SECURE_SERDE_KEYRING_STRICT_MODES", raising=False)
    path = tmp_path / "keyring.json"
    path.write_text(json.dumps({"primary": "2025-06", "keys": {"2025-06": KEY}}))
    monkeypatch.setenv(KEYRING_FILE_VAR, str(path))
    return path


@pytest.mark.parametrize(
    ("mode", "who"),
    [
        (0o644, "group and others"),
        (0o640, "group"),
        (0o604, "others"),
        (0o660, "group"),
        (0o606, "others"),
        (0o620, "group"),  # writable by group: it could swap the keys
    ],
)
def test_a_keyring_file_open_to_others_is_refused(keyring: Path, mode: int, who: str) -> None:
    keyring.chmod(mode)
    with pytest.raises(ConfigurationError) as info:
        KeyRotationCipher.from_env()
    message = str(info.value)
    assert str(keyring) in message
    assert f"open to {who} (mode {mode:04o})" in message
    assert f"chmod 600 {keyring}" in message
    assert "SECURE_SERDE_KEYRING_STRICT_MODES=no" in message
    assert KEY[7:] not in message


@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_a_private_keyring_file_is_read(keyring: Path, mode: int) -> None:
    keyring.chmod(mode)
    cipher = KeyRotationCipher.from_env()
    assert cipher.label_for(cipher.primary_key_id) == "2025-06"


@pytest.mark.parametrize("value", ["no", "0", "off", "FALSE"])
def test_the_override_accepts_it_with_a_warning(
    keyring: Path,
    value: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    keyring.chmod(0o644)
    monkeypatch.setenv("SECURE_SERDE_KEYRING_STRICT_MODES", value)
    with caplog.at_level("WARNING", logger="secure_serde"):
        cipher = KeyRotationCipher.from_env()
    assert cipher.label_for(cipher.primary_key_id) == "2025-06"
    [warning] = [r.getMessage() for r in caplog.records if "keyring file" in r.getMessage()]
    assert str(keyring) in warning
    assert "0644" in warning
    assert KEY[7:] not in warning


@pytest.mark.parametrize("value", ["", "yes", "1", "maybe"])
def test_anything_else_keeps_the_check(
    keyring: Path, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    keyring.chmod(0o644)
    monkeypatch.setenv("SECURE_SERDE_KEYRING_STRICT_MODES", value)
    with pytest.raises(ConfigurationError, match="mode 0644"):
        KeyRotationCipher.from_env()


def test_the_cli_refuses_it_naming_file_and_mode(
    keyring: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    keyring.chmod(0o644)
    code, out, err = run_main(capsys, "audit", str(tmp_path / "any.sqlite"))
    assert code == 2
    assert f"keyring file {keyring} is open to group and others (mode 0644)" in err
    assert KEY[7:] not in out + err
