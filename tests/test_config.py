"""`secure_serde.config`: what an application builds from the environment is what the CLI reads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from secure_serde import ConfigurationError, EncryptedSerializer
from secure_serde.ciphers import KeyRotationCipher, KmsEnvelopeCipher
from secure_serde.cli import main
from secure_serde.config import ciphers_from_env, serializer_from_env
from tests.ciphers.kms_support import new_cmk
from tests.cli.cli_support import only_env_key
from tests.rewrap.rewrap_support import KEY_A, KEY_B, run_turns, sqlite_graph


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    only_env_key(monkeypatch, None)


def _audit(store: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["audit", str(store)])
    out, err = capsys.readouterr()
    return code, out + err


def test_no_keys_is_a_clear_configuration_error() -> None:
    assert ciphers_from_env() is None
    with pytest.raises(ConfigurationError, match="LANGGRAPH_AES_KEY"):
        serializer_from_env()


def test_env_key_app_store_is_clean_for_audit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY_A)
    serde = serializer_from_env()
    assert isinstance(serde, EncryptedSerializer)
    store = tmp_path / "app.sqlite"
    with sqlite_graph(store, serde) as graph:
        run_turns(graph, "t1", 2)
    code, text = _audit(store, capsys)
    assert code == 0, text
    # Another key: the same store is not readable, and audit says so.
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY_B)
    code, text = _audit(store, capsys)
    assert code != 0


def test_keyring_file_names_the_primary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = tmp_path / "keyring.json"
    path.write_text(json.dumps({"primary": "b", "keys": {"b": KEY_B}}))
    path.chmod(0o600)
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY_A)
    monkeypatch.setenv("SECURE_SERDE_KEYRING_FILE", str(path))
    serde = serializer_from_env()
    assert isinstance(serde.cipher, KeyRotationCipher)
    assert serde.cipher.label_for(serde.cipher.primary_key_id) == "b"
    # Rows under the env key ("env") still read.
    old = EncryptedSerializer.from_pycryptodome_aes(key=KEY_A)
    assert serde.loads_typed(old.dumps_typed({"x": 1})) == {"x": 1}


def test_kms_key_becomes_the_primary_and_aes_keys_only_read(
    monkeypatch: pytest.MonkeyPatch, kms_endpoint: str, kms_client: Any
) -> None:
    arn = new_cmk(kms_client)
    monkeypatch.setenv("AWS_ENDPOINT_URL_KMS", kms_endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY_A)
    monkeypatch.setenv("SECURE_SERDE_KMS_KEY_ID", arn)
    serde = serializer_from_env()
    assert isinstance(serde.cipher, KmsEnvelopeCipher)
    type_tag, _ = serde.dumps_typed({"x": 1})
    assert type_tag.endswith("+" + next(iter(serde.cipher.cipher_names)))
    old = EncryptedSerializer.from_pycryptodome_aes(key=KEY_A)
    assert serde.loads_typed(old.dumps_typed({"x": 2})) == {"x": 2}
