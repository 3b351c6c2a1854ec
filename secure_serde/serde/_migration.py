"""`Migration`: the one setting that widens what secure_serde will read.

Every switch that lets a store's unauthenticated content through lives
here, so that a reviewer reads one object to know what a deployment
accepts, and so that turning migration off is one argument, not five.
Each field names a kind of row whose type tag or location nothing
authenticates; reading one is logged, rate-limited, by whoever reads it.
Rows read under these switches are still decoded strictly (data types
only, never an import by name; see secure_serde/serde/_readrule.py), so widening
what is *read* does not widen what can *run*, with one named exception:
``legacy_pickle`` hands legacy pickle rows to the inner serializer.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields
from typing import ClassVar, Final, cast

from secure_serde._errors import ConfigurationError

_UNSET: Final = cast(bool, object())
_RENAMED: Final = (
    "Migration.plaintext_metadata is deprecated: use Migration.unsealed_metadata (the old"
    " spelling goes in 0.5; the saver option plaintext_metadata= is another thing and stays)"
)


@dataclass(frozen=True, init=False)
class Migration:
    """What a store being migrated may still contain.

    Attributes:
        plaintext: blobs with no cipher suffix (a store that was never
            encrypted). Plaintext ``pickle`` rows are refused even so.
        inline_values: channel values the stock PostgreSQL saver keeps
            inline in the plaintext ``checkpoint`` JSON.
        legacy_pickle: ``pickle+aes`` rows of langgraph's built-in format,
            whose type tag is not authenticated. They are unpickled by the
            inner serializer: a relabelled ``bytes+aes`` value would run.
        unbound: unbound values, where a location is expected: values
            written with no location (by the stock saver's ``serde=`` or an
            older secure_serde), read by 0.3's savers' reader.
        unsealed_metadata: in 0.3's savers' stores, metadata keys that 0.3
            sealed but that are found in plaintext. Its 0.3 spelling
            ``plaintext_metadata`` (keyword and attribute) works with a
            `DeprecationWarning` until 0.5; it is not the saver option
            ``plaintext_metadata=``, which names keys kept in the clear on purpose.
    """

    plaintext: bool = False
    inline_values: bool = False
    legacy_pickle: bool = False
    unbound: bool = False
    unsealed_metadata: bool = False

    NONE: ClassVar[Migration]
    EVERYTHING: ClassVar[Migration]

    def __init__(  # noqa: PLR0913 - one keyword per switch, and the old spelling of one
        self,
        plaintext: bool = False,
        inline_values: bool = False,
        legacy_pickle: bool = False,
        unbound: bool = False,
        unsealed_metadata: bool = _UNSET,
        *,
        plaintext_metadata: bool = _UNSET,
    ) -> None:
        if plaintext_metadata is not _UNSET:
            if unsealed_metadata is not _UNSET:
                raise ConfigurationError(
                    "Migration takes unsealed_metadata= or its deprecated spelling"
                    " plaintext_metadata=, not both"
                )
            warnings.warn(_RENAMED, DeprecationWarning, stacklevel=2)
            unsealed_metadata = plaintext_metadata
        elif unsealed_metadata is _UNSET:
            unsealed_metadata = False
        switches = (plaintext, inline_values, legacy_pickle, unbound, unsealed_metadata)
        for field, value in zip(fields(self), switches, strict=True):
            object.__setattr__(self, field.name, value)

    @property
    def plaintext_metadata(self) -> bool:
        """Deprecated spelling of `unsealed_metadata` (until 0.5)."""
        warnings.warn(_RENAMED, DeprecationWarning, stacklevel=2)
        return self.unsealed_metadata

    def enabled(self) -> tuple[str, ...]:
        """The names of the switches that are on, for logs and reprs."""
        return tuple(f.name for f in fields(self) if getattr(self, f.name))

    @classmethod
    def resolve(cls, migration: Migration | None = None) -> Migration:
        """``migration``, or nothing widened for ``None``; anything else is refused."""
        base = cls.NONE if migration is None else migration
        if not isinstance(base, Migration):
            raise ConfigurationError(
                f"migration must be a secure_serde.Migration, not {type(base).__name__}"
            )
        return base


Migration.NONE = Migration()
# Every read switch except legacy pickles, whose tags no one ever authenticated:
# what `secure-serde rewrap` needs to bring a stock or 0.1 store up to date.
Migration.EVERYTHING = Migration(
    plaintext=True, inline_values=True, unbound=True, unsealed_metadata=True
)
