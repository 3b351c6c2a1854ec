"""Sealed checkpoint metadata: what stays plaintext, what is sealed, what is indexed.

langgraph copies every ``str``/``int``/``float``/``bool`` value of
``config["configurable"]`` and ``config["metadata"]`` into each checkpoint's
metadata, which savers store as plaintext JSON so that ``list(filter=...)``
can query it. An API key passed in ``configurable`` therefore lands in the
clear. The sealed savers seal it by default.

This module is saver-agnostic: a saver calls

* `MetadataSealer.from_options` (argument checks, before connecting), then
  `MetadataSealer.with_keys` (blind-index keys from the serde, or
  ``index_key=``);
* `MetadataSealer.seal` in ``put``: the metadata JSON to store, and a config
  holding only the ids, so the stock ``put`` adds nothing back;
* `MetadataSealer.plan_filter` in ``list``: a `FilterPlan` that
  secure_serde/savers/_index_sql.py turns into SQL (PostgreSQL containment,
  or SQLite ``json_extract``);
* `MetadataOpener.open` on every row read: the caller's metadata back,
  after every check below.

The stored layout of the ``metadata`` JSON column (plaintext keys, the
sealed entry, the blind-index entry) is documented, built and parsed in one
place, secure_serde/stores/_envelope.py (`envelope`, `parse_envelope`).

The sealed entry holds every other key plus ``__secure_serde_row__``:
``[thread_id, checkpoint_ns, checkpoint_id]``, so an entry copied to
another checkpoint is refused (`MetadataMovedError`). A sealing saver
writes the entry on every row, even with nothing else to seal, so a
deleted entry is noticed. On read:

* a key that should be sealed found in plaintext, or no sealed entry at
  all: `MetadataDowngradeError`, except under ``Migration.plaintext_metadata``
  (logged; the sealed value wins over a plaintext one of the same name);
* an entry without a row (written by secure_serde 0.1.0) is read only under
  ``Migration.unbound``; one for another row raises `MetadataMovedError`;
* every stored index token is recomputed from the unsealed value it claims
  to index: a token moved from another row, rewritten, or left without its
  value raises `BlindIndexError`. A missing token only makes filters miss
  that row, as deleting it would.

Whether the serde's output is sealed at all is the read rule's decision
(secure_serde/_readrule.py), not a guess from its type tag.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, get_serializable_checkpoint_metadata
from langgraph.checkpoint.serde.base import SerializerProtocol

from secure_serde._errors import (
    BlindIndexError,
    ConfigurationError,
    DecryptionError,
    EncryptionError,
    MetadataDowngradeError,
    MetadataMovedError,
)
from secure_serde._migration import Migration
from secure_serde._ratelog import RateLimitedWarning
from secure_serde._readrule import seals
from secure_serde.savers._blind_index import BlindIndexKeys, FilterPlan, check_index_name
from secure_serde.stores import (
    INDEX_METADATA_KEY,
    ROW_KEY,
    SEALED_METADATA_KEY,
    envelope,
    parse_envelope,
)

__all__ = [
    "INDEX_METADATA_KEY",
    "ROW_KEY",
    "SEALED_METADATA_KEY",
    "STRUCTURAL_METADATA_KEYS",
    "MetadataOpener",
    "MetadataSealer",
    "Row",
    "refuse_reserved_key",
    "unseal_metadata",
]

# The keys langgraph itself writes and reads back from the database, so they
# stay plaintext (see docs/postgres.md, "Metadata sealed by default"):
# source/step/parents are in every checkpoint and are what history filters
# and LangGraph Studio use; the stock PostgreSQL prune SQL reads
# ``metadata ? 'counters_since_delta_snapshot'``, ``metadata ? 'delta_writes_versioned'``
# and ``metadata -> 'parents' ->> ''`` to recognise DeltaChannel threads and
# subgraph roots.
STRUCTURAL_METADATA_KEYS: Final = frozenset(
    {"source", "step", "parents", "counters_since_delta_snapshot", "delta_writes_versioned"}
)
_RESERVED: Final = (SEALED_METADATA_KEY, INDEX_METADATA_KEY, ROW_KEY)

# (thread_id, checkpoint_ns, checkpoint_id): where a row lives.
Row = tuple[str, str, str]

# The only parts of ``config`` the stock ``put`` reads besides metadata.
_ID_KEYS: Final = ("thread_id", "checkpoint_ns", "checkpoint_id")


def refuse_reserved_key(metadata: Mapping[str, Any]) -> None:
    """Refuse caller metadata that would be mistaken for our entries on read."""
    for name in _RESERVED:
        if name in metadata:
            raise ConfigurationError(f"metadata key {name!r} is reserved by secure_serde")


def _names(option: str, keys: Iterable[str] | None) -> frozenset[str]:
    if keys is None:
        return frozenset()
    if isinstance(keys, (str, bytes)):
        raise ConfigurationError(f"{option} takes a collection of key names, not one string")
    names = frozenset(keys)
    for name in names:
        if not isinstance(name, str):
            raise ConfigurationError(f"{option} key names must be str")
        if name in _RESERVED:
            raise ConfigurationError(f"{name!r} is reserved by secure_serde")
    return names


@dataclass(frozen=True)
class MetadataSealer:
    """Seals every metadata key except ``plaintext``; indexes ``indexed`` (sealed) keys."""

    plaintext: frozenset[str]
    indexed: frozenset[str] = frozenset()
    index_keys: BlindIndexKeys | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_options(
        cls,
        *,
        seal_metadata: bool = True,
        plaintext_metadata: Iterable[str] | None = None,
        indexed_metadata: Iterable[str] | None = None,
    ) -> MetadataSealer | None:
        """The policy for a saver's arguments; ``None`` (``seal_metadata=False``) seals nothing.

        Raises:
            ConfigurationError: a malformed name list, an indexed key that
                is also plaintext or structural, or ``seal_metadata=False``
                with keys named.
        """
        if not isinstance(seal_metadata, bool):
            raise ConfigurationError("seal_metadata must be True or False")
        plaintext = _names("plaintext_metadata", plaintext_metadata)
        indexed = _names("indexed_metadata", indexed_metadata)
        if not seal_metadata:
            if plaintext or indexed:
                raise ConfigurationError(
                    "seal_metadata=False keeps every key plaintext; plaintext_metadata and"
                    " indexed_metadata need sealing on"
                )
            return None
        for name in indexed:
            check_index_name(name)
        if both := sorted(indexed & (plaintext | STRUCTURAL_METADATA_KEYS)):
            raise ConfigurationError(
                f"metadata key(s) {both} are plaintext: only sealed keys get a blind index"
            )
        return cls(plaintext | STRUCTURAL_METADATA_KEYS, indexed)

    def with_keys(
        self, serde: SerializerProtocol, index_key: str | bytes | Iterable[str | bytes] | None
    ) -> MetadataSealer:
        """This policy with its blind-index keys: ``index_key`` if given, else the serde's.

        Without indexed keys, keys are still looked up (best effort) so that
        tokens already stored keep being verified.

        Raises:
            ConfigurationError: keys are indexed but the serde's cipher has
                no local key (KMS) and no ``index_key`` was given.
        """
        if index_key is not None:
            keys: BlindIndexKeys | None = BlindIndexKeys.from_keys(index_key)
        else:
            keys = BlindIndexKeys.from_serde(serde)
        if keys is None and self.indexed:
            raise ConfigurationError(
                "indexed_metadata needs a key for its blind indexes: the serde's cipher holds"
                " no local key (KMS?); pass index_key= (a key as `secure-serde keygen` prints)"
            )
        return MetadataSealer(self.plaintext, self.indexed, keys)

    def seal(
        self,
        serde: SerializerProtocol,
        config: RunnableConfig,
        metadata: CheckpointMetadata,
        checkpoint_id: str,
    ) -> tuple[RunnableConfig, CheckpointMetadata]:
        """The config and metadata to give the stock ``put`` for checkpoint ``checkpoint_id``.

        Raises:
            EncryptionError: the serde does not encrypt (by the read rule,
                its type tag is not one a cipher authenticates).
            ConfigurationError: an indexed value cannot be indexed.
        """
        full = cast(dict[str, Any], get_serializable_checkpoint_metadata(config, metadata))
        configurable = config.get("configurable") or {}
        plain = {k: v for k, v in full.items() if k in self.plaintext}
        sealed = {k: v for k, v in full.items() if k not in self.plaintext}
        if self.indexed:
            keys = cast(BlindIndexKeys, self.index_keys)
            index = {k: keys.token(k, sealed[k]) for k in sorted(self.indexed) if k in sealed}
            if index:
                plain[INDEX_METADATA_KEY] = index
        sealed[ROW_KEY] = [
            str(configurable.get("thread_id", "")),
            str(configurable.get("checkpoint_ns", "")),
            checkpoint_id,
        ]
        type_tag, data = serde.dumps_typed(sealed)
        if not seals(serde, type_tag):
            raise EncryptionError(
                f"sealing metadata needs an encrypting serde; {type(serde).__name__}"
                f" wrote an unencrypted {type_tag!r} value (pass seal_metadata=False to"
                " store metadata in plaintext)"
            )
        plain[SEALED_METADATA_KEY] = envelope(type_tag, data)
        ids_only: RunnableConfig = {
            "configurable": {k: configurable[k] for k in _ID_KEYS if k in configurable}
        }
        return ids_only, cast(CheckpointMetadata, plain)

    def exposed(self, metadata: Mapping[str, Any]) -> list[str]:
        """Keys of a stored row that this sealer would have sealed, found in plaintext."""
        return sorted(k for k in metadata if k not in self.plaintext and k not in _RESERVED)

    def plan_filter(
        self, filter: Mapping[str, Any] | None, *, nested_paths: bool = False
    ) -> FilterPlan:
        """Split a ``list`` filter into plaintext terms and index tokens.

        ``nested_paths``: the database reads a dotted name as a path (the
        stock SQLite filter's ``json_extract``), so ``"parents.x"`` is a term
        on the plaintext key ``parents``.

        Raises:
            ConfigurationError: the filter names a sealed key with no index,
                which could only ever match nothing.
        """
        if not filter:
            return FilterPlan({})

        def is_plain(name: str) -> bool:
            top = name.split(".", 1)[0] if nested_paths else name
            return name in self.plaintext or top in self.plaintext

        if sealed := sorted(k for k in filter if not is_plain(k) and k not in self.indexed):
            raise ConfigurationError(
                f"cannot filter on sealed metadata key(s) {sealed}: their values are"
                " encrypted; list them in indexed_metadata (a blind index) or"
                " plaintext_metadata to filter on them"
            )
        plain = {k: v for k, v in filter.items() if is_plain(k)}
        wanted = {k: v for k, v in filter.items() if k in self.indexed and not is_plain(k)}
        if not wanted:
            return FilterPlan(plain)
        keys = cast(BlindIndexKeys, self.index_keys)
        per_key: dict[str, dict[str, str]] = {key_id: {} for key_id in keys.key_ids}
        for name, value in wanted.items():
            for key_id, token in keys.tokens(name, value).items():
                per_key[key_id][name] = token
        nullable = frozenset(k for k, v in wanted.items() if v is None)
        return FilterPlan(plain, tuple(per_key.values()), nullable)


def unseal_metadata(serde: SerializerProtocol, metadata: CheckpointMetadata) -> CheckpointMetadata:
    """``metadata`` with its sealed entry, if any, decrypted and merged back in, unchecked.

    Sealed values win over plaintext ones of the same name: only the sealed
    ones are authenticated. For tools; savers use `MetadataOpener.open`.

    Raises:
        DecryptionError: the entry is malformed, or the serde refuses it.
    """
    sealed = _open_entry(serde, metadata)
    if sealed is None:
        return metadata
    sealed.pop(ROW_KEY, None)
    plain = {k: v for k, v in metadata.items() if k not in _RESERVED}
    return cast(CheckpointMetadata, {**plain, **sealed})


def _open_entry(serde: SerializerProtocol, metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    envelope = metadata.get(SEALED_METADATA_KEY)
    if envelope is None:
        return None
    parsed = parse_envelope(envelope)
    if parsed is None:
        raise DecryptionError("malformed sealed metadata entry")
    sealed = serde.loads_typed(parsed)
    if not isinstance(sealed, dict):
        raise DecryptionError("sealed metadata entry does not hold a mapping")
    return sealed


class MetadataOpener:
    """Checks and unseals the metadata of rows read by a saver (see the module docstring)."""

    __slots__ = ("_allow", "_log", "_sealer", "_unbound", "_unbound_log")

    def __init__(self, sealer: MetadataSealer | None, migration: Migration) -> None:
        self._sealer = sealer
        self._allow = migration.plaintext_metadata
        self._unbound = migration.unbound
        self._log = RateLimitedWarning(
            "secure_serde read %d checkpoint(s) with metadata that should be sealed in"
            " plaintext (latest keys %s) because Migration.plaintext_metadata is on"
        )
        self._unbound_log = RateLimitedWarning(
            "secure_serde read %d checkpoint(s) whose sealed metadata names no row"
            " (latest %s) because Migration.unbound is on"
        )

    def check(self, metadata: Mapping[str, Any]) -> None:
        """Refuse (or log) downgraded metadata; cheap, no cipher call."""
        if self._sealer is None:
            return
        exposed = self._sealer.exposed(metadata)
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
                " (Migration.plaintext_metadata is off)",
                keys=tuple(exposed),
            )
        self._log.record(exposed or ["<no sealed entry>"])

    def open(
        self, serde: SerializerProtocol, metadata: CheckpointMetadata, row: Row
    ) -> CheckpointMetadata:
        """`check`, then unseal, check the row and the blind indexes; the caller's metadata.

        Raises:
            MetadataDowngradeError, MetadataMovedError, BlindIndexError, or
            the serde's `DecryptionError`.
        """
        self.check(metadata)
        if self._sealer is None:
            return unseal_metadata(serde, metadata)
        sealed = _open_entry(serde, metadata)
        if sealed is None:  # allowed by check(): a row written before sealing
            return metadata
        self._check_row(sealed.pop(ROW_KEY, None), row)
        self._check_index(metadata.get(INDEX_METADATA_KEY), sealed)
        plain = {k: v for k, v in metadata.items() if k not in _RESERVED}
        return cast(CheckpointMetadata, {**plain, **sealed})

    def _check_row(self, bound: Any, row: Row) -> None:
        if bound is None:
            if not self._unbound:
                raise MetadataMovedError(
                    "sealed metadata names no row (written by secure_serde 0.1.0?);"
                    " read it under Migration.unbound and rewrap"
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
        sealer = cast(MetadataSealer, self._sealer)
        for name, token in index.items():
            if name not in sealed:
                raise BlindIndexError(
                    f"blind index for metadata key {name!r} has no sealed value", key=str(name)
                )
            if sealer.index_keys is None:
                raise BlindIndexError(
                    f"cannot verify the blind index of {name!r}: no index key configured",
                    key=str(name),
                )
            sealer.index_keys.verify(name, sealed[name], token)
