"""`secure_serde.config`: what an application builds from the environment is what the CLI reads."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from secure_serde import ConfigurationError, EncryptedSerializer, config
from secure_serde.ciphers import KeyRotationCipher, KmsEnvelopeCipher
from secure_serde.cli import main
from secure_serde.config import ciphers_from_env, serializer_from_env
from tests.ciphers.kms_support import new_cmk
from tests.cli.cli_support import only_env_key
from tests.passes.rewrap_support import KEY_A, KEY_B, run_turns, sqlite_graph


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
    monkeypatch.setenv("SECURE_SERDE_KMS_KEY", arn)
    serde = serializer_from_env()
    assert isinstance(serde.cipher, KmsEnvelopeCipher)
    type_tag, _ = serde.dumps_typed({"x": 1})
    assert type_tag.endswith("+" + next(iter(serde.cipher.cipher_names)))
    old = EncryptedSerializer.from_pycryptodome_aes(key=KEY_A)
    assert serde.loads_typed(old.dumps_typed({"x": 2})) == {"x": 2}


# -- 0.3's variable names (SECURE_SERDE_KMS_KEY_ID, ..._DECRYPT_KEY_IDS): read until 0.5 --------


def _kms_env(monkeypatch: pytest.MonkeyPatch, kms_endpoint: str) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_KMS", kms_endpoint)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


def test_the_0_3_kms_variable_names_are_read_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, kms_endpoint: str, kms_client: Any
) -> None:
    current, older = new_cmk(kms_client), new_cmk(kms_client)
    _kms_env(monkeypatch, kms_endpoint)
    monkeypatch.setenv("SECURE_SERDE_KMS_KEY_ID", current)
    monkeypatch.setenv("SECURE_SERDE_KMS_DECRYPT_KEY_IDS", older)
    with pytest.warns(DeprecationWarning, match="SECURE_SERDE_KMS_") as seen:
        configured = ciphers_from_env()
    messages = sorted(str(w.message) for w in seen if w.category is DeprecationWarning)
    assert len(messages) == 2, messages
    assert messages[0].startswith("SECURE_SERDE_KMS_DECRYPT_KEY_IDS is deprecated: set SECURE_")
    assert "SECURE_SERDE_KMS_DECRYPT_KEYS instead" in messages[0]
    assert "SECURE_SERDE_KMS_KEY instead" in messages[1]
    assert configured is not None
    assert configured.kms is not None
    assert configured.kms.kms_key == current
    assert configured.kms.decrypt_kms_keys == (older,)
    # The same value under both names is the same configuration (still a warning).
    monkeypatch.setenv("SECURE_SERDE_KMS_KEY", current)
    monkeypatch.delenv("SECURE_SERDE_KMS_DECRYPT_KEY_IDS")
    with pytest.warns(DeprecationWarning, match="SECURE_SERDE_KMS_KEY_ID is deprecated"):
        assert ciphers_from_env() is not None


def test_the_new_kms_variable_names_warn_nothing(
    monkeypatch: pytest.MonkeyPatch, kms_endpoint: str, kms_client: Any
) -> None:
    current, older = new_cmk(kms_client), new_cmk(kms_client)
    _kms_env(monkeypatch, kms_endpoint)
    monkeypatch.setenv("SECURE_SERDE_KMS_KEY", current)
    monkeypatch.setenv("SECURE_SERDE_KMS_DECRYPT_KEYS", older)
    monkeypatch.setenv("SECURE_SERDE_KMS_KEY_ID", "")  # empty: unset, as it always was
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        configured = ciphers_from_env()
    assert configured is not None
    assert configured.kms is not None
    assert (configured.kms.kms_key, configured.kms.decrypt_kms_keys) == (current, (older,))


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("SECURE_SERDE_KMS_KEY", "SECURE_SERDE_KMS_KEY_ID"),
        ("SECURE_SERDE_KMS_DECRYPT_KEYS", "SECURE_SERDE_KMS_DECRYPT_KEY_IDS"),
    ],
)
def test_both_kms_names_set_differently_are_refused_by_name_not_value(
    monkeypatch: pytest.MonkeyPatch, new: str, old: str
) -> None:
    monkeypatch.setenv("SECURE_SERDE_KMS_KEY", "alias/app-key-one")
    monkeypatch.setenv(new, "alias/app-key-one")
    monkeypatch.setenv(old, "alias/app-key-two")
    with pytest.raises(ConfigurationError) as info:
        ciphers_from_env()
    message = str(info.value)
    assert new in message
    assert old in message
    assert "app-key" not in message


def test_the_0_3_constant_names_warn_and_are_the_new_constants() -> None:
    for old, new in (
        ("KMS_KEY_ID_VAR", "KMS_KEY_VAR"),
        ("KMS_DECRYPT_KEY_IDS_VAR", "KMS_DECRYPT_KEYS_VAR"),
    ):
        with pytest.warns(DeprecationWarning, match=rf"config\.{old} .*config\.{new}"):
            assert getattr(config, old) == getattr(config, new)
        assert old not in config.__all__
    assert config.KMS_KEY_VAR == "SECURE_SERDE_KMS_KEY"
    assert config.KMS_DECRYPT_KEYS_VAR == "SECURE_SERDE_KMS_DECRYPT_KEYS"
    with pytest.raises(AttributeError):
        config.NO_SUCH_VAR  # noqa: B018
