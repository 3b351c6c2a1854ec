"""`TenantKeys`: a random data key per tenant and per thread, kept wrapped, and shredded on demand.

The serializer's primary key wraps each tenant key, which wraps its thread
keys and keys the tenant's blind index; each wrapped key is sealed for its
tenant, thread and key id, in a key store of its own (_tenant_store.py).
A shred nulls the wrapped key and keeps the row as a tombstone, so the key is
never created again. What this protects and what it does not: docs/tenants.md.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, cast

from secure_serde._errors import (
    ConfigurationError,
    DecryptionError,
    SecureSerdeError,
    ShreddedError,
    UnknownTenantError,
)
from secure_serde._scrub import scrubbed
from secure_serde.ciphers import EnvKeyCipher, SealingCipher, current_test, is_sealing
from secure_serde.crypto import SecretHolder, hkdf_sha256
from secure_serde.sealing._index import INDEX_KEY_SIZE, BlindIndex
from secure_serde.sealing._tenant_store import TENANT_SCOPE, THREAD_PREFIX, KeyRow, open_table
from secure_serde.serde import EncryptedSerializer

__all__ = ["ShredResult", "ShreddedScopes", "TenantKeys", "TenantRewrapReport", "check_tenant_id"]

_log = logging.getLogger("secure_serde")

KEY_SIZE: Final = 32
_KEY_ID_SIZE: Final = 16
_MAX_ID: Final = 1024
_TENANT_CONTEXT: Final = "secure_serde/tenant-key"
_THREAD_CONTEXT: Final = "secure_serde/thread-key"
_INDEX_INFO: Final = b"secure_serde/tenant-index/v1"
_WRAP_MAGIC: Final = b"SSTKEY\x01"
_TENANT_KIND: Final = 1
_THREAD_KIND: Final = 2


def check_tenant_id(tenant_id: object, what: str = "tenant id") -> str:
    if not isinstance(tenant_id, str) or not tenant_id:
        raise ConfigurationError(f"a {what} is a non-empty str, not {type(tenant_id).__name__}")
    if len(tenant_id.encode("utf-8", "surrogatepass")) > _MAX_ID:
        raise ConfigurationError(f"a {what} is at most {_MAX_ID} bytes")
    return tenant_id


def _wrap_at(tenant: str, scope: str, key_id: str) -> tuple[str, bytes]:
    """The context and location a wrapped key is sealed for: injective, length-prefixed."""
    if scope == TENANT_SCOPE:
        kind, context = _TENANT_KIND, _TENANT_CONTEXT
    else:
        kind, context = _THREAD_KIND, _THREAD_CONTEXT
    parts = [_WRAP_MAGIC, bytes([kind])]
    for text in (tenant, scope[len(THREAD_PREFIX) :], key_id):  # the thread: '' for a tenant
        raw = text.encode("utf-8", "surrogatepass")
        parts += [struct.pack(">I", len(raw)), raw]
    return context, b"".join(parts)


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass(frozen=True, eq=False)
class _Unwrapped(SecretHolder):
    """An unwrapped key, as a cipher (the key bytes themselves are not kept)."""

    key_id: str
    cipher: EnvKeyCipher = field(repr=False)
    index: BlindIndex | None = field(repr=False)
    expires: float


@dataclass(frozen=True)
class ShredResult:
    """What a shred did: ``already`` when the key had been shredded before."""

    tenant_id: str
    thread_id: str | None
    key_id: str
    shredded_at: str
    already: bool


@dataclass(frozen=True)
class ShreddedScopes:
    """The tombstones of a key store: shredded tenants, and shredded (tenant, thread) pairs."""

    tenants: frozenset[str]
    threads: frozenset[tuple[str, str]]

    def covers(self, tenant: str, thread: str) -> bool:
        return tenant in self.tenants or (tenant, thread) in self.threads


@dataclass(frozen=True)
class TenantRewrapReport:
    """What `TenantKeys.rewrap` did (or, with ``dry_run``, would do), counted in tenant keys."""

    examined: int
    rewrapped: int
    current: int
    shredded: int
    failed: tuple[str, ...]
    dry_run: bool


class TenantKeys:
    """Per-tenant and per-thread data keys, wrapped in a key store of their own.

    Open one with `TenantKeys.open` and pass it to
    ``SealedSaver(inner, serde=..., tenant_keys=keys)``. Shred with
    `shred` or `shred_thread` (or ``secure-serde tenants shred``).

    Args (of `open` too):
        location: a SQLite file path, or a ``postgresql://`` URL. Never the
            checkpoint store: its backups must not hold the keys.
        max_cached: unwrapped keys kept in memory (tenants and threads alike).
        max_age: seconds an unwrapped key is kept; after that it is read and
            unwrapped again (one KMS call per tenant, with KMS as primary).
    """

    def __init__(
        self,
        location: str | os.PathLike[str],
        *,
        max_cached: int = 4096,
        max_age: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(max_cached, int) or max_cached < 1:
            raise ConfigurationError("max_cached is a positive int")
        if not isinstance(max_age, (int, float)) or max_age <= 0:
            raise ConfigurationError("max_age is a positive number of seconds")
        self._table = open_table(location)
        self._max_cached = max_cached
        self._max_age = float(max_age)
        self._clock = clock
        self._lock = threading.RLock()
        self._cache: OrderedDict[tuple[str, str], _Unwrapped] = OrderedDict()

    @classmethod
    def open(cls, location: str | os.PathLike[str], **options: Any) -> TenantKeys:
        """The key store at ``location``; ``options`` as `TenantKeys` takes them."""
        return cls(location, **options)

    def close(self) -> None:
        with self._lock:
            self._cache.clear()
        self._table.close()

    def __repr__(self) -> str:
        return f"TenantKeys({self._table!r})"

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError("TenantKeys holds unwrapped keys and a connection; it is not pickled")

    def tenant_index(self, tenant: str, primary: EncryptedSerializer) -> BlindIndex:
        """The tenant's blind index (its key created on first use)."""
        index = self._key(tenant, TENANT_SCOPE, primary, create=True).index
        if index is None:  # pragma: no cover - tenant entries always carry one
            raise ConfigurationError("a tenant key without its index")
        return index

    def thread_cipher(
        self, tenant: str, thread: str, primary: EncryptedSerializer, *, create: bool
    ) -> EnvKeyCipher:
        """The cipher of one thread's key; created (with its tenant's) when ``create``."""
        return self._key(tenant, THREAD_PREFIX + thread, primary, create=create).cipher

    def _key(
        self, tenant: str, scope: str, primary: EncryptedSerializer, *, create: bool
    ) -> _Unwrapped:
        """A tenant's key (``scope`` empty) or a thread's, from the cache or the key store.

        Raises:
            ShreddedError: the tenant's or the thread's key was shredded.
            UnknownTenantError: no key, and ``create`` is false (a row the
                key store has no key for).
        """
        with self._lock:
            hit = self._cache.pop((tenant, scope), None)  # an expired key is dropped
            if hit is not None and hit.expires > self._clock():
                self._cache[(tenant, scope)] = hit  # now the most recently used
                return hit
        owner = None
        if scope != TENANT_SCOPE:  # a thread key is wrapped under its tenant's, looked up first
            owner = self._key(tenant, TENANT_SCOPE, primary, create=create)
        row = self._table.get(tenant, scope)
        if row is None:
            if not create:
                raise UnknownTenantError(_unknown(tenant, scope))
            wrapper = _primary_cipher(primary) if owner is None else owner.cipher
            self._table.insert(self._new_row(tenant, scope, wrapper))
            row = self._table.get(tenant, scope)
            if row is None:
                kind = "tenant" if owner is None else "thread"
                raise UnknownTenantError(f"the tenant key store did not keep a new {kind} key")
        entry = self._unwrap(row, primary, owner)
        with self._lock:
            self._cache[(tenant, scope)] = entry
            self._cache.move_to_end((tenant, scope))
            while len(self._cache) > self._max_cached:
                self._cache.popitem(last=False)
        return entry

    @scrubbed
    def _new_row(self, tenant: str, scope: str, wrapper: SealingCipher) -> KeyRow:
        key_id = os.urandom(_KEY_ID_SIZE).hex()
        key = os.urandom(KEY_SIZE)
        name, wrapped = wrapper.encrypt_at(key, *_wrap_at(tenant, scope, key_id))
        del key
        return KeyRow(tenant, scope, key_id, name, wrapped, _now(), None)

    @scrubbed
    def _unwrap(
        self, row: KeyRow, primary: EncryptedSerializer, owner: _Unwrapped | None
    ) -> _Unwrapped:
        """A tenant key (``owner`` None) under the primary, or a thread key under its owner."""
        if owner is None:
            refusal = ConfigurationError("the primary cipher cannot unwrap tenant keys")
            key = _tenant_key(row, primary, refusal)
        else:
            context, location = _wrap_at(row.tenant, row.scope, row.key_id)
            key = owner.cipher.decrypt_at(row.cipher_name, _live(row), context, location)
        if len(key) != KEY_SIZE:
            kind = "tenant" if owner is None else "thread"
            raise DecryptionError(f"a stored {kind} key is not 32 bytes")
        index = BlindIndex(hkdf_sha256(key, _INDEX_INFO, INDEX_KEY_SIZE)) if owner is None else None
        cipher = EnvKeyCipher(key, legacy_mode=None)
        del key
        return _Unwrapped(row.key_id, cipher, index, self._clock() + self._max_age)

    def shred(self, tenant_id: str) -> ShredResult:
        """Destroy the tenant's key (and its thread keys): every row of it, anywhere, is gone.

        Idempotent (a second shred reports ``already``); refuses a tenant
        that never had a key (`UnknownTenantError`). Logged.
        """
        return self._shred(check_tenant_id(tenant_id), TENANT_SCOPE)

    def shred_thread(self, tenant_id: str, thread_id: str) -> ShredResult:
        """Destroy one thread's key: its rows, anywhere, are gone; the tenant's others stay."""
        tenant = check_tenant_id(tenant_id)
        thread = check_tenant_id(thread_id, "thread id")
        return self._shred(tenant, THREAD_PREFIX + thread)

    def _shred(self, tenant: str, scope: str) -> ShredResult:
        row = self._table.get(tenant, scope)
        thread = scope[len(THREAD_PREFIX) :] if scope else None
        what = _what(tenant, thread)
        if row is None:
            raise UnknownTenantError(
                f"the tenant key store holds no key for {what}: nothing shredded"
            )
        already = row.wrapped is None
        when = row.shredded or _now()
        if not already:
            self._table.shred(tenant, scope, when)
        with self._lock:
            for key in list(self._cache):
                if key[0] == tenant and (not scope or key[1] == scope):
                    del self._cache[key]
        if already:
            _log.info("secure_serde: the key of %s was shredded already (at %s)", what, when)
        else:
            _log.warning(
                "secure_serde: shredded the key of %s (key id %s): its checkpoints, and every"
                " copy of them, can no longer be read",
                what,
                row.key_id,
            )
        return ShredResult(tenant, thread, row.key_id, when, already)

    def status(self, tenant_id: str, thread_id: str | None = None) -> KeyRow | None:
        """The stored row of a tenant's (or a thread's) key, or ``None``; ``wrapped`` not shown."""
        scope = TENANT_SCOPE if thread_id is None else THREAD_PREFIX + thread_id
        return self._table.get(check_tenant_id(tenant_id), scope)

    def tenant_ids(self) -> list[str]:
        """Every tenant the key store holds a key (or a tombstone) for, in key order."""
        return [row.tenant for row in self._table.rows(TENANT_SCOPE)]

    def shredded_scopes(self) -> ShreddedScopes:
        """What is shredded: whole tenants, and single threads of live tenants (audit, rewrap)."""
        shredded = [(row.tenant, row.thread) for row in self._table.shredded()]
        tenants = frozenset(tenant for tenant, thread in shredded if thread is None)
        threads = {(tenant, thread) for tenant, thread in shredded if thread is not None}
        return ShreddedScopes(tenants, frozenset(t for t in threads if t[0] not in tenants))

    def rewrap(self, serde: EncryptedSerializer, *, dry_run: bool = False) -> TenantRewrapReport:
        """Re-wrap every live tenant key under ``serde``'s primary key (docs/tenants.md).

        Any of ``serde``'s ciphers reads a wrapped key; a row is replaced only if
        it still holds what was read. Keys under the primary already, shredded
        rows and thread keys are left alone. Nothing is written with ``dry_run``.
        """
        primary = _primary_cipher(serde)
        is_current, _, _ = current_test(serde.cipher)
        examined = rewrapped = current = shredded = 0
        failed: list[str] = []
        for row in self._table.rows(TENANT_SCOPE):
            examined += 1
            if row.wrapped is None:
                shredded += 1
            elif is_current(row.cipher_name, row.wrapped):
                current += 1
            elif self._moved(row, serde, primary, dry_run):
                rewrapped += 1
            else:
                failed.append(row.tenant)
        with self._lock:
            self._cache.clear()
        report = TenantRewrapReport(examined, rewrapped, current, shredded, tuple(failed), dry_run)
        _log.info("secure_serde: tenant key rewrap: %s", report)
        return report

    @scrubbed
    def _moved(
        self, row: KeyRow, serde: EncryptedSerializer, primary: SealingCipher, dry_run: bool
    ) -> bool:
        """Whether a live tenant key was (or, with ``dry_run``, would be) moved to ``primary``."""
        try:
            refusal = DecryptionError(f"no cipher reads tenant keys under {row.cipher_name!r}")
            key = _tenant_key(row, serde, refusal)
        except DecryptionError:
            return False
        name, wrapped = primary.encrypt_at(key, *_wrap_at(row.tenant, row.scope, row.key_id))
        del key
        return dry_run or self._table.swap(row.tenant, row.scope, _live(row), wrapped, name)


