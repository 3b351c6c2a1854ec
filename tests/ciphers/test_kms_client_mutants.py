"""What the KMS client layer does that moto's well-behaved answers never exercised.

Found by mutation testing (docs/mutation.md): the client a cipher builds for
itself and its settings, the checks on a ``DescribeKey`` answer, and the error
code and hint of a failed call. KMS is moto over HTTP, through the
rewriting proxy of `tests.ciphers.kms_proxy` where an answer must be wrong.
"""

from __future__ import annotations

import base64
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from botocore.config import Config

from secure_serde import (
    ConfigurationError,
    EncryptedSerializer,
    KmsDecryptionError,
    KmsEncryptionError,
)
from secure_serde.ciphers import KmsEnvelopeCipher
from tests.ciphers.kms_proxy import Edit, KmsRewritingProxy, drop_field, set_field
from tests.ciphers.kms_support import REGION, kms_client, new_cmk

STATE = {"ssn": "123-45-6789"}
DEFAULT_RETRIES = {"mode": "standard", "total_max_attempts": 3}


@pytest.fixture
def proxy(kms_endpoint: str) -> Iterator[KmsRewritingProxy]:
    server = KmsRewritingProxy(kms_endpoint)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def direct(kms_endpoint: str) -> Any:
    return kms_client(kms_endpoint, timeout=30.0)


@pytest.fixture
def proxied(proxy: KmsRewritingProxy) -> Any:
    return kms_client(proxy.endpoint, attempts=1, timeout=30.0)


@pytest.fixture
def cmk(direct: Any) -> str:
    return new_cmk(direct)


