"""Keys, ciphers and serializers shared by the fuzz targets and the seed generator.

Everything here is built from fixed test keys, so seeds written by
`tests.fuzz.seeds` decrypt under the ciphers the targets use. The inner
``JsonPlusSerializer`` is strict (``allowed_msgpack_modules=None``): fuzzed
plaintexts reach it after authentication, and a permissive one would import
and call whatever module names the fuzzer spells. Permissive msgpack on
unauthenticated rows is finding 1 of issue 9, fixed by the strict decoder,
not something to rediscover by running random imports on this machine.
"""

from __future__ import annotations

from typing import Any, Final

from Crypto.Cipher import AES
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as BuiltinSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import EncryptedSerializer, PickleFallbackSerializer
from secure_serde.ciphers import EnvKeyCipher, KeyRotationCipher
from secure_serde.pickling import NUMPY, PANDAS

__all__ = [
    "KEY",
    "KEY_GONE",
    "KEY_NEW",
    "KEY_OLD",
    "builtin_serde",
    "env_cipher",
    "env_serde",
    "pickle_serde",
    "rotation_cipher",
    "rotation_serde",
    "strict_jsonplus",
]

# Raw 32-character keys, the form LANGGRAPH_AES_KEY takes in drop-in deployments.
KEY: Final = "fuzz-campaign-key-env-0123456789"
KEY_NEW: Final = "fuzz-campaign-key-new-0123456789"
KEY_OLD: Final = "fuzz-campaign-key-old-0123456789"
KEY_GONE: Final = "fuzz-campaign-key-gone-012345678"


def strict_jsonplus() -> JsonPlusSerializer:
    return JsonPlusSerializer(allowed_msgpack_modules=None)


def env_cipher(legacy_mode: int | None = AES.MODE_EAX) -> EnvKeyCipher:
    return EnvKeyCipher(KEY, legacy_mode=legacy_mode)


def env_serde(**options: Any) -> EncryptedSerializer:
    return EncryptedSerializer(env_cipher(), strict_jsonplus(), **options)


def rotation_cipher() -> KeyRotationCipher:
    return KeyRotationCipher(
        {"new": KEY_NEW, "old": KEY_OLD, "gone": KEY_GONE, "env": KEY},
        "new",
        retired=["gone"],
        legacy_key="env",
    )


def rotation_serde() -> EncryptedSerializer:
    return EncryptedSerializer(rotation_cipher(), strict_jsonplus())


def pickle_serde(*, numpy_only: bool = False, **options: Any) -> PickleFallbackSerializer:
    return PickleFallbackSerializer(
        strict_jsonplus(), allowed=[NUMPY] if numpy_only else [PANDAS], **options
    )


def builtin_serde(mode: int) -> BuiltinSerializer:
    """langgraph's own drop-in, which writes the legacy ``+aes`` rows."""
    return BuiltinSerializer.from_pycryptodome_aes(strict_jsonplus(), key=KEY.encode(), mode=mode)
