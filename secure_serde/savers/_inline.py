"""Refuse state values read from the plaintext ``checkpoint`` JSON, unless migrating.

Our savers never write a state value there, so one found on read was either
written by the stock saver (a thread started before the switch) or planted
by someone with write access to the database; nothing authenticates it. As
`EncryptedSerializer` does for plaintext blobs, reading them takes an
explicit switch (``allow_inline_values=True``), and every such read is
logged, rate-limited.

The ``true`` marker the stock saver writes beside a ``DeltaChannel``
snapshot is not a value: the snapshot blob, loaded with it, wins over it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from secure_serde._errors import PlaintextRefusedError
from secure_serde._ratelog import RateLimitedWarning

__all__ = ["InlineValueGuard", "blob_channels"]

_EMPTY: Final = b"empty"


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
            " because allow_inline_values=True; finish migrating and turn it off"
        )

    @property
    def allow(self) -> bool:
        return self._allow

    def check_row(self, inline: Mapping[str, Any] | None, loaded: set[str]) -> None:
        """Check one checkpoint row: ``inline`` is its JSON ``channel_values``."""
        if inline:
            self._check(sorted(ch for ch in inline if ch not in loaded))

    def check_seeds(self, seed_inline_by_ch: Mapping[str, Any]) -> None:
        """Check the inline seeds the stock delta-history walk settled on."""
        self._check(sorted(seed_inline_by_ch))

    def _check(self, channels: list[str]) -> None:
        if not channels:
            return
        if not self._allow:
            raise PlaintextRefusedError(
                f"refusing plaintext value(s) of channel(s) {channels} stored inline in the"
                " checkpoint JSON (allow_inline_values=False); a stock saver wrote them, or"
                " someone planted them"
            )
        self._log.record(channels)
