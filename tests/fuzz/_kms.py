"""`KmsEnvelopeCipher` offline: a real botocore KMS client whose answers come from a Stubber.

No request leaves the process. With nothing queued, botocore's Stubber
raises ``UnStubbedResponseError`` (a ``BotoCoreError``) for every call, as
an unreachable KMS would; a fuzz input can instead queue one ``Decrypt``
answer (right or wrong key id, a data key of any length) or one KMS error.
The data keys of the seeds are put in the read cache with the cipher's
test seam, so seeds and their mutations reach AES-GCM without KMS.
tests/ciphers/ covers the same cipher end to end against moto over HTTP.
"""

from __future__ import annotations

import contextlib
import os
from functools import cache
from typing import Any, Final

import boto3
from botocore.stub import Stubber

from secure_serde import SecureSerdeError
from secure_serde import config as _config
from secure_serde.ciphers import KmsEnvelopeCipher
from tests.fuzz._input import Input

__all__ = [
    "ARN_A",
    "ARN_B",
    "CONTEXT",
    "DATA_KEY",
    "WRAPPED_A",
    "blob",
    "context_from_env",
    "decrypt_only_cipher",
    "primary_cipher",
]

ARN_A: Final = "arn:aws:kms:us-east-1:111122223333:key/0b8f1c9e-aaaa-4f6e-9c6e-000000000001"
ARN_B: Final = "arn:aws:kms:us-east-1:111122223333:key/0b8f1c9e-bbbb-4f6e-9c6e-000000000002"
_OTHER_ARN: Final = "arn:aws:kms:us-east-1:444455556666:key/0b8f1c9e-cccc-4f6e-9c6e-000000000003"
CONTEXT: Final = {"tenant": "fuzz"}
DATA_KEY: Final = bytes(range(32))
# Shaped like moto's 96-byte CiphertextBlob; the cipher never looks inside.
WRAPPED_A: Final = bytes(range(100, 196))
_ERROR_CODES: Final = (
    "InvalidCiphertextException",
    "IncorrectKeyException",
    "AccessDeniedException",
    "DisabledException",
    "KMSInvalidStateException",
    "ThrottlingException",
    "",
)


class _Kms:
    """One stubbed client and the cipher on it; the stubber is replaced when left non-empty."""

    def __init__(self) -> None:
        self.client = boto3.client(
            "kms",
            region_name="us-east-1",
            endpoint_url="http://127.0.0.1:9",
            aws_access_key_id="fuzz",
            aws_secret_access_key="fuzz",
        )
        self.stubber = Stubber(self.client)
        self.stubber.activate()
        self.cipher = KmsEnvelopeCipher(
            ARN_A, client=self.client, encryption_context=CONTEXT, decrypt_kms_keys=[ARN_B]
        )

    def reset(self) -> None:
        """Start every input from the same state: only the seed data key is cached."""
        self.cipher.clear()
        self.cipher._remember(DATA_KEY, WRAPPED_A)
        self.stubber.deactivate()
        self.stubber = Stubber(self.client)
        self.stubber.activate()


@cache
def _kms() -> _Kms:
    return _Kms()


def primary_cipher() -> KmsEnvelopeCipher:
    return _kms().cipher


def decrypt_only_cipher() -> KmsEnvelopeCipher:
    """A cipher whose primary is ARN_B: it writes the blobs the fuzzed cipher only decrypts."""
    return KmsEnvelopeCipher(ARN_B, client=_kms().client, encryption_context=CONTEXT)


def blob(data: bytes) -> None:
    source = Input(data)
    kms = _kms()
    kms.reset()
    answer = source.byte() % 4
    if answer == 1:
        kms.stubber.add_client_error(
            "decrypt", service_error_code=source.pick(_ERROR_CODES), http_status_code=400
        )
    elif answer == 2:
        key_id = source.pick((ARN_A, ARN_B, _OTHER_ARN, "alias/other"))
        plaintext = DATA_KEY if source.flag() else source.sized()
        kms.stubber.add_response("decrypt", {"KeyId": key_id, "Plaintext": plaintext})
    context = source.pick(("msgpack", "json", "bytes", "pickle", "msgpack+pickle", ""))
    stored = source.rest()
    kms.cipher.is_current("kms", stored)
    with contextlib.suppress(SecureSerdeError):
        kms.cipher.decrypt_with_tag("kms", stored, context)


def context_from_env(data: bytes) -> None:
    """``SECURE_SERDE_KMS_ENCRYPTION_CONTEXT`` as the CLI reads it, then a cipher built on it."""
    text = data.decode("utf-8", "surrogateescape")
    saved = os.environ.get(_config.KMS_CONTEXT_VAR)
    try:
        try:
            os.environ[_config.KMS_CONTEXT_VAR] = text
        except ValueError:
            return  # an embedded NUL: no environment can hold it
        with contextlib.suppress(SecureSerdeError):
            context: Any = _config._kms_context()
            KmsEnvelopeCipher(ARN_A, client=_kms().client, encryption_context=context)
    finally:
        if saved is None:
            os.environ.pop(_config.KMS_CONTEXT_VAR, None)
        else:
            os.environ[_config.KMS_CONTEXT_VAR] = saved
