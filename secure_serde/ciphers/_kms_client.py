"""The three KMS calls `KmsEnvelopeCipher` makes, their answers checked and their failures typed.

What still fails after botocore's retries becomes a `KmsError` naming the
operation and the key ARN. boto3 (``secure-serde[kms]``) is imported only here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from secure_serde._errors import ConfigurationError, KmsError
from secure_serde._scrub import scrubbed
from secure_serde.ciphers._kms_format import cmk_id

DATA_KEY_SIZE: Final = 32
# Always in the encryption context: a data key wrapped for another purpose does not unwrap here.
PURPOSE_KEY: Final = "purpose"
PURPOSE: Final = "secure_serde/langgraph-checkpoint"
_KEY_ARN: Final = re.compile(r"arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+")
_INSTALL_HINT: Final = "KmsEnvelopeCipher needs boto3: pip install 'secure-serde[kms]'"

# Codes worth a word of explanation; KMS's own messages are often empty.
_HINTS: Final[Mapping[str, str]] = {
    "InvalidCiphertextException": (
        "the encryption context differs from the one the data key was wrapped with,"
        " or the wrapped key is damaged"
    ),
    "IncorrectKeyException": "the data key was wrapped under another KMS key",
    "AccessDeniedException": (
        "not allowed by IAM or the key policy, or wrapped under another KMS key"
    ),
    "DisabledException": "the KMS key is disabled",
    "KMSInvalidStateException": "the KMS key is pending deletion or unavailable",
    "NotFoundException": "no such key or alias",
}


def is_key_arn(kms_key: str) -> bool:
    """True for a full key ARN, which needs no DescribeKey to be resolved."""
    return _KEY_ARN.fullmatch(kms_key) is not None


def build_client(config: Any = None) -> Any:
    """A KMS client from boto3's default session, with ``config`` over the defaults.

    The defaults: standard retry mode with 3 attempts in all, and short
    timeouts. KMS answers in milliseconds, and a write waiting a minute for
    a dead endpoint (botocore's default) is worse than a prompt, typed error.
    """
    try:
        import boto3
        from botocore.config import Config
        from botocore.exceptions import BotoCoreError
    except ImportError:
        raise ConfigurationError(_INSTALL_HINT) from None
    defaults = Config(
        retries={"mode": "standard", "total_max_attempts": 3}, connect_timeout=2, read_timeout=5
    )
    merged = defaults if config is None else defaults.merge(config)
    try:
        return boto3.session.Session().client("kms", config=merged)
    except BotoCoreError as exc:  # no region configured, a malformed endpoint, ...
        raise ConfigurationError(f"could not build a KMS client: {exc}") from None


class KmsCalls:
    """A KMS client's three calls, with their answers checked and their errors typed."""

    __slots__ = ("_client", "_errors")

    def __init__(self, client: Any) -> None:
        try:
            from botocore.exceptions import BotoCoreError, ClientError
        except ImportError:
            raise ConfigurationError(_INSTALL_HINT) from None
        self._client = client
        self._errors: tuple[type[Exception], ...] = (BotoCoreError, ClientError)

    @property
    def client(self) -> Any:
        return self._client

    def describe_key_arn(self, kms_key: str, error: type[KmsError]) -> str:
        try:
            response = self._client.describe_key(KeyId=kms_key)
        except self._errors as exc:
            raise _failure(error, "DescribeKey", kms_key, exc) from exc
        arn = response.get("KeyMetadata", {}).get("Arn")
        if not isinstance(arn, str) or not is_key_arn(arn):
            raise bad_response(error, "DescribeKey", kms_key, "no key ARN")
        return arn

    @scrubbed  # the answer holds the plaintext data key
    def generate_data_key(
        self, key_arn: str, context: Mapping[str, str], error: type[KmsError]
    ) -> tuple[bytes, bytes]:
        """(plaintext data key, wrapped data key) for a new AES-256 key under ``key_arn``."""
        try:
            response = self._client.generate_data_key(
                KeyId=key_arn, KeySpec="AES_256", EncryptionContext=dict(context)
            )
        except self._errors as exc:
            raise _failure(error, "GenerateDataKey", key_arn, exc) from exc
        plaintext = _data_key(response, "GenerateDataKey", key_arn, error)
        wrapped = response.get("CiphertextBlob")
        if not isinstance(wrapped, bytes) or not wrapped:
            raise bad_response(error, "GenerateDataKey", key_arn, "no wrapped data key")
        return plaintext, wrapped

    @scrubbed  # the answer holds the plaintext data key
    def decrypt(
        self, key_arn: str, wrapped: bytes, context: Mapping[str, str], error: type[KmsError]
    ) -> bytes:
        """The data key inside ``wrapped``, which KMS must unwrap under ``key_arn`` itself."""
        try:
            response = self._client.decrypt(
                CiphertextBlob=wrapped, KeyId=key_arn, EncryptionContext=dict(context)
            )
        except self._errors as exc:
            raise _failure(error, "Decrypt", key_arn, exc) from exc
        return _data_key(response, "Decrypt", key_arn, error)


def _data_key(
    response: Mapping[str, Any], operation: str, key_arn: str, error: type[KmsError]
) -> bytes:
    # KMS names the key it really used; a different one means this is not
    # the key we allowed, whatever the request said.
    if response.get("KeyId") != key_arn:
        raise bad_response(error, operation, key_arn, f"key {response.get('KeyId')!r} instead")
    plaintext = response.get("Plaintext")
    if not isinstance(plaintext, bytes) or len(plaintext) != DATA_KEY_SIZE:
        raise bad_response(error, operation, key_arn, "a data key that is not 32 bytes")
    return plaintext


def bad_response(error: type[KmsError], operation: str, key_arn: str, what: str) -> KmsError:
    return error(
        f"KMS {operation} for {key_arn} returned {what}",
        operation=operation,
        key_arn=key_arn,
        error_code="BadResponse",
    )


def _failure(error: type[KmsError], operation: str, key_arn: str, exc: Exception) -> KmsError:
    response = getattr(exc, "response", None)
    code = type(exc).__name__
    if isinstance(response, Mapping):
        code = str(response.get("Error", {}).get("Code") or code)
    hint = _HINTS.get(code)
    detail = f" ({hint})" if hint else ""
    return error(
        f"KMS {operation} for {key_arn} failed: {code}{detail}: {exc}",
        operation=operation,
        key_arn=key_arn,
        error_code=code,
    )


@dataclass(frozen=True)
class ResolvedArns:
    """Key ARNs, fixed for the life of the cipher once known."""

    primary_arn: str
    primary_cmk: bytes
    arns: Mapping[bytes, str]


def full_context(user: Mapping[str, str] | None) -> dict[str, str]:
    entries = dict(user or {})
    for key, value in entries.items():
        if not isinstance(key, str) or not key or not isinstance(value, str):
            raise ConfigurationError("encryption_context must map non-empty str keys to str values")
    if PURPOSE_KEY in entries:
        raise ConfigurationError(
            f"encryption_context may not set {PURPOSE_KEY!r}: it is always {PURPOSE!r}"
        )
    return {PURPOSE_KEY: PURPOSE, **entries}


def resolve_arns(primary: str, arns: Mapping[str, str]) -> ResolvedArns:
    by_cmk: dict[bytes, str] = {}
    for arn in arns.values():
        cmk = cmk_id(arn)
        other = by_cmk.get(cmk)
        if other is not None and other != arn:
            # Two KMS keys with one 4-byte key id: a 1 in 2^32 chance, refused rather than guessed.
            raise ConfigurationError(
                f"KMS keys {other} and {arn} share key id {cmk.hex()} (their CMK id)"
            )
        by_cmk[cmk] = arn
    primary_arn = arns[primary]
    return ResolvedArns(primary_arn=primary_arn, primary_cmk=cmk_id(primary_arn), arns=by_cmk)
