"""`Migration`: the one setting that widens what secure_serde will read.

Every switch that lets a store's unauthenticated content through lives
here, so that a reviewer reads one object to know what a deployment
accepts, and so that turning migration off is one argument, not five.
Each field names a kind of row whose type tag or location nothing
authenticates; reading one is logged, rate-limited, by whoever reads it.
Rows read under these switches are still decoded strictly (data types
only, never an import by name; see secure_serde/_readrule.py), so widening
what is *read* does not widen what can *run*, with one named exception:
``legacy_pickle`` hands legacy pickle rows to the inner serializer.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import ClassVar

from secure_serde._deprecated import warn_deprecated
from secure_serde._errors import ConfigurationError

__all__ = ["Migration"]


@dataclass(frozen=True)
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
        unbound: in the sealed savers, values written without a binding to
            their row (by the stock saver or an older secure_serde).
        plaintext_metadata: in the sealed savers, metadata keys that should
            be sealed but are found in plaintext.
    """

    plaintext: bool = False
    inline_values: bool = False
    legacy_pickle: bool = False
    unbound: bool = False
    plaintext_metadata: bool = False

    NONE: ClassVar[Migration]
    EVERYTHING: ClassVar[Migration]

    @property
    def active(self) -> bool:
        """True when any switch is on."""
        return any(getattr(self, f.name) for f in fields(self))

    def enabled(self) -> tuple[str, ...]:
        """The names of the switches that are on, for logs and reprs."""
        return tuple(f.name for f in fields(self) if getattr(self, f.name))

    @classmethod
    def resolve(
        cls,
        migration: Migration | None = None,
        *,
        allow_plaintext: bool = False,
        allow_inline_values: bool = False,
        allow_legacy_pickle: bool = False,
    ) -> Migration:
        """``migration`` (default: nothing) with 0.1.0's ``allow_*`` keyword arguments applied.

        Those aliases are deprecated: each one passed as true warns
        (`DeprecationWarning`, at the caller's line) and goes in the next
        release. Each alias can only turn its field on, so passing both a
        `Migration` and an alias widens to the union of the two. Public
        entry points resolve once and pass the result on as ``migration``,
        so one call warns once per alias.
        """
        base = cls.NONE if migration is None else migration
        if not isinstance(base, Migration):
            raise ConfigurationError(
                f"migration must be a secure_serde.Migration, not {type(base).__name__}"
            )
        flags = (
            ("plaintext", allow_plaintext),
            ("inline_values", allow_inline_values),
            ("legacy_pickle", allow_legacy_pickle),
        )
        for name, flag in flags:
            if flag:
                warn_deprecated(
                    f"allow_{name}=True is deprecated; pass migration=Migration({name}=True)"
                )
        on = {name: True for name, flag in flags if flag and not getattr(base, name)}
        return replace(base, **on) if on else base


Migration.NONE = Migration()
# Every read switch except legacy pickles, whose tags no one ever authenticated:
# what `secure-serde rewrap` needs to bring a stock or 0.1 store up to date.
Migration.EVERYTHING = Migration(
    plaintext=True, inline_values=True, unbound=True, plaintext_metadata=True
)
