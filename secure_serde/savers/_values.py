"""Send every channel value through the serde, primitives included.

langgraph's ``put`` keeps ``None``, ``str``, ``int``, ``float`` and ``bool``
channel values inline in the ``checkpoint`` JSON and sends only the rest to
``_dump_blobs``. Rather than copy that method, the savers hand it a
checkpoint whose primitives are boxed in `_BlobBound`: no longer primitive,
so the stock code moves them to the blob list like any other value, and
`unbox` opens the box again just before the serde sees it.

The box only lives between our ``put`` and our ``_dump_blobs``; nothing boxed
is ever stored, so the rows are exactly those the stock saver writes for a
non-primitive value, and the stock reader's support for blob-stored
primitives (its migration path for pre-delta threads) reads them back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from langgraph.checkpoint.base import ChannelVersions, Checkpoint

from secure_serde._errors import EncryptionError

__all__ = ["route_primitives_to_blobs", "unbox"]

# The types langgraph-checkpoint-postgres 3.2 inlines (``None`` aside).
_INLINE_TYPES: Final = (str, int, float, bool)


class _BlobBound:
    """A primitive channel value on its way to ``checkpoint_blobs``."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        # State values are not for logs, even boxed ones.
        return f"_BlobBound({type(self.value).__name__})"


def route_primitives_to_blobs(
    checkpoint: Checkpoint, new_versions: ChannelVersions
) -> tuple[Checkpoint, ChannelVersions]:
    """The checkpoint and versions to give the stock ``put``.

    Primitive values come back boxed. Every boxed channel gets a blob
    version, even one that did not change in this step: the stock reader
    joins blobs on the checkpoint's ``channel_versions``, and a thread the
    stock saver wrote before the switch keeps its unchanged primitives only
    inline, in older rows, so no blob for that version exists yet. The
    insert is ``ON CONFLICT DO NOTHING``, so rewriting an existing one is a
    no-op.

    Raises:
        EncryptionError: a primitive value has no entry in
            ``channel_versions``. The stock saver would keep it inline, but a
            blob without a version can never be read back, and inline is what
            this saver exists to prevent. Nothing is written.
    """
    values = checkpoint["channel_values"]
    versions = checkpoint["channel_versions"]
    boxed: dict[str, Any] = {}
    blob_versions: ChannelVersions = {}
    for channel, value in values.items():
        if value is None or isinstance(value, _INLINE_TYPES):
            if channel not in versions:
                raise EncryptionError(
                    f"channel {channel!r} has a value but no entry in channel_versions;"
                    " it cannot be stored as a blob, and will not be stored inline"
                )
            boxed[channel] = _BlobBound(value)
            blob_versions[channel] = versions[channel]
    if not boxed:
        return checkpoint, new_versions
    routed = checkpoint.copy()
    routed["channel_values"] = {**values, **boxed}
    # The caller's versions win where both exist: they are what the stock
    # saver would have written for a non-primitive value.
    return routed, {**blob_versions, **new_versions}


def unbox(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with every `_BlobBound` replaced by the value it holds."""
    return {k: v.value if type(v) is _BlobBound else v for k, v in values.items()}
