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

An unchanged primitive is written again (see `route_primitives_to_blobs`)
unless `StoredPrimitives` shows that this saver already stored that very
version, which in a running thread is nearly always: then it costs what an
unchanged non-primitive channel costs the stock saver, no encryption and no
row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final

from langgraph.checkpoint.base import ChannelVersions, Checkpoint

from secure_serde._errors import EncryptionError

__all__ = ["StoredPrimitives", "route_primitives_to_blobs", "unbox"]

# The types langgraph-checkpoint-postgres 3.2 inlines (``None`` aside).
_INLINE_TYPES: Final = (str, int, float, bool)

# (thread_id, checkpoint_ns, channel) entries remembered per saver; about
# 200 bytes each. Past it the memory starts again, which costs one rewrite
# of each thread's unchanged primitives, nothing more.
_STORED_LIMIT: Final = 16_384


class _BlobBound:
    """A primitive channel value on its way to ``checkpoint_blobs``."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        # State values are not for logs, even boxed ones.
        return f"_BlobBound({type(self.value).__name__})"


class StoredPrimitives:
    """The primitive blob versions this saver has stored, per thread, namespace and channel.

    Holds ids and version strings only, never a value. An entry is added
    only after the ``put`` that wrote the blob returned, so it names a row
    that was inserted (or already existed). Rows deleted later, by
    ``delete_thread`` or ``prune`` here or elsewhere, are not tracked: a
    checkpoint put afterwards that still refers to a deleted version loses
    that primitive's blob exactly as the stock saver loses the blob of any
    unchanged non-primitive channel. New runs get new versions (langgraph's
    carry a random part), so they always write their blobs.
    """

    __slots__ = ("_limit", "_size", "_threads")

    def __init__(self, limit: int = _STORED_LIMIT) -> None:
        self._limit = limit
        self._size = 0  # approximate under concurrent puts; it only bounds memory
        self._threads: dict[tuple[str, str], dict[str, Any]] = {}

    def versions(self, thread_id: str, checkpoint_ns: str) -> Mapping[str, Any]:
        """Channel to stored version, for one thread and namespace."""
        return self._threads.get((thread_id, checkpoint_ns), _NONE_STORED)

    def record(self, thread_id: str, checkpoint_ns: str, versions: Mapping[str, Any]) -> None:
        """Remember that the blobs of ``versions`` (channel to version) are stored."""
        if not versions:
            return
        if self._size + len(versions) > self._limit:
            # Plain dict operations: safe across threads under the GIL.
            self._threads.clear()
            self._size = 0
        stored = self._threads.setdefault((thread_id, checkpoint_ns), {})
        before = len(stored)
        stored.update(versions)
        self._size += len(stored) - before


_MISSING: Final = object()
_NONE_STORED: Final[Mapping[str, Any]] = MappingProxyType({})


def route_primitives_to_blobs(
    checkpoint: Checkpoint,
    new_versions: ChannelVersions,
    stored: Mapping[str, Any] = _NONE_STORED,
) -> tuple[Checkpoint, ChannelVersions, ChannelVersions]:
    """The checkpoint and versions to give the stock ``put``, and the primitives' versions.

    Primitive values come back boxed, so none stays in the checkpoint JSON.
    Every boxed channel gets a blob version, even one that did not change in
    this step: the stock reader joins blobs on the checkpoint's
    ``channel_versions``, and a thread the stock saver wrote before the
    switch keeps its unchanged primitives only inline, in older rows, so no
    blob for that version exists yet. The insert is ``ON CONFLICT DO
    NOTHING``, so rewriting an existing one is a no-op, but it still costs
    an encryption and a row: an unchanged channel whose version ``stored``
    (channel to version, from `StoredPrimitives.versions`) holds is left out
    of the versions instead, as the stock saver leaves out an unchanged
    non-primitive one.
    The third result maps each primitive channel the stock ``put`` will
    write to the version it writes, for `StoredPrimitives.record` once that
    put has succeeded.

    Raises:
        EncryptionError: a primitive value has no entry in
            ``channel_versions``. The stock saver would keep it inline, but a
            blob without a version can never be read back, and inline is what
            this saver exists to prevent. Nothing is written.
    """
    values = checkpoint["channel_values"]
    versions = checkpoint["channel_versions"]
    boxed: dict[str, Any] = {}
    rewrite: ChannelVersions = {}
    for channel, value in values.items():
        if value is None or isinstance(value, _INLINE_TYPES):
            if channel not in versions:
                raise EncryptionError(
                    f"channel {channel!r} has a value but no entry in channel_versions;"
                    " it cannot be stored as a blob, and will not be stored inline"
                )
            boxed[channel] = _BlobBound(value)
            version = versions[channel]
            if channel not in new_versions and stored.get(channel, _MISSING) != version:
                rewrite[channel] = version
    if not boxed:
        return checkpoint, new_versions, {}
    routed = checkpoint.copy()
    routed["channel_values"] = {**values, **boxed}
    # The caller's versions win where both exist: they are what the stock
    # saver would have written for a non-primitive value.
    blob_versions = {**rewrite, **new_versions} if rewrite else new_versions
    written = {ch: v for ch, v in blob_versions.items() if ch in boxed}
    return routed, blob_versions, written


def unbox(values: Mapping[str, Any], channels: Iterable[str]) -> dict[str, Any]:
    """The values of ``channels`` present in ``values``, each `_BlobBound` opened."""
    out: dict[str, Any] = {}
    for channel in channels:
        if channel in values:
            value = values[channel]
            out[channel] = value.value if type(value) is _BlobBound else value
    return out
