"""The two bounded data-key caches behind `KmsEnvelopeCipher`.

Both forget a key as soon as an operation observes that it has expired, so
an idle process keeps no expired key beyond its next operation (`clear`
drops them all). Python cannot wipe memory: "forget" drops every reference.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from secure_serde._errors import ConfigurationError
from secure_serde.crypto import AesGcm, KeyCommitment, SecretHolder

# NIST SP 800-38D: at most 2^32 invocations of GCM with random 96-bit nonces per key.
MAX_MESSAGES_LIMIT: Final = 2**32

Clock = Callable[[], float]


@dataclass(frozen=True)
class CacheLimits:
    """Validated cache bounds; see `KmsEnvelopeCipher` for their meaning and defaults."""

    max_age: float
    max_messages: int
    max_bytes: int
    decrypt_ttl: float
    decrypt_entries: int

    def __post_init__(self) -> None:
        for name in ("max_messages", "max_bytes", "decrypt_entries"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be a positive int, got {value!r}")
        for name in ("max_age", "decrypt_ttl"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigurationError(f"{name} must be a positive number of seconds")
        if self.max_messages > MAX_MESSAGES_LIMIT:
            raise ConfigurationError(
                f"max_messages may not exceed 2**32 (NIST SP 800-38D, random nonces),"
                f" got {self.max_messages}"
            )
        if self.decrypt_ttl < self.max_age:
            # Otherwise a value written a moment ago with the current data key
            # could need a KMS Decrypt to be read back.
            raise ConfigurationError("decrypt_ttl must be at least max_age")


@dataclass(frozen=True, eq=False, repr=False)
class DataKey(SecretHolder):
    """An unwrapped data key with the blob header that names it."""

    header: bytes
    cmk_id: bytes
    aead: AesGcm
    commitment: KeyCommitment

    def __repr__(self) -> str:
        return f"<DataKey cmk_id={self.cmk_id.hex()}>"


class EncryptionKeyCache(SecretHolder):
    """The one current encryption data key (as the AWS Encryption SDK caches) and its use."""

    __slots__ = (
        "_acquire",
        "_bytes",
        "_clock",
        "_expires",
        "_key",
        "_lock",
        "_max_bytes",
        "_max_messages",
        "_messages",
        "_release",
    )

    def __init__(self, limits: CacheLimits, clock: Clock) -> None:
        self._lock = threading.Lock()
        self._acquire = self._lock.acquire
        self._release = self._lock.release
        self._clock = clock
        self._max_messages = limits.max_messages
        self._max_bytes = limits.max_bytes
        self._key: DataKey | None = None
        self._expires = 0.0
        self._messages = 0
        self._bytes = 0

    def take(self, size: int) -> DataKey | None:
        """The current key, counted as used for ``size`` bytes, or None if a new one is due."""
        now = self._clock()
        # Bound acquire/release rather than ``with``: half the cost, on every write.
        self._acquire()
        try:
            key = self._key
            if key is None:
                return None
            if (
                self._messages >= self._max_messages
                or self._bytes + size > self._max_bytes
                or now >= self._expires
            ):
                self._key = None
                return None
            self._messages += 1
            self._bytes += size
            return key
        finally:
            self._release()

    def install(self, key: DataKey, max_age: float, size: int | None) -> None:
        """Make ``key`` current; ``size`` counts a first use (None: warm-up, no use yet).

        A value larger than max_bytes gets a data key of its own, not kept for the next.
        """
        with self._lock:
            if size is not None and size > self._max_bytes:
                self._key = None
                return
            self._key = key
            self._expires = self._clock() + max_age
            self._messages = 0 if size is None else 1
            self._bytes = 0 if size is None else size

    def remaining(self) -> float:
        """Seconds until the current key expires; 0 when there is none (or it is used up)."""
        with self._lock:
            if self._key is None:
                return 0.0
            left = self._expires - self._clock()
            if left <= 0 or self._messages >= self._max_messages:
                self._key = None
                return 0.0
            return left

    def sweep(self) -> None:
        with self._lock:
            if self._key is not None and self._clock() >= self._expires:
                self._key = None

    def clear(self) -> None:
        with self._lock:
            self._key = None

    def __len__(self) -> int:
        with self._lock:
            return 0 if self._key is None else 1


class DecryptionKeyCache(SecretHolder):
    """A bounded LRU of unwrapped data keys, by blob header, with a fixed time to live."""

    __slots__ = ("_clock", "_entries", "_last", "_lock", "_max_entries", "_next_expiry", "_ttl")

    def __init__(self, limits: CacheLimits, clock: Clock) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._ttl = float(limits.decrypt_ttl)
        self._max_entries = limits.decrypt_entries
        self._entries: OrderedDict[bytes, tuple[float, DataKey]] = OrderedDict()
        # The earliest expiry of any entry: until the clock passes it, a
        # lookup needs no scan, and as soon as it does, every expired key goes.
        self._next_expiry = float("inf")
        # The most recently used entry, which is already last in LRU order:
        # reads of the current data key skip the lock and the reordering.
        self._last: DataKey | None = None

    def get(self, header: bytes) -> DataKey | None:
        last = self._last
        if last is not None and last.header == header and self._clock() < self._next_expiry:
            return last
        with self._lock:
            if self._clock() >= self._next_expiry:
                self._sweep_locked()
            found = self._entries.get(header)
            if found is None:
                return None
            self._entries.move_to_end(header)
            self._last = found[1]
            return found[1]

    def put(self, key: DataKey) -> None:
        with self._lock:
            when = self._clock() + self._ttl
            self._entries[key.header] = (when, key)
            self._entries.move_to_end(key.header)
            self._last = key
            self._next_expiry = min(self._next_expiry, when)
            while len(self._entries) > self._max_entries:
                self._entries.popitem(last=False)

    def sweep(self) -> None:
        with self._lock:
            self._sweep_locked()

    def _sweep_locked(self) -> None:
        now = self._clock()
        expired = [header for header, (when, _) in self._entries.items() if when <= now]
        for header in expired:
            del self._entries[header]
        if self._last is not None and self._last.header not in self._entries:
            self._last = None
        self._next_expiry = min((when for when, _ in self._entries.values()), default=float("inf"))

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._last = None
            self._next_expiry = float("inf")

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


@dataclass(frozen=True)
class KmsCacheInfo:
    """How many data keys are cached now (after dropping expired ones)."""

    encryption_keys: int
    decryption_keys: int
