"""The fuzz targets: one function per entry point that takes store bytes or configuration.

Each target takes one fuzz input (laid out as `tests.fuzz._input.Input`
reads it) and feeds it to secure_serde the way a store or an operator
would. The rule every target checks is the one of issue 9: only
`SecureSerdeError` subclasses may escape. A target lets every other
exception through, so atheris (``tests/fuzz/fuzz_*.py``), the short run in
the suite and the regression tests all report it as a crash.

The targets over the CLI (``audit``, ``inspect``) live in `tests.fuzz._cli`,
because they need a SQLite store built by a real graph first.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Any, Final

import ormsgpack
from Crypto.Cipher import AES

from secure_serde import EncryptedSerializer, Migration, SecureSerdeError
from secure_serde.ciphers import KeyRotationCipher, _kms_format
from secure_serde.ciphers._keyring import Keyring
from secure_serde.ciphers._rotation import KEYRING_FILE_VAR
from secure_serde.crypto import _format as v1_format
from secure_serde.pickling import EXT_PICKLE, TAG
from secure_serde.stores import SEALED_METADATA_KEY, parse_envelope
from secure_serde.stores._v03_metadata import V03Metadata
from tests.fuzz import _fixtures as fx
from tests.fuzz._input import Input

__all__ = [
    "INNER_TAGS",
    "TARGETS",
    "keyring_json",
    "kms_blob",
    "kms_header",
    "legacy_aes",
    "metadata_envelope",
    "pickle_fallback",
    "v1_env",
    "v1_rotation",
]

# Inner type tags a stored row may carry; the last entries are what an
# attacker relabels to. A fuzzed tag is used when the pick lands past them.
INNER_TAGS: Final = (
    "msgpack",
    "json",
    "bytes",
    "bytearray",
    "null",
    "pickle",
    TAG,
    "msgpack+zlib",
    "",
)
_CIPHER_NAMES: Final = ("aesgcm", "aes", "kms", "")


def _tag(source: Input) -> str:
    choice = source.byte()
    if choice < len(INNER_TAGS) * 16:
        return INNER_TAGS[choice % len(INNER_TAGS)]
    return source.text()


def _full_tag(source: Input) -> str:
    inner = _tag(source)
    cipher = _CIPHER_NAMES[source.byte() % len(_CIPHER_NAMES)]
    return f"{inner}+{cipher}" if cipher else inner


# -- v1 blobs ----------------------------------------------------------------------------------


@cache
def _env() -> tuple[EncryptedSerializer, EncryptedSerializer]:
    return fx.env_serde(), fx.env_serde(migration=Migration(legacy_pickle=True))


def v1_env(data: bytes) -> None:
    """A v1 blob under `EnvKeyCipher`: serializer, cipher alone, and header parser."""
    source = Input(data)
    strict, legacy_pickle = _env()
    serde = legacy_pickle if source.flag() else strict
    tag = _full_tag(source)
    blob = source.rest()
    with contextlib.suppress(SecureSerdeError):
        v1_format.parse_header(blob)
    with contextlib.suppress(SecureSerdeError):
        serde.cipher.decrypt("aesgcm", blob)
    with contextlib.suppress(SecureSerdeError):
        serde.loads_typed((tag, blob))


@cache
def _rotation() -> tuple[EncryptedSerializer, Keyring]:
    serde = fx.rotation_serde()
    cipher = serde.cipher
    if not isinstance(cipher, KeyRotationCipher):
        raise TypeError("rotation_serde() must use a KeyRotationCipher")
    return serde, cipher.keyring


def v1_rotation(data: bytes) -> None:
    """A v1 blob under `KeyRotationCipher`: primary, decrypt-only, retired and legacy keys."""
    source = Input(data)
    serde, keyring = _rotation()
    tag = _full_tag(source)
    blob = source.rest()
    with contextlib.suppress(SecureSerdeError):
        keyring.open(blob, tag.rpartition("+")[0])
    with contextlib.suppress(SecureSerdeError):
        serde.loads_typed((tag, blob))
    cipher = serde.cipher
    if isinstance(cipher, KeyRotationCipher):
        cipher.label_for(blob[1:5].hex())


# -- KMS -------------------------------------------------------------------------------------


def kms_header(data: bytes) -> None:
    """The KMS envelope header parser, and the encryption context taken from configuration."""
    from tests.fuzz import _kms

    source = Input(data)
    if source.byte() % 4 == 0:
        _kms.context_from_env(source.rest())
        return
    blob = source.rest()
    try:
        header = _kms_format.parse_header(blob)
    except SecureSerdeError:
        return
    # What the parser returns must be what the writer lays out.
    rebuilt = _kms_format.encode_header(header.cmk_id, header.wrapped_key)
    if not blob.startswith(rebuilt) or len(blob) != len(rebuilt) + 12 + header.sealed_size:
        raise AssertionError("parse_header disagrees with encode_header")


def kms_blob(data: bytes) -> None:
    """A KMS envelope blob through `KmsEnvelopeCipher`: cached data keys, refusals, bad answers."""
    from tests.fuzz import _kms

    _kms.blob(data)


# -- legacy +aes rows --------------------------------------------------------------------------


@cache
def _legacy() -> dict[tuple[int, bool], EncryptedSerializer]:
    serdes: dict[tuple[int, bool], EncryptedSerializer] = {}
    modes: tuple[int, ...] = (AES.MODE_EAX, AES.MODE_GCM)
    for mode in modes:
        for with_pickle in (False, True):
            inner: Any = fx.pickle_serde() if with_pickle else fx.strict_jsonplus()
            serdes[mode, with_pickle] = EncryptedSerializer.from_pycryptodome_aes(
                inner, key=KEY_BYTES, mode=mode
            )
    return serdes


KEY_BYTES: Final = fx.KEY.encode()


@cache
def _builtin(mode: int) -> Any:
    return fx.builtin_serde(mode)


def legacy_aes(data: bytes) -> None:
    """A legacy ``+aes`` row through `EncryptedSerializer.from_pycryptodome_aes`.

    Half the inputs are stored bytes as they are; the other half are
    plaintexts that langgraph's own cipher seals first, so that every inner
    tag (including relabelled ones) is decoded after the legacy reader
    accepted the row: the relabelling attack of issue 9, finding 2.
    """
    source = Input(data)
    mode = AES.MODE_GCM if source.flag() else AES.MODE_EAX
    serde = _legacy()[mode, source.flag()]
    sealed_here = source.flag()
    inner = _tag(source)
    body = source.rest()
    if sealed_here:
        _, body = _builtin(mode).cipher.encrypt(body)
    with contextlib.suppress(SecureSerdeError):
        serde.loads_typed((f"{inner}+aes", body))
    with contextlib.suppress(SecureSerdeError):
        serde.cipher.decrypt("aes", body)


# -- msgpack+pickle --------------------------------------------------------------------------


@cache
def _pickle() -> dict[str, Any]:
    return {
        "pandas": EncryptedSerializer(fx.env_cipher(), fx.pickle_serde()),
        "numpy": EncryptedSerializer(fx.env_cipher(), fx.pickle_serde(numpy_only=True)),
        "bare": fx.pickle_serde(),
    }


def embed_pickle(pickled: bytes) -> bytes:
    """A ``msgpack+pickle`` payload holding ``pickled`` as one value, as the fallback writes it."""
    return ormsgpack.packb({"value": ormsgpack.Ext(EXT_PICKLE, pickled)})


def pickle_fallback(data: bytes) -> None:
    """``msgpack+pickle`` payloads, sealed here so that the unpickler and the scanner run.

    Mode 0 takes the input as a whole payload; mode 1 as one raw pickle,
    embedded where a value stands. Both are authenticated by a v1 seal (as
    a store written by the application would hold them) before reading;
    the unauthenticated path must refuse them all the same.
    """
    source = Input(data)
    mode = source.byte()
    serdes = _pickle()
    serde = serdes["numpy" if mode & 2 else "pandas"]
    payload = embed_pickle(source.rest()) if mode & 1 else source.rest()
    cipher_name, blob = serde.cipher.encrypt_with_tag(payload, TAG)
    with contextlib.suppress(SecureSerdeError):
        serde.loads_typed((f"{TAG}+{cipher_name}", blob))
    if mode & 4:
        try:
            serdes["bare"].loads_typed((TAG, payload))
        except SecureSerdeError:
            pass
        else:
            raise AssertionError("an unauthenticated msgpack+pickle value was read")


# -- sealed metadata ---------------------------------------------------------------------------

# The row the seeds' entries name (tests/fuzz/seeds.py), so the checked read gets past the
# row check.
_ROW: Final = ("t", "", "checkpoint-1")


@cache
def _v03_metadata() -> tuple[V03Metadata, V03Metadata]:
    """How the tools read 0.3's metadata column: as a viewer (every entry opened, unchecked)
    and under the policy of a saver that sealed all but ``user``."""
    serde = _env()[0]
    common: dict[str, Any] = {"indexed_metadata": None, "index_key": None}
    viewer = V03Metadata(
        serde, Migration.NONE, seal_metadata=False, plaintext_metadata=None, **common
    )
    policy = V03Metadata(
        serde, Migration.NONE, seal_metadata=True, plaintext_metadata=["user"], **common
    )
    return viewer, policy


def metadata_envelope(data: bytes) -> None:
    """A checkpoint's metadata JSON holding a sealed entry (the layout secure_serde 0.3's
    savers wrote): parser and `V03Metadata.open`, as a viewer and under a policy.

    Mode 0 takes the input as the metadata column's JSON text; mode 1 builds
    the envelope from a fuzzed type tag and fuzzed ciphertext bytes.
    """
    source = Input(data)
    serde = _env()[0]
    if source.flag():
        tag = _full_tag(source)
        raw = source.rest()
        metadata: Any = {
            "step": 1,
            SEALED_METADATA_KEY: {"type": tag, "data": base64.b64encode(raw).decode("ascii")},
        }
    else:
        try:
            metadata = json.loads(source.rest())
        except (ValueError, RecursionError):
            return  # not a JSON document: the store's driver would not hand it over
    if not isinstance(metadata, dict):
        return
    envelope = metadata.get(SEALED_METADATA_KEY)
    parse_envelope(envelope)
    for reader in _v03_metadata():
        with contextlib.suppress(SecureSerdeError):
            reader.open(serde.loads_typed, metadata, _ROW)


# -- keyring JSON --------------------------------------------------------------------------------

_KEYRING_DIR: Final = Path(tempfile.mkdtemp(prefix="secure-serde-fuzz-keyring-"))
_KEYRING_FILE: Final = _KEYRING_DIR / "keyring.json"


def keyring_json(data: bytes) -> None:
    """`KeyRotationCipher.from_env` over a fuzzed keyring file and ``LANGGRAPH_AES_KEY``."""
    source = Input(data)
    env_choice = source.byte() % 3
    env_key = (
        fx.KEY if env_choice == 0 else source.text("surrogateescape") if env_choice == 1 else None
    )
    _KEYRING_FILE.write_bytes(source.rest())
    os.chmod(_KEYRING_FILE, 0o600)
    saved = {name: os.environ.get(name) for name in ("LANGGRAPH_AES_KEY", KEYRING_FILE_VAR)}
    try:
        if env_key is None:
            os.environ.pop("LANGGRAPH_AES_KEY", None)
        else:
            try:
                os.environ["LANGGRAPH_AES_KEY"] = env_key
            except ValueError:
                return  # an embedded NUL: no environment can hold it
        os.environ[KEYRING_FILE_VAR] = str(_KEYRING_FILE)
        try:
            cipher = KeyRotationCipher.from_env()
        except SecureSerdeError:
            return
        # A keyring that loads must work: seal and open under its primary.
        serde = EncryptedSerializer(cipher, fx.strict_jsonplus())
        if serde.loads_typed(serde.dumps_typed({"ok": 1})) != {"ok": 1}:
            raise AssertionError("a keyring that loaded does not round-trip")
        repr(cipher)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _sealing_targets() -> dict[str, Any]:
    """The SealedSaver parsers' targets (issue 22), each kept beside its atheris harness."""
    from tests.fuzz.fuzz_sealed_cell import sealed_cell
    from tests.fuzz.fuzz_sealed_tuple import sealed_tuple
    from tests.fuzz.fuzz_store_identity import store_identity

    return {
        "sealed_cell": sealed_cell,
        "sealed_tuple": sealed_tuple,
        "store_identity": store_identity,
    }


TARGETS: Final = {
    "v1_env": v1_env,
    "v1_rotation": v1_rotation,
    "kms_header": kms_header,
    "kms_blob": kms_blob,
    "legacy_aes": legacy_aes,
    "pickle_fallback": pickle_fallback,
    "metadata_envelope": metadata_envelope,
    "keyring_json": keyring_json,
    **_sealing_targets(),
}
