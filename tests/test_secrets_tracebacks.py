"""No error leaving secure_serde holds a key in a traceback frame local (issue 9).

Error trackers that capture locals (Sentry's default) send the ``repr`` of
every frame local off the host. Each test raises a real error through the
public API and walks every frame of it, and of its ``__cause__`` and
``__context__`` chain, with `tests.secrets_support.assert_no_secret_locals`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as BuiltinSerializer

from secure_serde import (
    ConfigurationError,
    DecryptionError,
    EncryptedSerializer,
    KmsDecryptionError,
    KmsEncryptionError,
)
from secure_serde.ciphers import (
    KEYRING_FILE_VAR,
    EnvKeyCipher,
    KeyRotationCipher,
    KmsEnvelopeCipher,
)
from secure_serde.crypto import Key, parse_key, read_env_key
from tests.ciphers.kms_support import new_cmk
from tests.secrets_support import assert_no_secret_locals, key_forms, secret_findings

KEY = "traceback-test-key-0123456789abc"
OTHER = "base64:" + "QUJD" * 10 + "QUJDRA=="  # 32 bytes: "ABC" * 10 + "ABCD"


def _raised(action: Callable[[], object], kind: type[BaseException] = Exception) -> BaseException:
    with pytest.raises(kind) as info:
        action()
    return info.value


# -- the check itself can fail -------------------------------------------------------------------


class _RefusingKey:
    """Stands in for `Key` as ``cls``: fails once derive holds the key and its derivations."""

    def __init__(self, **fields: object) -> None:
        raise ConfigurationError("refused")


def _leaky_error() -> BaseException:
    # Key.derive without its `scrubbed` wrapper: a package frame that holds
    # the key while an error (raised by the class it builds) passes through it.
    derive = Key.derive.__func__.__wrapped__  # type: ignore[attr-defined]
    try:
        derive(_RefusingKey, KEY, label="x")
    except ConfigurationError as exc:
        return exc
    raise AssertionError("derive built a key through a class that refuses")


def test_the_check_finds_a_key_in_a_frame_local() -> None:
    error = _leaky_error()
    findings = secret_findings(error, key_forms(KEY))
    assert any("local 'key' of derive" in f for f in findings), findings
    assert any("local 'material' of derive" in f for f in findings), findings
    with pytest.raises(AssertionError, match="secret found"):
        assert_no_secret_locals(error, *key_forms(KEY))
    # The same call through the wrapper is clean: the wrapper is what works.
    wrapped = _raised(lambda: Key.derive.__func__(_RefusingKey, KEY, label="x"))  # type: ignore[attr-defined]
    assert_no_secret_locals(wrapped, *key_forms(KEY))


def test_the_check_follows_cause_and_context() -> None:
    leaky = _leaky_error()
    outer = ConfigurationError("outer")
    outer.__cause__ = leaky
    assert secret_findings(outer, [KEY])
    outer2 = ConfigurationError("outer")
    outer2.__context__ = leaky
    assert secret_findings(outer2, [KEY])


def test_scrubbed_keeps_the_message_type_and_lines() -> None:
    from secure_serde._scrub import scrubbed

    @scrubbed
    def fails(secret: str) -> None:
        raise ValueError(f"length {len(secret)}")

    error = _raised(lambda: fails(KEY), ValueError)
    assert str(error) == f"length {len(KEY)}"
    assert error.__traceback__ is not None
    assert_no_secret_locals(error, KEY)


# -- the read paths ------------------------------------------------------------------------------


def test_a_garbage_legacy_row_leaves_no_key_in_any_frame(env_key: str) -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes()
    for blob in (os.urandom(64), os.urandom(20)):
        error = _raised(partial(serde.loads_typed, ("msgpack+aes", blob)), DecryptionError)
        assert_no_secret_locals(error, *key_forms(env_key))


def test_a_tampered_builtin_row_leaves_no_key_in_any_frame(env_key: str) -> None:
    tag, blob = BuiltinSerializer.from_pycryptodome_aes().dumps_typed({"a": 1})
    tampered = blob[:-1] + bytes([blob[-1] ^ 1])
    serde = EncryptedSerializer.from_pycryptodome_aes(mode=None)
    error = _raised(lambda: serde.loads_typed((tag, tampered)), DecryptionError)
    assert_no_secret_locals(error, *key_forms(env_key))


def test_tampered_and_garbage_v1_rows_leave_no_key() -> None:
    serde = EncryptedSerializer(EnvKeyCipher(KEY))
    tag, blob = serde.dumps_typed({"a": 1})
    for bad in (blob[:-1] + bytes([blob[-1] ^ 1]), blob[:20], b"\x01" + os.urandom(40)):
        error = _raised(partial(serde.loads_typed, (tag, bad)), DecryptionError)
        assert_no_secret_locals(error, *key_forms(KEY))


def test_a_retired_legacy_key_leaves_no_key(env_key: str) -> None:
    tag, blob = BuiltinSerializer.from_pycryptodome_aes().dumps_typed({"a": 1})
    cipher = KeyRotationCipher(
        {"env": env_key, "new": KEY}, "new", retired=["env"], legacy_key="env"
    )
    error = _raised(lambda: EncryptedSerializer(cipher).loads_typed((tag, blob)), DecryptionError)
    assert_no_secret_locals(error, *key_forms(env_key), *key_forms(KEY))


# -- key parsing -----------------------------------------------------------------------------------

BAD_KEYS = [
    "k" * 31,  # one short
    "traceback-test-key-0123456789abc\n" * 2,
    "base64:" + "A" * 43 + "*",
    "base64:" + "QUJD" * 4,  # valid base64, 12 bytes
    "üü" + "x" * 14,  # 16 characters, 18 bytes
    "tracebäck-key-\udcff-0123456789",  # undecodable bytes as os.environ passes them
]


@pytest.mark.parametrize("bad", BAD_KEYS)
def test_key_parsing_errors_leave_no_key(bad: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if len(bad.encode("utf-8", "surrogatepass")) in (16, 24, 32) and "\udcff" not in bad:
        pytest.fail(f"BAD_KEYS entry of valid length: {len(bad.encode())} bytes")
    forms = key_forms(bad)
    actions: list[Callable[[], object]] = [
        lambda: parse_key(bad),
        lambda: EnvKeyCipher(bad),
        lambda: Key.derive(bad, label="x"),
        lambda: EncryptedSerializer.from_pycryptodome_aes(key=bad),
        lambda: KeyRotationCipher({"a": KEY, "b": bad}, "a"),
    ]
    for action in actions:
        assert_no_secret_locals(_raised(action, ConfigurationError), *forms)
    monkeypatch.setenv("LANGGRAPH_AES_KEY", bad)
    for action in (
        read_env_key,
        EnvKeyCipher,
        EncryptedSerializer.from_pycryptodome_aes,
        KeyRotationCipher.from_env,
    ):
        assert_no_secret_locals(_raised(action, ConfigurationError), *forms)


def test_a_bad_legacy_mode_leaves_no_key() -> None:
    for action in (
        lambda: EnvKeyCipher(KEY, legacy_mode=5),
        lambda: EncryptedSerializer.from_pycryptodome_aes(key=KEY, mode=1),
        lambda: KeyRotationCipher({"a": KEY}, "a", legacy_key="a", legacy_mode=2),
    ):
        assert_no_secret_locals(_raised(action, ConfigurationError), *key_forms(KEY))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"primary": KEY},
        {"primary": "a", "retired": [KEY]},
        {"primary": "a", "legacy_key": KEY},
        {"primary": "a", "retired": ["a"]},
    ],
)
def test_keyring_argument_errors_leave_no_key(kwargs: dict[str, Any]) -> None:
    error = _raised(lambda: KeyRotationCipher({"a": OTHER}, **kwargs), ConfigurationError)
    assert_no_secret_locals(error, *key_forms(KEY), *key_forms(OTHER))


# -- keyring files ----------------------------------------------------------------------------

BAD_FILES: list[Any] = [
    {"keys": {"a": OTHER}, "primary": KEY},
    {"keys": {"a": OTHER}, "primary": "a", "retired": [KEY]},
    {"keys": {"a": OTHER}, "primary": "a", "legacy_key": KEY},
    {"keys": {"a": OTHER, "b": 7}, "primary": "a"},
    {"keys": {"a": OTHER}, "primary": "a", "legacy_key": 5},
    {"keys": {"a": OTHER}, "primary": "a", "legacy_mode": "ctr"},
    {"keys": {"a": OTHER, "b": KEY[:-1]}, "primary": "a"},
    {"keys": {"a": OTHER}, "primary": "a", "extra": KEY},
    '{"keys": {"a": "' + OTHER + '"}, "primary": ',  # truncated JSON
]


@pytest.mark.parametrize("content", BAD_FILES)
def test_keyring_file_errors_leave_no_key(
    content: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "keyring.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    path.chmod(0o600)
    monkeypatch.setenv(KEYRING_FILE_VAR, str(path))
    monkeypatch.setenv("LANGGRAPH_AES_KEY", "env-key-for-traceback-tests-0123")
    error = _raised(KeyRotationCipher.from_env, ConfigurationError)
    assert_no_secret_locals(
        error,
        *key_forms(KEY),
        *key_forms(OTHER),
        *key_forms(KEY[:-1]),
        *key_forms("env-key-for-traceback-tests-0123"),
    )


def test_a_loose_keyring_file_error_leaves_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "keyring.json"
    path.write_text(json.dumps({"keys": {"a": OTHER}, "primary": "a"}))
    path.chmod(0o644)
    monkeypatch.setenv(KEYRING_FILE_VAR, str(path))
    error = _raised(KeyRotationCipher.from_env, ConfigurationError)
    assert "0644" in str(error)
    assert_no_secret_locals(error, *key_forms(OTHER))


# -- KMS -------------------------------------------------------------------------------------------


class _DataKeyTap:
    """Records every plaintext data key a real KMS answer carries, and can bend the answer.

    A botocore ``after-call`` hook on the client: the HTTP exchange with the
    moto server is real; only the parsed answer is seen (and, to test the
    client's checks, changed) on its way back to the cipher.
    """

    def __init__(self, client: Any) -> None:
        self.data_keys: list[bytes] = []
        self.other_key: str | None = None
        self.long_wrapped = False
        client.meta.events.register("after-call.kms.*", self._after)

    def _after(self, parsed: dict[str, Any], **_: Any) -> None:
        plaintext = parsed.get("Plaintext")
        if isinstance(plaintext, bytes):
            self.data_keys.append(plaintext)
        if self.other_key is not None and "KeyId" in parsed:
            parsed["KeyId"] = self.other_key
        if self.long_wrapped and "CiphertextBlob" in parsed:
            parsed["CiphertextBlob"] = parsed["CiphertextBlob"] * 200


def test_kms_errors_leave_no_data_key(kms_client: Any) -> None:
    cmk, other = new_cmk(kms_client), new_cmk(kms_client)
    tap = _DataKeyTap(kms_client)
    writer = EncryptedSerializer(
        KmsEnvelopeCipher(cmk, client=kms_client, encryption_context={"tenant": "acme"})
    )
    row = writer.dumps_typed({"a": 1})
    # A reader under another context: KMS refuses to unwrap.
    reader = EncryptedSerializer(
        KmsEnvelopeCipher(cmk, client=kms_client, encryption_context={"tenant": "evil"})
    )
    errors = [_raised(lambda: reader.loads_typed(row), KmsDecryptionError)]
    # KMS answers for another key: Decrypt (the answer holds the data key)...
    tap.other_key = other
    fresh = EncryptedSerializer(
        KmsEnvelopeCipher(cmk, client=kms_client, encryption_context={"tenant": "acme"})
    )
    errors.append(_raised(lambda: fresh.loads_typed(row), KmsDecryptionError))
    # ...and GenerateDataKey.
    writer2 = EncryptedSerializer(KmsEnvelopeCipher(cmk, client=kms_client))
    errors.append(_raised(lambda: writer2.dumps_typed({"a": 1}), KmsEncryptionError))
    # A wrapped key longer than the format holds, with the data key in hand.
    tap.other_key = None
    tap.long_wrapped = True
    writer3 = EncryptedSerializer(KmsEnvelopeCipher(cmk, client=kms_client))
    errors.append(_raised(lambda: writer3.dumps_typed({"a": 1}), KmsEncryptionError))
    assert len(tap.data_keys) >= 4
    for error in errors:
        assert_no_secret_locals(error, *tap.data_keys)


# -- every hostile row at once ---------------------------------------------------------------------


def test_no_hostile_row_leaves_a_key_in_any_frame(env_key: str) -> None:
    """Planted, relabelled, truncated and foreign rows through a keyring that reads legacy rows."""
    other = "another-key-of-32-characters-xyz"
    cipher = KeyRotationCipher(
        {"env": env_key, "new": KEY, "old": other}, "new", retired=["old"], legacy_key="env"
    )
    serde = EncryptedSerializer(cipher)
    tag, blob = serde.dumps_typed({"a": [1, 2]})
    _, builtin_blob = BuiltinSerializer.from_pycryptodome_aes().dumps_typed(b"raw")
    retired_row = EncryptedSerializer(EnvKeyCipher(other)).dumps_typed({"a": 1})
    foreign_row = EncryptedSerializer(EnvKeyCipher("a-key-nobody-configured-32-chars")).dumps_typed(
        {"a": 1}
    )
    rows = [
        ("pickle", b"\x80\x04K\x01."),  # planted plaintext pickle
        ("msgpack", b"\x81\xa1a\x01"),  # planted plaintext
        ("pickle+aes", builtin_blob),  # relabelled built-in row
        (tag.replace("msgpack", "bytes"), blob),  # relabelled v1 row
        (tag, blob[:5]),
        (tag, blob[:-3]),
        (tag, b"\x7f" + blob[1:]),  # unknown format version (1 and 2 exist)
        (tag.replace("aesgcm", "unknown"), blob),
        retired_row,
        foreign_row,
        ("msgpack+aes", os.urandom(100)),
    ]
    secrets = [*key_forms(env_key), *key_forms(KEY), *key_forms(other)]
    for row in rows:
        with pytest.raises(DecryptionError) as info:
            serde.loads_typed(row)
        assert_no_secret_locals(info.value, *secrets)
