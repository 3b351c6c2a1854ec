"""Opening the ``metadata`` column of a store secure_serde 0.3's sealed savers wrote.

The column is a JSON object: plaintext keys, the sealed entry
(`SEALED_METADATA_KEY`: ``{"type": <serde type tag>, "data": <standard
base64>}`` of the serde's bytes for every other key and `ROW_KEY`, the
``[thread_id, checkpoint_ns, checkpoint_id]`` it was sealed for) and the
blind-index entry (`INDEX_METADATA_KEY`, ``{name: "<key id hex>:<mac>"}``);
tests/vectors/metadata_envelope.json freezes it. The PostgreSQL savers also
kept each record's seal in ``checkpoints.checkpoint`` under `RECORD_KEY`
(secure_serde/stores/_v03_rows.py).
`V03Metadata.open` applies 0.3's read rules, in 0.3's order, with the same
errors:

* with a policy (``seal_metadata=True``): a key that should be sealed found
  in plaintext, or no sealed entry, raises `MetadataDowngradeError` outside
  ``Migration.unsealed_metadata`` (an index entry with no sealed entry:
  `BlindIndexError`); the entry must name its own row (`MetadataMovedError`;
  an entry naming none only under ``Migration.unbound``); every index token
  must be the MAC of the sealed value it claims to index (`BlindIndexError`);
* without one (a viewer): the entry, if any, is opened and merged, unchecked.

Tokens are checked by `V03IndexKeys` (secure_serde/stores/_v03_index.py).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from secure_serde._errors import (
    BindingError,
    BlindIndexError,
    ConfigurationError,
    DecryptionError,
    MetadataDowngradeError,
    MetadataMovedError,
)
from secure_serde._ratelog import RateLimitedWarning
from secure_serde.serde import Migration
from secure_serde.stores._v03_index import V03IndexKeys

__all__ = [
    "INDEX_METADATA_KEY",
    "RECORD_KEY",
    "ROW_KEY",
    "SEALED_METADATA_KEY",
    "V03_STRUCTURAL_METADATA_KEYS",
    "V03Metadata",
    "parse_envelope",
]

SEALED_METADATA_KEY: Final = "__secure_serde_sealed__"
INDEX_METADATA_KEY: Final = "__secure_serde_index__"
# Inside the sealed entry: the row it was sealed for.
ROW_KEY: Final = "__secure_serde_row__"
# The checkpoint JSON key (PostgreSQL) that holds a record's seal.
RECORD_KEY: Final = "__secure_serde_record__"

# The keys 0.3's savers always left in plaintext (langgraph reads them back in SQL).
V03_STRUCTURAL_METADATA_KEYS: Final = frozenset(
    {"source", "step", "parents", "counters_since_delta_snapshot", "delta_writes_versioned"}
)
_RESERVED: Final = (SEALED_METADATA_KEY, INDEX_METADATA_KEY, ROW_KEY)

# (thread_id, checkpoint_ns, checkpoint_id)
Row = tuple[str, str, str]


def _names(option: str, keys: Iterable[str] | None) -> frozenset[str]:
    if keys is None:
        return frozenset()
    if isinstance(keys, (str, bytes)):
        raise ConfigurationError(f"{option} takes a collection of key names, not one string")
    names = frozenset(keys)
    if not all(isinstance(n, str) for n in names):
        raise ConfigurationError(f"{option} key names must be str")
    if reserved := sorted(names & set(_RESERVED)):
        raise ConfigurationError(f"{reserved} are reserved by secure_serde")
    return names


class V03Metadata:
    """The metadata policy 0.3's saver was built with, and the checks it made on read."""

    __slots__ = ("_allow", "_downgrade_log", "_keys", "_plaintext", "_unbound", "_unbound_log")

    def __init__(  # noqa: PLR0913 - 0.3's saver options, keyword-only
        self,
        serde: Any,
        migration: Migration,
        *,
        seal_metadata: bool,
        plaintext_metadata: Iterable[str] | None,
        indexed_metadata: Iterable[str] | None,
        index_key: Any,
    ) -> None:
        if not isinstance(seal_metadata, bool):
            raise ConfigurationError("seal_metadata must be True or False")
        plaintext = _names("plaintext_metadata", plaintext_metadata)
        indexed = _names("indexed_metadata", indexed_metadata)
        self._plaintext: frozenset[str] | None = None
        self._keys: V03IndexKeys | None = None
        if not seal_metadata:
            if plaintext or indexed:
                raise ConfigurationError(
                    "seal_metadata=False keeps every key plaintext; plaintext_metadata and"
                    " indexed_metadata need sealing on"
                )
        else:
            self._plaintext = plaintext | V03_STRUCTURAL_METADATA_KEYS
            if both := sorted(indexed & self._plaintext):
                raise ConfigurationError(
                    f"metadata key(s) {both} are plaintext: only sealed keys get a blind index"
                )
            self._keys = V03IndexKeys.resolve(serde, index_key)
            if self._keys is None and indexed:
                raise ConfigurationError(
                    "indexed_metadata needs a key for its blind indexes: the serde's cipher"
                    " holds no local key (KMS?); pass index_key="
                )
        self._allow = migration.unsealed_metadata
        self._unbound = migration.unbound
        self._downgrade_log = RateLimitedWarning(
            "secure_serde read %d checkpoint(s) with metadata that should be sealed in"
            " plaintext (latest keys %s) because Migration.unsealed_metadata is on"
        )
        self._unbound_log = RateLimitedWarning(
            "secure_serde read %d checkpoint(s) whose sealed metadata names no row"
            " (latest %s) because Migration.unbound is on"
        )

    def open(self, load: Callable[[tuple[str, bytes]], Any], metadata: Any, row: Row) -> Any:
        """The caller's metadata, after every check; ``load`` reads at the entry's location.

        Raises:
            MetadataDowngradeError, MetadataMovedError, BlindIndexError,
            BindingError (not a JSON object), or the serde's `DecryptionError`.
        """
        if not isinstance(metadata, dict):
            raise BindingError("checkpoint metadata is not a JSON object")
        self._check(metadata)
        sealed = _open_entry(load, metadata)
        if sealed is None:
            return metadata
        bound = sealed.pop(ROW_KEY, None)
        if self._plaintext is not None:
            self._check_row(bound, row)
            self._check_index(metadata.get(INDEX_METADATA_KEY), sealed)
        plain = {k: v for k, v in metadata.items() if k not in _RESERVED}
        return {**plain, **sealed}

    def _check(self, metadata: Any) -> None:
        if self._plaintext is None:
            return
        exposed = sorted(k for k in metadata if k not in self._plaintext and k not in _RESERVED)
        missing = SEALED_METADATA_KEY not in metadata
        if not exposed and not missing:
            return
        if missing and INDEX_METADATA_KEY in metadata:
            index = metadata[INDEX_METADATA_KEY]
            name = str(next(iter(index), "?")) if isinstance(index, dict) else "?"
            raise BlindIndexError("blind index stored without a sealed entry", key=name)
        if not self._allow:
            what = f"key(s) {exposed} that should be sealed are" if exposed else "the entry is"
            raise MetadataDowngradeError(
                f"sealed metadata was removed or bypassed: {what} stored in plaintext"
                " (Migration.unsealed_metadata is off)",
                keys=tuple(exposed),
            )
        self._downgrade_log.record(exposed or ["<no sealed entry>"])

    def _check_row(self, bound: Any, row: Row) -> None:
        if bound is None:
            if not self._unbound:
                raise MetadataMovedError(
                    "sealed metadata names no row (written by secure_serde 0.1.0?);"
                    " read it under Migration.unbound"
                )
            self._unbound_log.record(row[2])
            return
        if bound != list(row):
            raise MetadataMovedError("sealed metadata entry belongs to another checkpoint")

    def _check_index(self, index: Any, sealed: Mapping[str, Any]) -> None:
        if index is None:
            return
        if not isinstance(index, dict):
            raise BlindIndexError("malformed blind index entry", key="?")
        for name, token in index.items():
            if name not in sealed:
                raise BlindIndexError(
                    f"blind index for metadata key {name!r} has no sealed value", key=str(name)
                )
            if self._keys is None:
                raise BlindIndexError(
                    f"cannot verify the blind index of {name!r}: no index key configured",
                    key=str(name),
                )
            self._keys.verify(name, sealed[name], token)


def parse_envelope(envelope: Any) -> tuple[str, bytes] | None:
    """The ``(type tag, ciphertext)`` an entry holds, or ``None`` if it is malformed."""
    if not isinstance(envelope, dict) or set(envelope) != {"type", "data"}:
        return None
    type_tag, encoded = envelope["type"], envelope["data"]
    if not isinstance(type_tag, str) or not isinstance(encoded, str):
        return None
    try:
        return type_tag, base64.b64decode(encoded.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError):
        return None


def _open_entry(load: Callable[[tuple[str, bytes]], Any], metadata: Any) -> dict[str, Any] | None:
    entry = metadata.get(SEALED_METADATA_KEY)
    if entry is None:
        return None
    parsed = parse_envelope(entry)
    if parsed is None:
        raise DecryptionError("malformed sealed metadata entry")
    sealed = load(parsed)
    if not isinstance(sealed, dict):
        raise DecryptionError("sealed metadata entry does not hold a mapping")
    return sealed
