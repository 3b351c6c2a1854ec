"""Refuse state values read from the plaintext ``checkpoint`` JSON, unless migrating.

Our savers never write a state value there, so one found on read was either
written by the stock saver (a thread started before the switch) or planted
by someone with write access to the database; nothing authenticates it. As
`EncryptedSerializer` does for plaintext blobs, reading them takes an
explicit switch (``Migration.inline_values``, 0.1.0's
``allow_inline_values=True``), and every such read is logged, rate-limited.
Even then they are read strictly: the stock saver only ever inlines
``None``, ``str``, ``int``, ``float`` and ``bool``, so any other JSON value
(an object, an array) was planted and raises `StrictDecodeError`.

The ``true`` marker the stock saver writes beside a ``DeltaChannel``
snapshot is not a value: the snapshot blob, loaded with it, wins over it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from secure_serde._errors import PlaintextRefusedError, StrictDecodeError
from secure_serde._ratelog import RateLimitedWarning

__all__ = ["InlineValueGuard", "blob_channels"]

_EMPTY: Final = b"empty"
# What langgraph-checkpoint-postgres keeps inline (its put's primitive test).
_INLINE_TYPES: Final = (type(None), str, int, float, bool)


def blob_channels(blob_rows: Iterable[Sequence[bytes]] | None) -> set[str]:
    """Channels a ``SELECT_SQL`` row loads from ``checkpoint_blobs`` (stock ``_load_blobs``)."""
    return {bytes(row[0]).decode() for row in blob_rows or () if bytes(row[1]) != _EMPTY}


class InlineValueGuard:
    """Refuses, or logs, channel values that come from the checkpoint JSON."""

    __slots__ = ("_allow", "_log")

    def __init__(self, allow: bool) -> None:
        self._allow = allow
        self._log = RateLimitedWarning(
            "secure_serde read plaintext inline channel values %d time(s) (latest channels %s)"
            " because Migration.inline_values is on; finish migrating"
            " and turn it off"
        )

    @property
    def allow(self) -> bool:
        return self._allow

    def check_row(self, inline: Mapping[str, Any] | None, loaded: set[str]) -> None:
        """Check one checkpoint row: ``inline`` is its JSON ``channel_values``."""
        if inline:
            self._check({ch: v for ch, v in inline.items() if ch not in loaded})

    def check_seeds(self, seed_inline_by_ch: Mapping[str, Any]) -> None:
        """Check the inline seeds the stock delta-history walk settled on."""
        self._check(seed_inline_by_ch)

    def _check(self, values: Mapping[str, Any]) -> None:
        if not values:
            return
        channels = sorted(values)
        if not self._allow:
            raise PlaintextRefusedError(
                f"refusing plaintext value(s) of channel(s) {channels} stored inline in the"
                " checkpoint JSON (Migration.inline_values is off);"
                " a stock saver wrote them, or someone planted them"
            )
        if planted := sorted(ch for ch, v in values.items() if type(v) not in _INLINE_TYPES):
            raise StrictDecodeError(
                f"refusing inline value(s) of channel(s) {planted} in the checkpoint JSON: the"
                " stock saver only inlines None, str, int, float and bool, so these were planted"
            )
        self._log.record(channels)
