"""`SealedSaver`: binding, sealed metadata and record seals around any checkpoint saver.

Only langgraph's public ``BaseCheckpointSaver`` API of the inner saver is
used. What the inner saver stores is laid out in secure_serde/sealing/_codec.py
and _cell.py; the async twins of every method are in _async.py.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.serde.types import TASKS

from secure_serde._errors import ConfigurationError, SecureSerdeError, StoreIdentityError
from secure_serde._serializer import EncryptedSerializer
from secure_serde.sealing._async import AsyncMethods
from secure_serde.sealing._codec import (
    RECORD_KEY,
    Opened,
    Sealer,
    ids,
    reduced,
)
from secure_serde.sealing._identity import (
    IDENTITY_KEY,
    IDENTITY_THREAD,
    StoreIdentity,
    drop_put,
    identity_config,
    new_identity_put,
    open_identity,
    refuse_unempty,
    rotate_put,
    unenumerable,
)
from secure_serde.sealing._index import plan_filters
from secure_serde.sealing._inner import guarded, read_errors, unreadable
from secure_serde.sealing._record import new_versions_of
from secure_serde.sealing._reindex import (
    MAX_ROUNDS,
    ReindexReport,
    ReindexScan,
    ReindexTally,
    check_max_rows,
    claim_reindex,
    concurrent,
    merged,
    release_reindex,
    row_config,
    unenumerable_store,
)
from secure_serde.sealing._walks import (
    History,
    ListWalk,
    add_sends,
    check_complete,
    copy_of,
    key_of,
    latest_per_namespace,
    missing,
    needs_sends,
    oldest_first,
    orphans_after,
    overrides,
    parent_config,
    resealed,
)

__all__ = ["DEFAULT_INDEXED_METADATA", "ReindexReport", "SealedSaver"]

# langgraph's own keys that callers and savers filter on: indexed by default.
# ``run_id`` must be: ``delete_for_runs`` finds rows by it.
DEFAULT_INDEXED_METADATA: Final = frozenset(
    {"source", "step", "run_id", "counters_since_delta_snapshot"}
)
_RESERVED_KEYS: Final = frozenset({RECORD_KEY, IDENTITY_KEY, "parents"})


class SealedSaver(AsyncMethods, BaseCheckpointSaver[Any]):
    """Wraps any checkpoint saver so that it stores only sealed values, bound to their place.

    Args:
        inner: the saver that stores the rows (InMemorySaver, SqliteSaver,
            PostgresSaver, DynamoDBSaver, any ``BaseCheckpointSaver``).
        serde: an `EncryptedSerializer` whose cipher binds values to their
            row (every cipher in `secure_serde.ciphers`).
        indexed_metadata: metadata keys ``list(filter=)`` can match through
            the inner saver, by keyed blind-index tokens. ``source``,
            ``step``, ``run_id`` and ``counters_since_delta_snapshot`` always
            are. A filter on any other key is matched here, on the
            authenticated metadata, after the inner saver returns the rows.
        plaintext_metadata: metadata keys also stored in the clear, named one
            by one (checked against their sealed value on every read).
        tenant_keys: a `secure_serde.TenantKeys` key store: each tenant's rows
            are then sealed under its own keys, bound to it, and can be
            shredded (docs/tenants.md). Every call must then name a tenant.
        tenant: with ``tenant_keys``, a callable from the config to the
            tenant id; by default ``config["configurable"]["tenant_id"]``.

    Every channel value, pending write and metadata key reaches the inner
    saver sealed; the config reaches it reduced to the ids. Reads return
    only what this application wrote in this store and in that place, and
    refuse anything else with a typed error before deserializing it.
    """

    def __new__(cls, inner: BaseCheckpointSaver[Any] | None = None, **kwargs: Any) -> SealedSaver:
        # Capability-preserving: ``prune`` and ``delete_for_runs`` exist only where
        # the inner saver has them (langgraph detects capabilities by override).
        # No inner: copy.copy (with_allowlist's clone), which keeps the class it copies.
        if cls is SealedSaver and inner is not None:
            if kwargs.get("tenant_keys") is not None:
                # Per-tenant keys: a saver that routes each call to its tenant's scope.
                cls = _TENANT_VARIANT[0](inner)
            else:
                cls = _VARIANTS[(overrides(inner, "prune"), overrides(inner, "delete_for_runs"))]
        return super().__new__(cls)

    def __init__(  # noqa: PLR0913 - public constructor: keyword-only options
        self,
        inner: BaseCheckpointSaver[Any],
        *,
        serde: EncryptedSerializer,
        indexed_metadata: Iterable[str] = (),
        plaintext_metadata: Iterable[str] = (),
        tenant_keys: Any = None,
        tenant: Callable[[RunnableConfig], Any] | None = None,
    ) -> None:
        if tenant is not None and tenant_keys is None:
            raise ConfigurationError("tenant= resolves tenants for tenant_keys=, which is not set")
        if tenant_keys is not None and not getattr(type(self), "TENANT_ROUTING", False):
            raise ConfigurationError("tenant_keys= is taken by SealedSaver itself, not a subclass")
        if not isinstance(inner, BaseCheckpointSaver):
            raise ConfigurationError(
                f"SealedSaver wraps a langgraph BaseCheckpointSaver, not {type(inner).__name__}"
            )
        if isinstance(inner, SealedSaver):
            raise ConfigurationError("this saver is sealed already; wrap the inner saver once")
        if not isinstance(serde, EncryptedSerializer) or not serde.binds_locations:
            raise ConfigurationError(
                "SealedSaver needs serde=secure_serde.EncryptedSerializer(cipher) with a cipher"
                " that binds values to their row (EnvKeyCipher, KeyRotationCipher,"
                " KmsEnvelopeCipher); nothing was written"
            )
        indexed = _names(indexed_metadata, "indexed_metadata")
        plaintext = _names(plaintext_metadata, "plaintext_metadata")
        if indexed & plaintext:
            raise ConfigurationError(
                f"metadata keys {sorted(indexed & plaintext)} are both indexed and plaintext"
            )
        super().__init__(serde=serde)
        self.inner = inner
        self._encrypting = serde
        self._indexed = (indexed | DEFAULT_INDEXED_METADATA) - plaintext
        self._plaintext = plaintext
        self._sealer: Sealer | None = None
        self._lock = threading.Lock()
        self._tenant_keys = tenant_keys
        self._tenant_of = tenant

    def __repr__(self) -> str:
        return f"SealedSaver({type(self.inner).__name__}, serde={self._encrypting!r})"

    @property
    def config_specs(self) -> list[Any]:
        return list(self.inner.config_specs)

    def for_tenant(self, tenant_id: str) -> SealedSaver:
        """This saver bound to one tenant: only with ``tenant_keys=`` (docs/tenants.md)."""
        raise ConfigurationError(
            "for_tenant needs per-tenant keys: SealedSaver(inner, serde=...,"
            " tenant_keys=TenantKeys.open(LOCATION))"
        )

    def with_allowlist(self, extra_allowlist: Any) -> SealedSaver:
        serde = self._encrypting.with_msgpack_allowlist(extra_allowlist)
        if serde is self._encrypting:
            return self
        clone = copy.copy(self)
        clone.serde = clone._encrypting = serde
        clone._sealer = None
        clone._lock = threading.Lock()
        return clone

    # -- the store identity --------------------------------------------------------------

    def setup(self) -> None:
        """Set up the inner saver (where it has ``setup``) and this store's identity."""
        inner_setup = getattr(self.inner, "setup", None)
        if callable(inner_setup):
            inner_setup()
        self._ready()

    def _ready(self) -> Sealer:
        sealer = self._sealer
        if sealer is not None:
            return sealer
        with self._lock:
            if self._sealer is None:
                found = self.inner.get_tuple(identity_config())
                if found is None:
                    found = self._create_identity()
                self._sealer = self._sealer_for(open_identity(found, self._encrypting))
            return self._sealer

    def _create_identity(self) -> CheckpointTuple:
        try:
            holds_checkpoints = any(
                str(t.config["configurable"].get("thread_id")) != IDENTITY_THREAD
                for t in list(self.inner.list(None, limit=2))
            )
        except ValueError:
            unenumerable(self.inner)
            holds_checkpoints = False
        except Exception:  # noqa: BLE001 - rows the inner serde cannot read are still rows
            holds_checkpoints = True
        if holds_checkpoints:
            raise refuse_unempty()
        self.inner.put(*new_identity_put(self._encrypting), {})
        # Read back: if two processes raced to create it, both use the one kept.
        found = self.inner.get_tuple(identity_config())
        if found is None:
            raise StoreIdentityError("the inner saver did not keep the store identity record")
        return found

    def _read(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The inner saver's ``get_tuple``; its failure to decode the row is typed."""
        try:
            return self.inner.get_tuple(config)
        except read_errors() as exc:
            error = exc
        raise unreadable(self.inner, error) from None

    def _rows(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        """The inner saver's ``list``; its failure to decode a row is typed."""
        return guarded(self.inner, self.inner.list(config, **kwargs))

    def _sealer_for(self, identity: StoreIdentity) -> Sealer:
        return Sealer(self._encrypting, identity, self._indexed, self._plaintext)

    # -- reads ---------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        sealer = self._ready()
        ids(config)
        found = self._read(reduced(config))
        if found is None:
            return None
        return self._with_sends(sealer.open(found))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        sealer = self._ready()
        plans = plan_filters(filter, sealer.index_keys, self._indexed, self._plaintext)
        walk = ListWalk(sealer, plans[0], config, limit)
        # Read to the end before calling the inner saver again: stock savers hold their
        # connection's lock for as long as their list generator lives. Once per index key
        # (during a re-index): each row's tokens are under one key.
        listed: list[CheckpointTuple] = []
        for plan in plans:
            listed.extend(
                self._rows(
                    walk.inner_config,
                    filter=plan.inner,
                    before=None if before is None else reduced(before),
                    limit=walk.inner_limit,
                )
            )
        if len(plans) > 1:
            listed = merged(listed)
        for found in listed:
            if walk.full:
                walk.peek(found)
                continue
            opened = walk.take(found)
            if opened is not None:
                yield self._with_sends(opened)
        for parent in walk.unseen_parents(complete=not walk.full):
            if self._read(parent) is None:
                raise missing(parent)

    def _with_sends(self, opened: Opened) -> CheckpointTuple:
        found = opened.tuple
        if opened.parent_id is None or not needs_sends(found, opened.parent_id):
            return found
        parent = self._read(parent_config(found, opened.parent_id))
        sends = self._ready().open(parent, channels=(TASKS,)) if parent is not None else None
        return add_sends(self, found, sends)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        if not channels:
            return {}
        sealer = self._ready()
        history = History(channels)
        found = self._read(reduced(config))
        if found is None:
            return history.result()
        cursor = history.start(sealer.open(found, channels=()))
        while cursor is not None:
            found = history.prefetched(cursor)
            page = None if found is not None else history.page()
            if page is not None:
                config_, before, limit = page
                history.keep(self._rows(config_, before=before, limit=limit), cursor)
                found = history.prefetched(cursor)
            if found is None:
                found = self._read(cursor)
            if found is None:
                if history.optional:
                    break
                raise missing(cursor)
            cursor = history.step(sealer.open(found, channels=history.remaining))
        return history.result()

    # -- writes --------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self.inner.put(*self._ready().put_args(config, checkpoint, metadata, new_versions))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        inner_config, sealed = self._ready().seal_writes(config, writes, task_id, task_path)
        self.inner.put_writes(inner_config, sealed, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        ids({"configurable": {"thread_id": thread_id}})
        self.inner.delete_thread(thread_id)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread through the inner saver's ``put``/``put_writes``, re-sealed for the target.

        Every source row is authenticated at its own place first; values
        move as ciphertext, re-encrypted for the target, never deserialized.
        """
        sealer = self._ready()
        ids({"configurable": {"thread_id": target_thread_id}})
        source: RunnableConfig = {"configurable": {"thread_id": str(source_thread_id)}}
        rows = [(f, sealer.open(f, channels=())) for f in self._rows(source)]
        check_complete(rows)
        for found, opened in sorted(rows, key=oldest_first):
            put_args, writes = copy_of(sealer, found, opened, str(target_thread_id))
            written = self.inner.put(*put_args, new_versions_of(put_args[1]))
            for task_id, task_path, batch in writes:
                self.inner.put_writes(written, batch, task_id, task_path)

    # -- deletes that leave a history that still verifies --------------------------------

    def _detach(self, rows: Iterable[tuple[CheckpointTuple, Opened]]) -> None:
        """Re-seal each row as one whose parent may be deleted, before it is."""
        sealer = self._ready()
        for found, opened in rows:
            if not opened.detached:
                put_args = resealed(sealer, found, opened, detached=True)
                self.inner.put(*put_args, new_versions_of(put_args[1]))

    def _prune(self, thread_ids: Sequence[str], strategy: str) -> None:
        if isinstance(thread_ids, str):
            raise TypeError("thread_ids must be a sequence of thread IDs, not a str")
        for thread_id in thread_ids:
            ids({"configurable": {"thread_id": thread_id}})
        if strategy == "keep_latest":
            sealer = self._ready()
            for thread_id in thread_ids:
                config: RunnableConfig = {"configurable": {"thread_id": str(thread_id)}}
                rows = [(f, sealer.open(f, channels=())) for f in self._rows(config)]
                self._detach(latest_per_namespace(rows))
        self.inner.prune(thread_ids, strategy=strategy)

    def _delete_for_runs(self, run_ids: Sequence[str]) -> None:
        if isinstance(run_ids, str):
            raise TypeError("run_ids must be a sequence of run IDs, not a str")
        sealer = self._ready()
        tokens = [t for r in run_ids for t in sealer.tokens("run_id", str(r))]
        doomed = {
            key_of(found)
            for token in tokens
            for found in self._rows(None, filter={"run_id": token})
        }
        for thread in sorted({key[0] for key in doomed}):
            config: RunnableConfig = {"configurable": {"thread_id": thread}}
            rows = [(f, sealer.open(f, channels=())) for f in self._rows(config)]
            self._detach(orphans_after(rows, doomed))
        self.inner.delete_for_runs(tokens)

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.inner.get_next_version(current, channel)

    # -- the blind-index key's rotation --------------------------------------------------

    def reindex(
        self, *, dry_run: bool = False, rotate: bool = True, max_rows: int | None = None
    ) -> ReindexReport:
        """Rotate the store's blind-index key: begin (or resume), move every row, drop the old.

        A new random index key becomes current unless a re-index is in progress
        already, which this call then resumes (``rotate=False``: never begin one,
        only finish the one in progress, or check that every row is current).
        Every checkpoint whose index tokens are under another key is re-put
        through the inner saver's ``put`` with its cells unchanged; rows under
        the current key are skipped. Once no row is left under an older key, those keys leave the
        store identity. ``max_rows`` stops after that many re-puts (run again to
        resume). ``dry_run`` writes nothing and counts what a call would do.
        Filters find every row throughout. See docs/keys.md.
        """
        if self._tenant_keys is not None:
            raise ConfigurationError(
                "reindex() rotates the store's own index key; per-tenant index keys are"
                " rotated with the tenant's keys (docs/tenants.md)"
            )
        check_max_rows(max_rows)
        claim_reindex(self.inner)
        try:
            return self._reindex(dry_run=dry_run, rotate=rotate, max_rows=max_rows).report()
        finally:
            release_reindex(self.inner)

    def _identity_row(self) -> CheckpointTuple:
        found = self.inner.get_tuple(identity_config())
        if found is None:
            raise StoreIdentityError("this store's identity record is gone: restore it first")
        return found

    def _reindex(self, *, dry_run: bool, rotate: bool, max_rows: int | None) -> ReindexTally:
        self._ready()
        found = self._identity_row()
        identity = open_identity(found, self._encrypting)
        begin = rotate and len(identity.index_keys.generations) == 1
        if begin and not dry_run:
            put_args, new_id = rotate_put(found, self._encrypting)
            self.inner.put(*put_args, {})
            identity = open_identity(self._identity_row(), self._encrypting)
            if identity.index_keys.current.key_id != new_id:
                raise concurrent()
        sealer = self._sealer = self._sealer_for(identity)
        report = ReindexTally(
            key_id=None if begin and dry_run else sealer.index_keys.current.key_id,
            dry_run=dry_run,
            rotated=begin and not dry_run,
        )
        for _ in range(MAX_ROUNDS):
            scan = ReindexScan(sealer, rotating=begin and dry_run)
            self._scan(scan)
            report.current = scan.current
            if dry_run or not scan.todo:
                report.rewritten = len(scan.todo) if dry_run else report.rewritten
                break
            for index, key in enumerate(scan.todo):
                if max_rows is not None and report.rewritten >= max_rows:
                    report.remaining = len(scan.todo) - index
                    return report
                self._move(sealer, scan, key, report)
            if report.refused:
                return report
        else:
            report.remaining = len(scan.todo)
            return report
        if not dry_run:
            self._drop_old(sealer, report)
        return report

    def _scan(self, scan: ReindexScan) -> None:
        try:
            for row in self._rows(None):
                scan.see(row)
        except ValueError as exc:
            if isinstance(exc, SecureSerdeError):
                raise
            raise unenumerable_store(self.inner) from None

    def _drop_old(self, sealer: Sealer, report: ReindexTally) -> None:
        """Every row is under the current key: the older keys leave the identity."""
        old = [g.key_id for g in sealer.index_keys.generations[1:]]
        if old:
            found = self._identity_row()
            held = open_identity(found, self._encrypting).index_keys.generations
            if [g.key_id for g in held] != [g.key_id for g in sealer.index_keys.generations]:
                raise concurrent()
            self.inner.put(*drop_put(found, self._encrypting), {})
            fresh = self._identity_row()
            self._sealer = self._sealer_for(open_identity(fresh, self._encrypting))
            report.dropped = tuple(old)
        report.complete = True

    def _move(
        self, sealer: Sealer, scan: ReindexScan, key: tuple[str, str, str], report: ReindexTally
    ) -> None:
        try:
            found = self._read(row_config(key))
            if found is None or scan.is_current(found):
                return
            opened = sealer.open(found, channels=(), retoken=True)
        except SecureSerdeError as exc:
            report.refuse(key, type(exc))
            return
        put_args = resealed(sealer, found, opened, detached=opened.detached)
        self.inner.put(*put_args, new_versions_of(put_args[1]))
        report.rewritten += 1


# ---- the variants __new__ picks: module-level, so each is one fixed class ---------------


class _WithPrune(SealedSaver):
    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._prune(thread_ids, strategy)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._aprune(thread_ids, strategy)


class _WithDeleteForRuns(SealedSaver):
    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._delete_for_runs(run_ids)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._adelete_for_runs(run_ids)


class _WithBoth(_WithPrune, _WithDeleteForRuns):
    pass


# The per-tenant routing saver (sealing/_tenant_saver.py) subclasses SealedSaver,
# so it registers its class picker here when imported (sealing/__init__ imports
# it) instead of being imported from here: no import circle.
_TENANT_VARIANT: list[Callable[[BaseCheckpointSaver[Any]], type[SealedSaver]]] = []


def register_tenant_variant(pick: Callable[[BaseCheckpointSaver[Any]], type[SealedSaver]]) -> None:
    _TENANT_VARIANT[:] = [pick]


_VARIANTS: Final[dict[tuple[bool, bool], type[SealedSaver]]] = {
    (False, False): SealedSaver,
    (True, False): _WithPrune,
    (False, True): _WithDeleteForRuns,
    (True, True): _WithBoth,
}
for _variant in (_WithPrune, _WithDeleteForRuns, _WithBoth):
    _variant.__name__ = _variant.__qualname__ = "SealedSaver"


def _names(values: Iterable[str], option: str) -> frozenset[str]:
    if isinstance(values, str):
        raise ConfigurationError(f"{option} takes a list of key names, not one string")
    names = frozenset(values)
    for name in names:
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"{option} holds {name!r}, which is not a key name")
    reserved = names & _RESERVED_KEYS
    if reserved:
        raise ConfigurationError(f"{option} may not name {sorted(reserved)}: reserved keys")
    return names
