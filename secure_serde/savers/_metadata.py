"""Keep chosen metadata out of the plaintext ``metadata`` JSON column.

langgraph copies every ``str``/``int``/``float``/``bool`` value of
``config["configurable"]`` and ``config["metadata"]`` into each checkpoint's
metadata, which the Postgres savers store as plaintext JSONB so that
``list(filter=...)`` can query it. An API key passed in ``configurable``
therefore lands in the clear.

With a `MetadataSealer`, every metadata key outside an allowlist is moved
into one encrypted entry, ``SEALED_METADATA_KEY``, whose value is
``{"type": <serde type tag>, "data": <base64 ciphertext>}``. Our savers open
it on every read, so callers see the full metadata again. The keys
langgraph's own SQL reads (``STRUCTURAL_METADATA_KEYS``) always stay
plaintext. A stock saver reading a sealed row sees the plaintext keys and the
envelope, not the sealed values.

Nothing authenticates the plaintext JSON itself, so on read a key that this
saver seals but finds in plaintext (the envelope deleted and the value
written in the clear, or planted beside it) raises `MetadataDowngradeError`,
except under ``Migration.plaintext_metadata`` (logged, rate-limited), where
the sealed value still wins over a plaintext one of the same name. Whether
the serde's output is sealed at all is the read rule's decision
(secure_serde/_readrule.py), not a guess from its type tag.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, get_serializable_checkpoint_metadata
from langgraph.checkpoint.serde.base import SerializerProtocol

from secure_serde._errors import (
    ConfigurationError,
    DecryptionError,
    EncryptionError,
    MetadataDowngradeError,
)
from secure_serde._migration import Migration
from secure_serde._ratelog import RateLimitedWarning
from secure_serde._readrule import seals
from secure_serde.stores import SEALED_METADATA_KEY, parse_envelope

__all__ = [
    "SEALED_METADATA_KEY",
    "STRUCTURAL_METADATA_KEYS",
    "MetadataOpener",
    "MetadataSealer",
    "refuse_reserved_key",
    "unseal_metadata",
]

# source/step/parents: what every langgraph checkpoint carries and what
# history filters use. The last two are queried by the stock saver's prune SQL
# (``metadata ? 'counters_since_delta_snapshot'``, ``metadata -> 'parents'``),
# which must keep recognising DeltaChannel threads.
STRUCTURAL_METADATA_KEYS: Final = frozenset(
    {"source", "step", "parents", "counters_since_delta_snapshot", "delta_writes_versioned"}
)

# The only parts of ``config`` the stock ``put`` reads besides metadata.
_ID_KEYS: Final = ("thread_id", "checkpoint_ns", "checkpoint_id")
_TYPE: Final = "type"
_DATA: Final = "data"


def refuse_reserved_key(metadata: Mapping[str, Any]) -> None:
    """Refuse caller metadata that would be mistaken for a sealed entry on read."""
    if SEALED_METADATA_KEY in metadata:
        raise ConfigurationError(
            f"metadata key {SEALED_METADATA_KEY!r} is reserved for sealed metadata"
        )


@dataclass(frozen=True)
class MetadataSealer:
    """Seals every metadata key except ``plaintext`` (structural keys included)."""

    plaintext: frozenset[str]

    @classmethod
    def from_option(cls, keys: Iterable[str] | None) -> MetadataSealer | None:
        """The sealer for a saver's ``plaintext_metadata`` argument; ``None`` seals nothing."""
        if keys is None:
            return None
        if isinstance(keys, (str, bytes)):
            raise ConfigurationError(
                "plaintext_metadata takes a collection of key names, not one string"
            )
        names = frozenset(keys)
        for name in names:
            if not isinstance(name, str):
                raise ConfigurationError("plaintext_metadata key names must be str")
        if SEALED_METADATA_KEY in names:
            raise ConfigurationError(f"{SEALED_METADATA_KEY!r} cannot stay plaintext")
        return cls(names | STRUCTURAL_METADATA_KEYS)

    def seal(
        self,
        serde: SerializerProtocol,
        config: RunnableConfig,
        metadata: CheckpointMetadata,
    ) -> tuple[RunnableConfig, CheckpointMetadata]:
        """The config and metadata to give the stock ``put``.

        The metadata is computed here, as the stock saver would, and the
        config returned carries only the ids, so the stock ``put`` adds
        nothing from ``configurable`` back in plaintext.

        Raises:
            EncryptionError: the serde does not encrypt: by the read rule,
                its type tag is not one a cipher authenticates
                (``msgpack+pickle`` is an encoding); sealing with it would
                only encode.
        """
        full = cast(dict[str, Any], get_serializable_checkpoint_metadata(config, metadata))
        plain = {k: v for k, v in full.items() if k in self.plaintext}
        sealed = {k: v for k, v in full.items() if k not in self.plaintext}
        configurable = config.get("configurable") or {}
        ids_only: RunnableConfig = {
            "configurable": {k: configurable[k] for k in _ID_KEYS if k in configurable}
        }
        if sealed:
            type_tag, data = serde.dumps_typed(sealed)
            if not seals(serde, type_tag):
                raise EncryptionError(
                    f"sealing metadata needs an encrypting serde; {type(serde).__name__}"
                    f" wrote an unencrypted {type_tag!r} value"
                )
            plain[SEALED_METADATA_KEY] = {
                _TYPE: type_tag,
                _DATA: base64.b64encode(data).decode("ascii"),
            }
        return ids_only, cast(CheckpointMetadata, plain)

    def exposed(self, metadata: Mapping[str, Any]) -> list[str]:
        """Keys of a stored row that this sealer would have sealed, found in plaintext."""
        return sorted(k for k in metadata if k not in self.plaintext and k != SEALED_METADATA_KEY)

    def check_filter(self, filter: Mapping[str, Any] | None) -> None:
        """Refuse a ``list`` filter on a sealed key, which could only ever match nothing."""
        if not filter:
            return
        if sealed := sorted(k for k in filter if k not in self.plaintext):
            raise ConfigurationError(
                f"cannot filter on sealed metadata key(s) {sealed}: their values are"
                " encrypted; list them in plaintext_metadata to filter on them"
            )