@scrubbed
def _tenant_key(row: KeyRow, serde: EncryptedSerializer, refusal: SecureSerdeError) -> bytes:
    wrapped = _live(row)
    cipher = serde.read_rule.route(f"{_TENANT_CONTEXT}+{row.cipher_name}").cipher
    if cipher is None or not is_sealing(cipher):
        raise refusal
    context, location = _wrap_at(row.tenant, row.scope, row.key_id)
    return cast(SealingCipher, cipher).decrypt_at(row.cipher_name, wrapped, context, location)


def _what(tenant: str, thread: str | None) -> str:
    return f"tenant {tenant!r}" if thread is None else f"thread {thread!r} of tenant {tenant!r}"


def _unknown(tenant: str, scope: str) -> str:
    if scope == TENANT_SCOPE:
        return (
            f"the tenant key store holds no key for tenant {tenant!r}, but the checkpoint store"
            " holds a row of it: the key store was restored from a backup older than the row,"
            " or it is not this store's key store"
        )
    return (
        f"the tenant key store holds no key for thread {scope[len(THREAD_PREFIX) :]!r} of"
        f" tenant {tenant!r}, but the checkpoint store holds a row of it: the row was planted,"
        " or the key store was restored from a backup older than the row"
    )


def _live(row: KeyRow) -> bytes:
    if row.wrapped is None:
        thread = row.thread
        what = _what(row.tenant, thread)
        raise ShreddedError(
            f"the key of {what} was shredded at {row.shredded}: its checkpoints can no longer"
            " be read, and no new ones are written",
            tenant_id=row.tenant,
            thread_id=thread,
            shredded_at=row.shredded or "",
        )
    return row.wrapped


def _primary_cipher(serde: EncryptedSerializer) -> SealingCipher:
    if not isinstance(serde, EncryptedSerializer) or not is_sealing(serde.cipher):
        raise ConfigurationError(
            "tenant keys are wrapped under an EncryptedSerializer's cipher that binds values"
            " to their place (EnvKeyCipher, KeyRotationCipher, KmsEnvelopeCipher)"
        )
    return cast(SealingCipher, serde.cipher)
