"""No constructor failure leaves a secret in a traceback frame local (issue 22, item 2).

For the key-holding constructors: `EnvKeyCipher`, `KeyRotationCipher` (and
``from_env``), `KmsEnvelopeCipher`, and the ``secure-serde keyring`` editor,
which builds a `KeyRotationCipher` from a file. Each failure is raised for
real and every frame of its traceback and chain is searched with
`tests.secrets_support.assert_no_secret_locals` (itself tested against a
leaking frame in tests/test_secrets_tracebacks.py). The KMS constructor
takes no key, but a key pasted into ``kms_key=``, ``decrypt_kms_keys=`` or
the encryption context by mistake is a key all the same, and so are the
AWS credentials botocore reads while it builds a client.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from secure_serde import ConfigurationError
from secure_serde.ciphers import EnvKeyCipher, KeyRotationCipher, KmsEnvelopeCipher
from secure_serde.cli import _keyring
from tests.secrets_support import assert_no_secret_locals, key_forms

KEY = "constructor-test-key-0123456789a"
ENCODED = "base64:" + "Y29uc3RydWN0b3ItdGVzdC1rZXktZW5jb2RlZC0zMmI="
ARN = "arn:aws:kms:us-east-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def _raised(action: Callable[[], object]) -> BaseException:
    with pytest.raises(ConfigurationError) as info:
        action()
    return info.value


@pytest.mark.parametrize("pasted", [KEY, ENCODED])
@pytest.mark.parametrize(
    "build",
    [
        # A key pasted as the KMS key, refused for another argument.
        lambda k: KmsEnvelopeCipher(k, client=object(), botocore_config=object()),
        lambda k: KmsEnvelopeCipher(ARN, client=object(), decrypt_kms_keys=[k, 5]),  # type: ignore[list-item]
        lambda k: KmsEnvelopeCipher(ARN, client=object(), decrypt_kms_keys=k),
        lambda k: KmsEnvelopeCipher(ARN, client=object(), encryption_context={"purpose": k}),
        lambda k: KmsEnvelopeCipher(ARN, client=object(), encryption_context={k: 5}),  # type: ignore[dict-item]
        lambda k: KmsEnvelopeCipher(k, client=object(), max_messages=0),
    ],
)
def test_kms_constructor_failures_leave_no_pasted_key(
    build: Callable[[str], object], pasted: str
) -> None:
    assert_no_secret_locals(_raised(lambda: build(pasted)), *key_forms(pasted))


def test_a_kms_client_that_cannot_be_built_leaves_no_aws_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE12")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
    for name in ("AWS_DEFAULT_REGION", "AWS_REGION", "AWS_PROFILE", "AWS_CONFIG_FILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config")
    error = _raised(lambda: KmsEnvelopeCipher(ARN))
    assert_no_secret_locals(error, AWS_SECRET)


@pytest.mark.parametrize(
    "build",
    [
        lambda: EnvKeyCipher(KEY, legacy_mode=3),
        lambda: KeyRotationCipher({"a": KEY, "b": KEY}, "a"),
        lambda: KeyRotationCipher({"a": KEY, "b": ENCODED}, "a", retired=["a"]),
        lambda: KeyRotationCipher({"a": KEY, "b": ENCODED}, "a", legacy_key="a", legacy_mode=1),
    ],
)
def test_cipher_constructor_failures_leave_no_key(build: Callable[[], object]) -> None:
    assert_no_secret_locals(_raised(build), *key_forms(KEY), *key_forms(ENCODED))


ENV = "env-key-for-constructor-tests-01"


@pytest.mark.parametrize(
    "config",
    [
        {"keys": {"env": KEY}},  # the label LANGGRAPH_AES_KEY holds
        {"keys": {"a": KEY, "b": KEY}, "primary": "a"},  # one key twice
        {"keys": {"a": KEY, "b": ENCODED[:-2]}, "primary": "a"},
        {"keys": {"a": KEY}, "primary": "a", "retired": ["a"]},
    ],
)
def test_keyring_file_failures_leave_no_key(
    config: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "keyring.json"
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    monkeypatch.setenv("SECURE_SERDE_KEYRING_FILE", str(path))
    monkeypatch.setenv("LANGGRAPH_AES_KEY", ENV)
    error = _raised(KeyRotationCipher.from_env)
    assert_no_secret_locals(
        error, *key_forms(KEY), *key_forms(ENCODED), *key_forms(ENCODED[:-2]), *key_forms(ENV)
    )


@pytest.mark.parametrize(
    ("config", "args"),
    [
        ({"keys": {"a": KEY, "b": KEY}, "primary": "a"}, {"action": "promote", "label": "b"}),
        (
            {"keys": {"a": KEY, "b": ENCODED[:-2]}, "primary": "a"},
            {"action": "retire", "label": "b"},
        ),
        ({"keys": {"a": KEY, "b": ENCODED}, "primary": "a"}, {"action": "drop", "label": "b"}),
        ({"keys": {"a": KEY, "b": KEY}, "primary": "a"}, {"action": "show", "reveal": True}),
        ({"keys": {"a": KEY, "b": 5}, "primary": "a"}, {"action": "add", "label": "c"}),
    ],
)
def test_keyring_command_failures_leave_no_key(
    config: dict[str, Any], args: dict[str, Any], tmp_path: Path
) -> None:
    # Called below the CLI's own error printing, as a program embedding it would.
    path = tmp_path / "keyring.json"
    path.write_text(json.dumps(config))
    path.chmod(0o600)
    error = _raised(lambda: _keyring.run(argparse.Namespace(file=path, **args)))
    assert_no_secret_locals(error, *key_forms(KEY), *key_forms(ENCODED), *key_forms(ENCODED[:-2]))
