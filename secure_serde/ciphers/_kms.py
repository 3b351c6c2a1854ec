"""`KmsEnvelopeCipher`: AES-256-GCM under data keys from AWS KMS, cached within bounds.

Tink's ``KmsEnvelopeAead`` calls KMS once per encrypt and once per decrypt;
this cipher, once per cache period, as the AWS Encryption SDK's caching
materials manager does, while every blob still carries its own wrapped data
key (layout in ``_kms_format``). A write calls ``GenerateDataKey`` only when
a cache limit is reached; a read calls ``Decrypt`` only for a data key not
cached; ``DescribeKey`` runs once per alias or bare AWS key id (ARNs need none).
"""

from __future__ import annotations

import asyncio
import hmac
import os
import threading
import time
import weakref
from collections.abc import Callable, Collection, Mapping
from typing import Any, Final

from secure_serde._errors import (
    BindingError,
    ConfigurationError,
    DecryptionError,
    KmsDecryptionError,
    KmsEncryptionError,
    KmsError,
    UnboundValueError,
    UnknownCipherError,
)
from secure_serde._scrub import scrubbed
from secure_serde.ciphers import _kms_format
from secure_serde.ciphers._keyring import MOVED, fixed_nonce
from secure_serde.ciphers._kms_cache import (
    CacheLimits,
    DataKey,
    DecryptionKeyCache,
    EncryptionKeyCache,
    KmsCacheInfo,
)
from secure_serde.ciphers._kms_client import (
    PURPOSE,
    PURPOSE_KEY,
    KmsCalls,
    ResolvedArns,
    bad_response,
    build_client,
    full_context,
    is_key_arn,
    resolve_arns,
)
from secure_serde.crypto import (
    GCM_NONCE_SIZE,
    Buffer,
    KeyCommitment,
    SecretHolder,
    hkdf_sha256,
    new_aes_gcm,
)

__all__ = ["PURPOSE", "PURPOSE_KEY", "KmsCacheInfo", "KmsEnvelopeCipher"]

_NAME: Final = _kms_format.CIPHER_NAME
# Contexts are inner type tags: a handful per serializer. The bound stops a
# stream of forged tags on the read path from growing the cache.
_AAD_CACHE_LIMIT: Final = 64
_V2_BYTE: Final = bytes([_kms_format.VERSION_V2])
_INFO_COMMITMENT: Final = b"secure_serde/kms/v2/commitment"
# Marks a client passed in by the caller, which the cipher cannot rebuild.
_CALLERS_CLIENT: Final = object()


