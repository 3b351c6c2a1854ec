"""A KMS answer that names another key than the one asked for is refused, with a typed error.

The client sends ``KeyId=<configured ARN>`` and KMS names, in its answer, the
key it really used. moto always echoes the requested key, so a client that
stopped comparing the two survived the whole suite (issue 9). Here a proxy
(`tests.ciphers.kms_proxy`) between boto3 and moto rewrites that ``KeyId``
to a second real CMK's ARN, or drops it. Everything else is real: HTTP,
SigV4 signing, moto's own answer.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from secure_serde import (
    DecryptionError,
    EncryptedSerializer,
    EncryptionError,
    KmsDecryptionError,
    KmsEncryptionError,
)
from secure_serde.ciphers import KmsEnvelopeCipher
from tests.ciphers.kms_proxy import KmsRewritingProxy, drop_field, set_field
from tests.ciphers.kms_support import kms_client, new_cmk

STATE = {"ssn": "123-45-6789", "n": 7}


def _key_id_edit(answered: str, other_cmk: str) -> Any:
    return set_field("KeyId", other_cmk) if answered == "other" else drop_field("KeyId")


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
    return new_cmk(direct, "the CMK the cipher asks for")


@pytest.fixture
def other_cmk(direct: Any) -> str:
    return new_cmk(direct, "another CMK a misbehaving endpoint names")


def test_the_proxy_alone_changes_nothing(proxy: KmsRewritingProxy, proxied: Any, cmk: str) -> None:
    """Without rewrites, the proxied client writes and reads: the refusals below are the KeyId."""
    writer = EncryptedSerializer(KmsEnvelopeCipher(cmk, client=proxied))
    row = writer.dumps_typed(STATE)
    assert EncryptedSerializer(KmsEnvelopeCipher(cmk, client=proxied)).loads_typed(row) == STATE
    assert proxy.seen == ["GenerateDataKey", "Decrypt"]


@pytest.mark.parametrize("answered", ["other", "none"], ids=["another-key", "no-key"])
def test_generate_data_key_answered_for_another_key_is_refused(
    proxy: KmsRewritingProxy, proxied: Any, cmk: str, other_cmk: str, answered: str
) -> None:
    proxy.rewrites["GenerateDataKey"] = _key_id_edit(answered, other_cmk)
    serde = EncryptedSerializer(KmsEnvelopeCipher(cmk, client=proxied))
    with pytest.raises(KmsEncryptionError) as raised:
        serde.dumps_typed(STATE)
    assert isinstance(raised.value, EncryptionError)
    assert raised.value.operation == "GenerateDataKey"
    assert raised.value.key_arn == cmk
    assert raised.value.error_code == "BadResponse"
    # Nothing of the refused answer was kept: the next write asks KMS again.
    del proxy.rewrites["GenerateDataKey"]
    row = serde.dumps_typed(STATE)
    assert serde.loads_typed(row) == STATE
    assert proxy.seen == ["GenerateDataKey", "GenerateDataKey"]


@pytest.mark.parametrize("answered", ["other", "none"], ids=["another-key", "no-key"])
def test_decrypt_answered_for_another_key_is_refused(
    proxy: KmsRewritingProxy,
    direct: Any,
    proxied: Any,
    cmk: str,
    other_cmk: str,
    answered: str,
) -> None:
    row = EncryptedSerializer(KmsEnvelopeCipher(cmk, client=direct)).dumps_typed(STATE)
    proxy.rewrites["Decrypt"] = _key_id_edit(answered, other_cmk)
    reader = EncryptedSerializer(KmsEnvelopeCipher(cmk, client=proxied))
    with pytest.raises(KmsDecryptionError) as raised:
        reader.loads_typed(row)
    assert isinstance(raised.value, DecryptionError)
    assert raised.value.operation == "Decrypt"
    assert raised.value.key_arn == cmk
    assert raised.value.error_code == "BadResponse"
    # The refused data key was not cached either.
    del proxy.rewrites["Decrypt"]
    assert reader.loads_typed(row) == STATE
    assert proxy.seen == ["Decrypt", "Decrypt"]


def test_an_answer_naming_an_allowed_decrypt_key_still_differs_from_the_one_asked(
    proxy: KmsRewritingProxy, direct: Any, proxied: Any, cmk: str, other_cmk: str
) -> None:
    """Both CMKs are configured, but a Decrypt sent for one must be answered for that one."""
    row = EncryptedSerializer(KmsEnvelopeCipher(cmk, client=direct)).dumps_typed(STATE)
    proxy.rewrites["Decrypt"] = set_field("KeyId", other_cmk)
    reader = EncryptedSerializer(
        KmsEnvelopeCipher(other_cmk, client=proxied, decrypt_kms_keys=[cmk])
    )
    with pytest.raises(KmsDecryptionError) as raised:
        reader.loads_typed(row)
    assert raised.value.key_arn == cmk
    assert raised.value.error_code == "BadResponse"
