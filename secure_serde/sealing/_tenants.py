"""`TenantKeys`: a random data key per tenant and per thread, kept wrapped, and shredded on demand.

The serializer's primary key wraps one random **tenant key** per tenant,
which wraps one random **thread key** per thread; the thread key encrypts
the thread's checkpoints (an `EnvKeyCipher`: format v3, each value sealed
for its location). The tenant key also keys the tenant's blind index (HKDF), so
a shred also ends the use of its metadata tokens as a guessing oracle. Each
wrapped key is sealed for a location naming its tenant, thread and key id,
and kept in a key store of its own (_tenant_store.py), never in the
checkpoint store, whose backups then hold no key.

**Shredding** nulls the wrapped key and keeps the row as a tombstone, so the
key is never created again. Unwrapped keys are cached, bounded in count and
age (``max_age``): KMS calls grow with tenants, not operations, and another
process may use a shredded key until its ``max_age`` passes (docs/tenants.md).
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
from secure_serde.sealing._tenant_store import (
    TENANT_SCOPE,
    THREAD_PREFIX,
    KeyRow,
    KeyTable,
    open_table,
)
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


def _wrap_location(kind: int, tenant: str, thread: str, key_id: str) -> bytes:
    """Where a wrapped key belongs, as its associated data: injective, length-prefixed."""
    parts = [_WRAP_MAGIC, bytes([kind])]
    for text in (tenant, thread, key_id):
        raw = text.encode("utf-8", "surrogatepass")
        parts += [struct.pack(">I", len(raw)), raw]
    return b"".join(parts)


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

    Args of `open`:
        location: a SQLite file path, or a ``postgresql://`` URL. Never the
            checkpoint store: its backups must not hold the keys.
        max_cached: unwrapped keys kept in memory (tenants and threads alike).
        max_age: seconds an unwrapped key is kept; after that it is read and
            unwrapped again (one KMS call per tenant, with KMS as primary).
    """

    def __init__(
        self,
        table: KeyTable,
        *,
        max_cached: int = 4096,
        max_age: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(max_cached, int) or max_cached < 1:
            raise ConfigurationError("max_cached is a positive int")
        if not isinstance(max_age, (int, float)) or max_age <= 0:
            raise ConfigurationError("max_age is a positive number of seconds")
        self._table = table
        self._max_cached = max_cached
        self._max_age = float(max_age)
        self._clock = clock
        self._lock = threading.RLock()
        self._cache: OrderedDict[tuple[str, str], _Unwrapped] = OrderedDict()

    @classmethod
    def open(
        cls,
        location: str | os.PathLike[str],
        *,
        max_cached: int = 4096,
        max_age: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> TenantKeys:
        """The key store at ``location`` (a SQLite path or a ``postgresql://`` URL)."""
        return cls(open_table(location), max_cached=max_cached, max_age=max_age, clock=clock)

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
        index = self._tenant(tenant, primary, create=True).index
        if index is None:  # pragma: no cover - tenant entries always carry one
            raise ConfigurationError("a tenant key without its index")
        return index

    def thread_cipher(
        self, tenant: str, thread: str, primary: EncryptedSerializer, *, create: bool
    ) -> EnvKeyCipher:
        """The cipher of one thread's key; created (with its tenant's) when ``create``.

        Raises:
            ShreddedError: the tenant's or the thread's key was shredded.
            UnknownTenantError: no key, and ``create`` is false (a row the
                key store has no key for).
        """
        scope = THREAD_PREFIX + thread
        with self._lock:
            hit = self._cached((tenant, scope))
        if hit is not None:
            return hit.cipher
        owner = self._tenant(tenant, primary, create=create)
        row = self._table.get(tenant, scope)
        if row is None:
            if not create:
                raise UnknownTenantError(
                    f"the tenant key store holds no key for thread {thread!r} of tenant"
                    f" {tenant!r}, but the checkpoint store holds a row of it: the row was"
                    " planted, or the key store was restored from a backup older than the row"
                )
            self._table.insert(self._new_row(tenant, scope, _THREAD_KIND, owner.cipher))
            row = self._table.get(tenant, scope)
            if row is None:
                raise UnknownTenantError("the tenant key store did not keep a new thread key")
        entry = self._unwrap_thread(row, owner.cipher)
        self._remember((tenant, scope), entry)
        return entry.cipher

    def _tenant(self, tenant: str, primary: EncryptedSerializer, *, create: bool) -> _Unwrapped:
        with self._lock:
            hit = self._cached((tenant, TENANT_SCOPE))
        if hit is not None:
            return hit
        row = self._table.get(tenant, TENANT_SCOPE)
        if row is None:
            if not create:
                raise UnknownTenantError(
                    f"the tenant key store holds no key for tenant {tenant!r}, but the"
                    " checkpoint store holds a row of it: the key store was restored from a"
                    " backup older than the row, or it is not this store's key store"
                )
            cipher = _primary_cipher(primary)
            self._table.insert(self._new_row(tenant, TENANT_SCOPE, _TENANT_KIND, cipher))
            row = self._table.get(tenant, TENANT_SCOPE)
            if row is None:
                raise UnknownTenantError("the tenant key store did not keep a new tenant key")
        entry = self._unwrap_tenant(row, primary)
        self._remember((tenant, TENANT_SCOPE), entry)
        return entry

    def _cached(self, key: tuple[str, str]) -> _Unwrapped | None:
        hit = self._cache.get(key)
        if hit is None:
            return None
        if hit.expires <= self._clock():
            del self._cache[key]
            return None
        self._cache.move_to_end(key)
        return hit

    def _remember(self, key: tuple[str, str], entry: _Unwrapped) -> None:
        with self._lock:
            self._cache[key] = entry
            self._cache.move_to_end(key)
            while len(self._cache) > self._max_cached:
                self._cache.popitem(last=False)

    @scrubbed
    def _new_row(self, tenant: str, scope: str, kind: int, wrapper: SealingCipher) -> KeyRow:
        key_id = os.urandom(_KEY_ID_SIZE).hex()
        thread = scope[len(THREAD_PREFIX) :] if kind == _THREAD_KIND else ""
        context = _TENANT_CONTEXT if kind == _TENANT_KIND else _THREAD_CONTEXT
        key = os.urandom(KEY_SIZE)
        name, wrapped = wrapper.encrypt_at(
            key, context, _wrap_location(kind, tenant, thread, key_id)
        )
        del key
        return KeyRow(tenant, scope, key_id, name, wrapped, _now(), None)

    @scrubbed
    def _unwrap_tenant(self, row: KeyRow, primary: EncryptedSerializer) -> _Unwrapped:
        refusal = ConfigurationError("the primary cipher cannot unwrap tenant keys")
        key = _tenant_key(row, primary, refusal)
        if len(key) != KEY_SIZE:
            raise DecryptionError("a stored tenant key is not 32 bytes")
        index_key = hkdf_sha256(key, _INDEX_INFO, INDEX_KEY_SIZE)
        entry = _Unwrapped(
            row.key_id,
            EnvKeyCipher(key, legacy_mode=None),
            BlindIndex(index_key),
            self._clock() + self._max_age,
        )
        del key, index_key
        return entry

    @scrubbed
    def _unwrap_thread(self, row: KeyRow, tenant_cipher: EnvKeyCipher) -> _Unwrapped:
        wrapped = _live(row)
        location = _wrap_location(_THREAD_KIND, row.tenant, row.thread or "", row.key_id)
        key = tenant_cipher.decrypt_at(row.cipher_name, wrapped, _THREAD_CONTEXT, location)
        if len(key) != KEY_SIZE:
            raise DecryptionError("a stored thread key is not 32 bytes")
        entry = _Unwrapped(
            row.key_id, EnvKeyCipher(key, legacy_mode=None), None, self._clock() + self._max_age
        )
        del key
        return entry

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
        tenants: set[str] = set()
        threads: set[tuple[str, str]] = set()
        for row in self._table.shredded():
            thread = row.thread
            if thread is None:
                tenants.add(row.tenant)
            else:
                threads.add((row.tenant, thread))
        return ShreddedScopes(
            frozenset(tenants), frozenset(t for t in threads if t[0] not in tenants)
        )

    def rewrap(self, serde: EncryptedSerializer, *, dry_run: bool = False) -> TenantRewrapReport:
        """Re-wrap every live tenant key under ``serde``'s primary key.

        Reads each wrapped key with any of ``serde``'s ciphers (the keyring's
        older keys, ``decrypt_only``), and writes it back under the primary
        only if the row still holds what was read (another run may race).
        Keys already under the primary are left alone, so a second run, or
        a run resumed after a failure, does only what is left. Thread keys
        are wrapped under their tenant's key and do not change. Shredded
        rows are counted and skipped. Nothing is written with ``dry_run``.
        """
        primary = _primary_cipher(serde)
        is_current, _, _ = current_test(serde.cipher)
        examined = rewrapped = current = shredded = 0
        failed: list[str] = []
        for row in self._table.rows(TENANT_SCOPE):
            examined += 1
            if row.wrapped is None:
                shredded += 1
                continue
            if is_current(row.cipher_name, row.wrapped):
                current += 1
                continue
            try:
                moved = self._rewrapped(row, serde, primary)
            except DecryptionError:
                failed.append(row.tenant)
                continue
            if dry_run:
                rewrapped += 1
                continue
            if self._table.swap(row.tenant, row.scope, row.wrapped, moved[1], moved[0]):
                rewrapped += 1
            else:
                failed.append(row.tenant)
        with self._lock:
            self._cache.clear()
        report = TenantRewrapReport(examined, rewrapped, current, shredded, tuple(failed), dry_run)
        _log.info("secure_serde: tenant key rewrap: %s", report)
        return report

    @scrubbed
    def _rewrapped(
        self, row: KeyRow, serde: EncryptedSerializer, primary: SealingCipher
    ) -> tuple[str, bytes]:
        refusal = DecryptionError(f"no cipher reads tenant keys under {row.cipher_name!r}")
        key = _tenant_key(row, serde, refusal)
        location = _wrap_location(_TENANT_KIND, row.tenant, "", row.key_id)
        moved = primary.encrypt_at(key, _TENANT_CONTEXT, location)
        del key
        return moved


@scrubbed
def _tenant_key(row: KeyRow, serde: EncryptedSerializer, refusal: SecureSerdeError) -> bytes:
    wrapped = _live(row)
    cipher = serde.read_rule.route(f"{_TENANT_CONTEXT}+{row.cipher_name}").cipher
    if cipher is None or not is_sealing(cipher):
        raise refusal
    location = _wrap_location(_TENANT_KIND, row.tenant, "", row.key_id)
    return cast(SealingCipher, cipher).decrypt_at(
        row.cipher_name, wrapped, _TENANT_CONTEXT, location
    )


def _what(tenant: str, thread: str | None) -> str:
    return f"tenant {tenant!r}" if thread is None else f"thread {thread!r} of tenant {tenant!r}"


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