@pytest.fixture
def aws_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, kms_endpoint: str) -> None:
    """boto3's default session, pointed at moto by the environment alone."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    monkeypatch.setenv("AWS_ENDPOINT_URL_KMS", kms_endpoint)


# --- the client a cipher builds for itself ----------------------------------------------------


@pytest.mark.usefixtures("aws_environment")
def test_a_cipher_without_a_client_builds_one_with_the_documented_settings(cmk: str) -> None:
    cipher = KmsEnvelopeCipher(cmk)
    serde = EncryptedSerializer(cipher)
    assert serde.loads_typed(serde.dumps_typed(STATE)) == STATE
    assert cipher.client.meta.service_model.service_name == "kms"
    config = cipher.client.meta.config
    assert config.retries == DEFAULT_RETRIES
    assert (config.connect_timeout, config.read_timeout) == (2, 5)


@pytest.mark.usefixtures("aws_environment")
def test_botocore_config_is_merged_over_the_defaults(cmk: str) -> None:
    cipher = KmsEnvelopeCipher(cmk, botocore_config=Config(read_timeout=9))
    config = cipher.client.meta.config
    assert (config.connect_timeout, config.read_timeout) == (2, 9)
    assert config.retries == DEFAULT_RETRIES
    serde = EncryptedSerializer(cipher)
    assert serde.loads_typed(serde.dumps_typed(STATE)) == STATE


@pytest.mark.usefixtures("aws_environment")
def test_no_region_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch, cmk: str) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(ConfigurationError, match="could not build a KMS client"):
        KmsEnvelopeCipher(cmk)


# --- DescribeKey answers ----------------------------------------------------------------------

BAD_DESCRIPTIONS: dict[str, Edit] = {
    "no-metadata": drop_field("KeyMetadata"),
    "no-arn": drop_field("KeyMetadata", "Arn"),
    "arn-not-a-key-arn": set_field("KeyMetadata", "Arn", "arn:aws:kms:us-east-1:1:alias/x"),
    "arn-not-text": set_field("KeyMetadata", "Arn", 12),
}


@pytest.mark.parametrize("edit", BAD_DESCRIPTIONS.values(), ids=BAD_DESCRIPTIONS.keys())
def test_a_describe_key_answer_without_a_key_arn_is_refused(
    proxy: KmsRewritingProxy, direct: Any, proxied: Any, cmk: str, edit: Edit
) -> None:
    alias = "alias/secure-serde-describe"
    direct.create_alias(AliasName=alias, TargetKeyId=cmk)
    try:
        proxy.rewrites["DescribeKey"] = edit
        serde = EncryptedSerializer(KmsEnvelopeCipher(alias, client=proxied))
        with pytest.raises(KmsEncryptionError) as raised:
            serde.dumps_typed(STATE)
        assert (raised.value.operation, raised.value.key_arn) == ("DescribeKey", alias)
        assert raised.value.error_code == "BadResponse"
        # The alias is resolved again once KMS answers properly.
        del proxy.rewrites["DescribeKey"]
        assert serde.loads_typed(serde.dumps_typed(STATE)) == STATE
        assert proxy.seen == ["DescribeKey", "DescribeKey", "GenerateDataKey"]
    finally:
        direct.delete_alias(AliasName=alias)


# --- data keys of the wrong size, or none ------------------------------------------------------

SHORT_KEY = base64.b64encode(bytes(16)).decode()
BAD_DATA_KEYS: dict[str, tuple[Edit, str]] = {
    "short-key": (set_field("Plaintext", SHORT_KEY), "a data key that is not 32 bytes"),
    "no-key": (drop_field("Plaintext"), "a data key that is not 32 bytes"),
    "empty-wrapped-key": (set_field("CiphertextBlob", ""), "no wrapped data key"),
    "no-wrapped-key": (drop_field("CiphertextBlob"), "no wrapped data key"),
}


@pytest.mark.parametrize(("edit", "what"), BAD_DATA_KEYS.values(), ids=BAD_DATA_KEYS.keys())
def test_generate_data_key_without_a_usable_key_is_refused(
    proxy: KmsRewritingProxy, proxied: Any, cmk: str, edit: Edit, what: str
) -> None:
    proxy.rewrites["GenerateDataKey"] = edit
    with pytest.raises(KmsEncryptionError) as raised:
        EncryptedSerializer(KmsEnvelopeCipher(cmk, client=proxied)).dumps_typed(STATE)
    assert (raised.value.operation, raised.value.key_arn) == ("GenerateDataKey", cmk)
    assert raised.value.error_code == "BadResponse"
    assert str(raised.value) == f"KMS GenerateDataKey for {cmk} returned {what}"


@pytest.mark.parametrize("edit", [set_field("Plaintext", SHORT_KEY), drop_field("Plaintext")])
def test_decrypt_without_a_usable_key_is_refused(
    proxy: KmsRewritingProxy, direct: Any, proxied: Any, cmk: str, edit: Edit
) -> None:
    row = EncryptedSerializer(KmsEnvelopeCipher(cmk, client=direct)).dumps_typed(STATE)
    proxy.rewrites["Decrypt"] = edit
    with pytest.raises(KmsDecryptionError) as raised:
        EncryptedSerializer(KmsEnvelopeCipher(cmk, client=proxied)).loads_typed(row)
    assert (raised.value.operation, raised.value.key_arn) == ("Decrypt", cmk)
    assert raised.value.error_code == "BadResponse"
    assert str(raised.value) == f"KMS Decrypt for {cmk} returned a data key that is not 32 bytes"


def test_every_request_names_the_cmk_and_the_context(
    proxy: KmsRewritingProxy, proxied: Any, cmk: str
) -> None:
    """KMS is told which key must answer: Decrypt under any other CMK then fails at KMS."""
    context = {"tenant": "acme"}
    writer = KmsEnvelopeCipher(cmk, client=proxied, encryption_context=context)
    row = EncryptedSerializer(writer).dumps_typed(STATE)
    reader = KmsEnvelopeCipher(cmk, client=proxied, encryption_context=context)
    assert EncryptedSerializer(reader).loads_typed(row) == STATE
    assert [op for op, _ in proxy.requests] == ["GenerateDataKey", "Decrypt"]
    for _, request in proxy.requests:
        assert request["KeyId"] == cmk
        assert request["EncryptionContext"] == writer.encryption_context
    assert proxy.requests[0][1]["KeySpec"] == "AES_256"


# --- failed calls: the error code and its hint ------------------------------------------------


def test_an_error_code_kms_does_not_model_is_reported_as_sent(
    proxy: KmsRewritingProxy, proxied: Any, cmk: str
) -> None:
    proxy.failures["GenerateDataKey"] = "SecureSerdeTestException"
    with pytest.raises(KmsEncryptionError) as raised:
        EncryptedSerializer(KmsEnvelopeCipher(cmk, client=proxied)).dumps_typed(STATE)
    assert raised.value.error_code == "SecureSerdeTestException"
    # No hint for a code without one: the code is followed by the client's own text.
    assert str(raised.value).startswith(
        f"KMS GenerateDataKey for {cmk} failed: SecureSerdeTestException: "
    )


def test_a_known_error_code_comes_with_its_hint(
    proxy: KmsRewritingProxy, direct: Any, proxied: Any, cmk: str
) -> None:
    row = EncryptedSerializer(KmsEnvelopeCipher(cmk, client=direct)).dumps_typed(STATE)
    proxy.failures["Decrypt"] = "IncorrectKeyException"
    with pytest.raises(KmsDecryptionError) as raised:
        EncryptedSerializer(KmsEnvelopeCipher(cmk, client=proxied)).loads_typed(row)
    assert (raised.value.operation, raised.value.error_code) == ("Decrypt", "IncorrectKeyException")
    assert str(raised.value).startswith(
        f"KMS Decrypt for {cmk} failed: IncorrectKeyException"
        " (the data key was wrapped under another KMS key): "
    )


def test_an_unreachable_endpoint_is_reported_by_its_botocore_error(cmk: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = kms_client(f"http://127.0.0.1:{port}", attempts=1, timeout=2.0)
    with pytest.raises(KmsEncryptionError) as raised:
        EncryptedSerializer(KmsEnvelopeCipher(cmk, client=client)).dumps_typed(STATE)
    assert raised.value.error_code == "EndpointConnectionError"
    assert str(raised.value).startswith(
        f"KMS GenerateDataKey for {cmk} failed: EndpointConnectionError: "
    )