class KmsEnvelopeCipher(SecretHolder):
    """Envelope encryption under an AWS KMS key, with bounded data-key caches.

    Args:
        kms_key: the KMS key that wraps new data keys: a key ARN (no lookup
            needed), an alias or AWS's bare key id, resolved once to an ARN
            kept for the life of the cipher: after re-pointing an alias,
            restart (the old KMS key then belongs in ``decrypt_kms_keys``).
        client: a boto3 KMS client. ``None`` builds one from boto3's default
            session with ``botocore_config`` over the defaults (standard
            retries, 3 attempts, 2 s connect and 5 s read timeouts).
        encryption_context: your entries for the KMS encryption context, such
            as ``{"tenant": "acme"}``. ``"purpose": "secure_serde/langgraph-checkpoint"``
            is always added, so an IAM condition can limit the key to this
            use. It is also bound into every value's associated data.
        decrypt_kms_keys: further KMS keys that only unwrap, during a change
            of KMS key. Blobs under any other KMS key are refused before KMS
            is called.
        max_age: seconds a data key encrypts (default 300): how long a
            revoked grant goes unnoticed by writes, and writes survive an outage.
        max_messages: values one data key encrypts (default 2^20; at most
            2^32, the NIST SP 800-38D bound for random 96-bit nonces).
        max_bytes: plaintext bytes one data key encrypts (default 2^30). A
            value larger than this gets a data key of its own.
        decrypt_ttl: seconds an unwrapped data key stays cached for reads
            (default 600; at least ``max_age``).
        decrypt_cache_size: data keys cached for reads, in LRU order (default 1000).
        clock: monotonic seconds; injectable so tests can age keys.

    On the event loop a KMS call would block every task: ``awarm`` at
    start-up and periodically (``refresh_before=``) keeps writes off the
    network. Refusals are not cached, so each read of such a row asks KMS again.
    """

    __slots__ = (
        "__weakref__",
        "_botocore_config",
        "_calls",
        "_clock",
        "_context",
        "_context_bytes",
        "_dec",
        "_decrypt_kms_keys",
        "_enc",
        "_kms_key",
        "_limits",
        "_refill_lock",
        "_resolve_lock",
        "_resolved",
        "_suffixes",
        "_take",
        "_unwrap_lock",
    )

    # A key pasted into kms_key=, decrypt_kms_keys= or the context by mistake, and the
    # credentials botocore reads for a client: no error leaves them in a frame local.
    @scrubbed
    def __init__(  # noqa: PLR0913 - public constructor: the cache limits are explicit by design
        self,
        kms_key: str | None = None,
        *,
        client: Any = None,
        encryption_context: Mapping[str, str] | None = None,
        decrypt_kms_keys: Collection[str] | None = None,
        max_age: float = 300.0,
        max_messages: int = 2**20,
        max_bytes: int = 2**30,
        decrypt_ttl: float = 600.0,
        decrypt_cache_size: int = 1000,
        botocore_config: Any = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        decrypt_kms_keys = () if decrypt_kms_keys is None else decrypt_kms_keys
        if not isinstance(kms_key, str) or not kms_key:
            raise ConfigurationError("kms_key must be a KMS key ARN, alias or AWS key id")
        if isinstance(decrypt_kms_keys, str) or not all(
            isinstance(k, str) and k for k in decrypt_kms_keys
        ):
            raise ConfigurationError(
                "decrypt_kms_keys must be a collection of KMS key ARNs, aliases or AWS key ids"
            )
        if client is not None and botocore_config is not None:
            raise ConfigurationError(
                "botocore_config only applies to a client the cipher builds;"
                " configure retries on the client you pass"
            )
        self._kms_key = kms_key
        self._decrypt_kms_keys = tuple(dict.fromkeys(k for k in decrypt_kms_keys if k != kms_key))
        self._context = full_context(encryption_context)
        try:
            self._context_bytes = _kms_format.encode_encryption_context(self._context)
        except ValueError as exc:
            raise ConfigurationError(str(exc)) from None
        self._limits = CacheLimits(
            max_age=max_age,
            max_messages=max_messages,
            max_bytes=max_bytes,
            decrypt_ttl=decrypt_ttl,
            decrypt_entries=decrypt_cache_size,
        )
        self._clock = clock
        self._calls = KmsCalls(build_client(botocore_config) if client is None else client)
        # Kept so a forked worker can build a client of its own (`renew_client`).
        self._botocore_config: Any = botocore_config if client is None else _CALLERS_CLIENT
        self._after_fork()
        self._suffixes: dict[str, bytes] = {}
        self._resolved: ResolvedArns | None = None
        configured = (kms_key, *self._decrypt_kms_keys)
        if all(is_key_arn(k) for k in configured):
            self._resolved = resolve_arns(kms_key, {k: k for k in configured})
        # Empty caches in every child forked after this point (_after_fork).
        _LIVE_CIPHERS.add(self)

    def _after_fork(self) -> None:
        # Also run in a forked child (gunicorn --preload, rewrap workers), which
        # would otherwise share the parent's data key with its own copy of the
        # message and byte counters (the limits would hold per process, not per
        # key), and could inherit a lock another thread held at fork time.
        self._enc = EncryptionKeyCache(self._limits, self._clock)
        self._take = self._enc.take
        self._dec = DecryptionKeyCache(self._limits, self._clock)
        self._refill_lock = threading.Lock()
        self._unwrap_lock = threading.Lock()
        self._resolve_lock = threading.Lock()

    @property
    def cipher_names(self) -> frozenset[str]:
        return frozenset({_NAME})

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        return self.encrypt_with_tag(plaintext, "")

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        return self.decrypt_with_tag(ciphername, ciphertext, "")

    def encrypt_with_tag(self, plaintext: Buffer, tag: str) -> tuple[str, bytes]:
        return self.encrypt_at(plaintext, tag, b"")

    def encrypt_at(self, plaintext: Buffer, tag: str, location: bytes) -> tuple[str, bytes]:
        # The hot path of every checkpoint write: kept flat on purpose.
        size = len(plaintext)
        key = self._take(size) or self._next_data_key(size)
        committed = key.header + os.urandom(GCM_NONCE_SIZE)
        commitment = key.commitment.tag(committed)
        suffix = self._suffixes.get(tag) or self._suffix(tag)
        aad = _V2_BYTE + key.cmk_id + commitment + suffix + location
        nonce = committed[-GCM_NONCE_SIZE:]
        return _NAME, committed + commitment + key.aead.seal(nonce, plaintext, aad)

    def decrypt_with_tag(self, ciphername: str, ciphertext: Buffer, tag: str) -> bytes:
        return self._open(ciphername, ciphertext, tag, b"", bound=False)

    def decrypt_at(self, ciphername: str, ciphertext: Buffer, tag: str, location: bytes) -> bytes:
        return self._open(ciphername, ciphertext, tag, location, bound=True)

    def _open(self, name: str, data: Buffer, tag: str, location: bytes, *, bound: bool) -> bytes:
        if name != _NAME:
            raise UnknownCipherError(
                f"KmsEnvelopeCipher cannot decrypt cipher {name!r}", cipher_name=name
            )
        v2 = len(data) > 0 and data[0] == _kms_format.VERSION_V2
        if bound and not v2:
            raise UnboundValueError("a KMS envelope v1 value is not sealed for its location")
        header, nonce, commitment, sealed = _kms_format.split_any(data)
        key = self._dec.get(header) or self._unwrap(header)
        if not v2:
            return key.aead.open(nonce, sealed, self._v1_aad(key, tag))
        # Before any decryption, in constant time (see _format_v2).
        if not hmac.compare_digest(key.commitment.tag(header + nonce), commitment):
            raise DecryptionError("key commitment does not match the data key")
        suffix = self._suffixes.get(tag) or self._suffix(tag)
        aad = _V2_BYTE + key.cmk_id + commitment + suffix + location
        try:
            return key.aead.open(nonce, sealed, aad)
        except DecryptionError:
            if not location:
                raise
        raise BindingError(MOVED)  # outside the handler: no chained context

    def authenticates_tag(self, ciphername: str) -> bool:
        return ciphername == _NAME

    def is_current(self, ciphername: str, ciphertext: Buffer) -> bool:
        """True for a v2 value under the primary KMS key (whichever data key): rewrap skips it."""
        end = _kms_format.CMK_ID_AT + _kms_format.CMK_ID_SIZE
        # v1 values carry no key commitment and no binding: rewrap them.
        if ciphername != _NAME or len(ciphertext) < end or ciphertext[0] != _kms_format.VERSION_V2:
            return False
        cmk = bytes(ciphertext[_kms_format.CMK_ID_AT : end])
        return cmk == self._resolve(KmsEncryptionError).primary_cmk

    def warm(self, *, refresh_before: float = 0.0) -> None:
        """Fetch a data key for writes unless one is cached for over ``refresh_before`` seconds.

        A periodic task passing, say, half of ``max_age`` keeps KMS off the write path.
        """
        with self._refill_lock:
            if self._enc.remaining() <= refresh_before:
                self._generate(None)

    async def awarm(self, *, refresh_before: float = 0.0) -> None:
        """`warm` in a worker thread, so the event loop is never blocked on KMS."""
        await asyncio.to_thread(self.warm, refresh_before=refresh_before)

    def clear(self) -> None:
        """Drop every cached data key now; the next operations fetch new ones."""
        self._enc.clear()
        self._dec.clear()

    def cache_info(self) -> KmsCacheInfo:
        self._enc.sweep()
        self._dec.sweep()
        return KmsCacheInfo(encryption_keys=len(self._enc), decryption_keys=len(self._dec))

    @property
    def kms_key(self) -> str:
        """The KMS key that wraps new data keys, as configured (ARN, alias or AWS key id)."""
        return self._kms_key

    @property
    def decrypt_kms_keys(self) -> tuple[str, ...]:
        """The further KMS keys that only unwrap, as configured."""
        return self._decrypt_kms_keys

    @property
    def key_arn(self) -> str | None:
        """The primary KMS key's ARN, or None while an alias is not yet resolved."""
        return None if self._resolved is None else self._resolved.primary_arn

    @property
    def encryption_context(self) -> dict[str, str]:
        """The full KMS encryption context, purpose entry included (a copy)."""
        return dict(self._context)

    @property
    def client(self) -> Any:
        return self._calls.client

    @property
    def owns_client(self) -> bool:
        """True when the cipher built its client (``client=None``), so it can build another."""
        return self._botocore_config is not _CALLERS_CLIENT

    def renew_client(self) -> None:
        """Build a new client the same way, in a forked process (pooled connections are not shared).

        Raises `ConfigurationError` when the client was the caller's: only the caller can build one.
        """
        if not self.owns_client:
            raise ConfigurationError(
                "this KmsEnvelopeCipher uses the client it was given, which forked processes"
                " must not share: build it with client=None (boto3's default session) or use"
                " one process"
            )
        self._calls = KmsCalls(build_client(self._botocore_config))

    def __repr__(self) -> str:
        names = sorted(k for k in self._context if k != PURPOSE_KEY)
        return (
            f"<KmsEnvelopeCipher kms_key={self.key_arn or self._kms_key}"
            f" decrypt_only={len(self._decrypt_kms_keys)} context_keys={names}>"
        )

    # The seams below take a caller-chosen nonce, for the frozen test vectors only: reusing a
    # nonce under one data key breaks GCM's confidentiality and authenticity.

    def _seal_with_nonce(
        self, plaintext: Buffer, context: str, *, data_key: bytes, wrapped_key: bytes, nonce: bytes
    ) -> bytes:
        """`encrypt_with_tag` in format v1."""
        key = self._vector_key(data_key, wrapped_key, _kms_format.VERSION)
        aad = self._v1_aad(key, context)
        return key.header + fixed_nonce(nonce) + key.aead.seal(nonce, plaintext, aad)

    def _seal_at_with_nonce(  # noqa: PLR0913 - mirrors the cipher seal signature plus a fixed nonce
        self,
        plaintext: Buffer,
        context: str,
        location: bytes,
        *,
        data_key: bytes,
        wrapped_key: bytes,
        nonce: bytes,
    ) -> bytes:
        """`encrypt_at` in format v2."""
        key = self._vector_key(data_key, wrapped_key, _kms_format.VERSION_V2)
        committed = key.header + fixed_nonce(nonce)
        commitment = key.commitment.tag(committed)
        aad = _V2_BYTE + key.cmk_id + commitment + self._suffix(context) + location
        return committed + commitment + key.aead.seal(nonce, plaintext, aad)

    def _remember(self, data_key: bytes, wrapped_key: bytes) -> None:
        """Cache a data key for reads as if KMS had unwrapped it."""
        for version in (_kms_format.VERSION, _kms_format.VERSION_V2):
            self._dec.put(self._vector_key(data_key, wrapped_key, version))

    def _vector_key(self, data_key: bytes, wrapped_key: bytes, version: int) -> DataKey:
        cmk = self._resolve(KmsEncryptionError).primary_cmk
        return self._new_key(_kms_format.encode_header(cmk, wrapped_key, version), cmk, data_key)

    def _suffix(self, context: str) -> bytes:
        suffix = _kms_format.aad_suffix_v2(self._context_bytes, context.encode("utf-8"))
        if len(self._suffixes) < _AAD_CACHE_LIMIT:
            self._suffixes[context] = suffix
        return suffix

    def _v1_aad(self, key: DataKey, context: str) -> bytes:
        # Not cached: v1 is only read, and an AAD costs little next to the GCM pass.
        return _kms_format.build_aad(key.cmk_id, self._context_bytes, context.encode("utf-8"))

    def _new_key(self, header: bytes, cmk: bytes, plaintext: bytes) -> DataKey:
        commitment = KeyCommitment(hkdf_sha256(plaintext, _INFO_COMMITMENT, 32))
        return DataKey(header, cmk, new_aes_gcm(plaintext), commitment)

    def _next_data_key(self, size: int) -> DataKey:
        with self._refill_lock:
            # Another thread may have fetched one while this one waited.
            return self._enc.take(size) or self._generate(size)

    @scrubbed  # holds the plaintext data key when the wrapped one is refused
    def _generate(self, size: int | None) -> DataKey:
        """A new data key, made current for writes (``size``: see `EncryptionKeyCache.install`)."""
        resolved = self._resolve(KmsEncryptionError)
        plaintext, wrapped = self._calls.generate_data_key(
            resolved.primary_arn, self._context, KmsEncryptionError
        )
        if len(wrapped) > _kms_format.MAX_WRAPPED_KEY:
            limit = _kms_format.MAX_WRAPPED_KEY
            what = f"a wrapped key of {len(wrapped)} B, over the format's {limit} B"
            raise bad_response(KmsEncryptionError, "GenerateDataKey", resolved.primary_arn, what)
        header = _kms_format.encode_header(resolved.primary_cmk, wrapped, _kms_format.VERSION_V2)
        key = self._new_key(header, resolved.primary_cmk, plaintext)
        self._dec.sweep()
        self._dec.put(key)
        self._enc.install(key, self._limits.max_age, size)
        return key

    def _unwrap(self, header: bytes) -> DataKey:
        cmk = header[_kms_format.CMK_ID_AT : _kms_format.CMK_ID_AT + _kms_format.CMK_ID_SIZE]
        resolved = self._resolve(KmsDecryptionError)
        arn = resolved.arns.get(cmk)
        if arn is None:
            raise _kms_format.unknown_cmk(cmk)
        with self._unwrap_lock:
            key = self._dec.get(header)
            if key is None:
                wrapped = header[_kms_format.WRAPPED_AT :]
                plaintext = self._calls.decrypt(arn, wrapped, self._context, KmsDecryptionError)
                key = self._new_key(header, cmk, plaintext)
                self._dec.put(key)
            return key

    def _resolve(self, error: type[KmsError]) -> ResolvedArns:
        resolved = self._resolved
        if resolved is not None:
            return resolved
        with self._resolve_lock:
            if self._resolved is None:
                arns = {
                    k: k if is_key_arn(k) else self._calls.describe_key_arn(k, error)
                    for k in (self._kms_key, *self._decrypt_kms_keys)
                }
                self._resolved = resolve_arns(self._kms_key, arns)
            return self._resolved


# Every live cipher, so that one at-fork hook (registered once, below) can
# reset them all; a hook per cipher would pile up for the life of the process.
_LIVE_CIPHERS: Final[weakref.WeakSet[KmsEnvelopeCipher]] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for cipher in list(_LIVE_CIPHERS):
        cipher._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)