def unseal_metadata(serde: SerializerProtocol, metadata: CheckpointMetadata) -> CheckpointMetadata:
    """``metadata`` with its sealed entry, if any, decrypted and merged back in.

    Sealed values win over plaintext ones of the same name: only the sealed
    ones are authenticated.

    Raises:
        DecryptionError: the entry is malformed, or the serde refuses it.
    """
    envelope = metadata.get(SEALED_METADATA_KEY)
    if envelope is None:
        return metadata
    parsed = parse_envelope(envelope)
    if parsed is None:
        raise DecryptionError("malformed sealed metadata entry")
    sealed = serde.loads_typed(parsed)
    if not isinstance(sealed, dict):
        raise DecryptionError("sealed metadata entry does not hold a mapping")
    plain = {k: v for k, v in metadata.items() if k != SEALED_METADATA_KEY}
    return cast(CheckpointMetadata, {**plain, **sealed})


class MetadataOpener:
    """Checks and unseals the metadata of rows read by a saver.

    With a sealer, keys it would seal found in plaintext raise
    `MetadataDowngradeError` unless ``migration.plaintext_metadata``, which
    logs them instead.
    """

    __slots__ = ("_allow", "_log", "_sealer")

    def __init__(self, sealer: MetadataSealer | None, migration: Migration) -> None:
        self._sealer = sealer
        self._allow = migration.plaintext_metadata
        self._log = RateLimitedWarning(
            "secure_serde read %d checkpoint(s) with metadata keys that should be sealed in"
            " plaintext (latest keys %s) because Migration.plaintext_metadata is on"
        )

    def check(self, metadata: Mapping[str, Any]) -> None:
        """Refuse (or log) sealed keys found in plaintext; cheap, no cipher call."""
        if self._sealer is None:
            return
        exposed = self._sealer.exposed(metadata)
        if not exposed:
            return
        if not self._allow:
            raise MetadataDowngradeError(
                f"metadata key(s) {exposed} should be sealed but are stored in plaintext:"
                " the sealed entry was removed or bypassed (Migration.plaintext_metadata is off)",
                keys=tuple(exposed),
            )
        self._log.record(exposed)

    def open(self, serde: SerializerProtocol, metadata: CheckpointMetadata) -> CheckpointMetadata:
        """`check`, then `unseal_metadata`."""
        self.check(metadata)
        return unseal_metadata(serde, metadata)
