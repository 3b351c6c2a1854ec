"""`rewrap`: re-encrypt every value of a checkpoint store under the current primary key.

Its units are cells, applied by compare-and-swap (`CellApplier`), on the one
batch loop every pass runs (secure_serde/_engine.py: why a kill at any moment
loses nothing).
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Final, Protocol

from secure_serde._engine import BatchDone, UnitPlanner, reporter, run_batches
from secure_serde._errors import ConfigurationError, SecureSerdeError
from secure_serde._report import PassProgress, PassReport, Tally
from secure_serde._scrub import scrubbed
from secure_serde.ciphers import KmsEnvelopeCipher, TagAuthenticatingCipher
from secure_serde.passes._items import ItemsPlanner, open_items_at
from secure_serde.passes._plan import Planner
from secure_serde.passes._sealed import SealedPlanner
from secure_serde.sealing import TenantKeys
from secure_serde.serde import CompressedSerializer, EncryptedSerializer, Migration, StrictDecoder
from secure_serde.stores import (
    ALL_THREADS,
    DEFAULT_BATCH_SIZE,
    Cell,
    ItemsLayout,
    RowRef,
    Store,
    StoreError,
    Swap,
    ThreadRange,
    identity_item_ref,
    identity_ref,
    is_sealed_layout,
    open_layout,
    open_sealed,
    open_store,
    refuse_v03,
)

__all__ = ["CellApplier", "rewrap"]

Progress = Callable[[PassProgress], None]
_POLL_SECONDS: Final = 0.25  # how often the parent reads the workers' counts
_SLOTS: Final = 3  # per worker, in shared memory: scanned, rewrapped, failures


class CellPlanner(UnitPlanner[Cell], Protocol):
    """A planner over cells: `Planner` (a stock saver's store), `SealedPlanner`, `ItemsPlanner`."""

    primary: str  # the primary cipher's name (and key id), as the report names it


class CellApplier:
    """Compare-and-swap of cells, a batch per transaction (`Store.compare_and_swap`)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def apply(self, changes: Sequence[object]) -> Sequence[bool]:
        return self._store.compare_and_swap([c for c in changes if isinstance(c, Swap)])

    def reload(self, change: object) -> Cell | None:
        return self._store.reload(change.cell.ref) if isinstance(change, Swap) else None

    def ref(self, unit: Cell) -> RowRef:
        return unit.ref


def rewrap_range(  # noqa: PLR0913 - the range, its store and the options it runs with
    store: Store,
    planner: CellPlanner,
    thread_range: ThreadRange,
    *,
    batch_size: int,
    dry_run: bool,
    on_batch: BatchDone | None = None,
) -> Tally:
    tally = Tally()
    applier = CellApplier(store)
    for table in store.tables:
        batches = store.iter_batches(table, batch_size, thread_range)
        run_batches(batches, planner, applier, dry_run=dry_run, tally=tally, on_batch=on_batch)
    return tally


@scrubbed  # a DSN may hold a password: no error leaves it in a frame local
def rewrap(  # noqa: PLR0913 - public API: keyword-only options, each with a safe default
    store: Store | str | os.PathLike[str],
    cipher: TagAuthenticatingCipher | EncryptedSerializer,
    *,
    decrypt_only: Iterable[TagAuthenticatingCipher] = (),
    batch_size: int = DEFAULT_BATCH_SIZE,
    dry_run: bool = False,
    migration: Migration | None = None,
    verify: bool = False,
    compress: bool | CompressedSerializer = False,
    workers: int = 1,
    progress: Progress | None = None,
    tenant_keys: TenantKeys | None = None,
) -> PassReport:
    """Re-encrypt every serialized value in ``store`` under ``cipher``'s primary key.

    Each value is decrypted by the cipher its type tag names and sealed
    again by ``cipher``, bound to the same inner type tag; values are never
    deserialized. Rows already under the primary are skipped, so a rerun
    (after a crash, a kill or a failure) finishes the job and a second run
    writes nothing. Each batch is one transaction of compare-and-swap
    updates: a row the application changed meanwhile is re-read, never
    overwritten. See ``secure_serde/_engine.py`` for why a kill at any
    moment loses nothing.

    Args:
        store: a `Store`, a SQLite file path, or a ``postgresql://`` URL.
        cipher: the cipher new rows are written with (its primary key is the
            target), or an `EncryptedSerializer`, whose cipher and
            decrypt-only ciphers are used.
        decrypt_only: further ciphers that read old rows, picked by cipher
            name, as in `EncryptedSerializer`.
        batch_size: rows per page and per transaction.
        dry_run: read and decrypt, write nothing; the report counts what
            would be rewrapped and lists what would fail.
        migration: what unauthenticated rows may still be read
            (`secure_serde.Migration`): ``plaintext`` also encrypts rows
            that carry no cipher suffix (plaintext ``pickle`` rows are
            refused even then); ``legacy_pickle`` also rewraps ``pickle``
            rows of formats that do not authenticate their type tag
            (langgraph's built-in ``+aes``): rewrapping authenticates the
            tag, so only set it for a store nobody untrusted could write to.
            Every other value whose tag nothing authenticated is sealed only
            after the strict decoder accepted it (data types only; with an
            `EncryptedSerializer` as ``cipher``, its msgpack allowlist too);
            refused ones are listed as failures.
        verify: decrypt rows already under the primary too, so that a clean
            report means every row authenticates.
        compress: also compress each value (``True``, or a `CompressedSerializer`
            with the settings to use) as `CompressedSerializer` would write it,
            without deserializing it; rows already compressed are left alone.
        workers: for PostgreSQL, this many forked processes, each on one
            range of thread ids; 1 for SQLite. Each worker builds its own
            KMS client (`KmsEnvelopeCipher.renew_client`); a KMS cipher
            built on a client of the caller's raises `ConfigurationError`.
        progress: called with a `PassProgress` after each batch.
        tenant_keys: for a store written by ``SealedSaver(..., tenant_keys=...)``,
            its tenant key store (`secure_serde.TenantKeys`): the rows of its
            tenants are skipped and counted in ``report.skipped`` as
            ``"tenant-keyed"``, or ``"shredded"`` for shredded tenants and
            threads; their keys rotate with ``TenantKeys.rewrap``. Without it,
            a row under a tenant's thread id that does not open under the store
            keys is counted as ``"tenant-keyed"`` too (passes/_sealed.py).

    A database that also holds a `secure_serde.SealedStore`'s ``store``
    table (SQLite or PostgreSQL, with or without checkpoint tables) has its
    items rewrapped too, after the checkpoints, in one process
    (secure_serde/passes/_items.py): only each item's sealed entry changes,
    plaintext items are listed as failures and never sealed, and
    ``migration`` and ``compress`` do not apply to items.

    Returns a `PassReport` (``name`` ``"rewrap"``); its ``failures`` list unreadable rows by table
    and primary key (never their contents). Raises `ConfigurationError` for
    bad arguments and for a store secure_serde 0.3's savers wrote (naming
    ``secure-serde adopt``, before anything is written:
    `secure_serde.stores.refuse_v03`), and `secure_serde.stores.StoreError` when the store cannot
    be opened, read or written; batches committed before such an error stay
    committed, and a rerun continues from there.
    """
    _check_positive("batch_size", batch_size)
    _check_positive("workers", workers)
    # A tuple: the checkpoints' pass and the items' pass each read it (a generator once).
    decrypt_only = tuple(decrypt_only)
    if isinstance(cipher, EncryptedSerializer):
        serde, strict = cipher, cipher.strict_decoder
        decrypt_only = (*cipher.decrypt_ciphers, *decrypt_only)
    else:
        serde, strict = EncryptedSerializer(cipher, decrypt_only=decrypt_only), None
    run = _Run(
        serde.cipher,
        decrypt_only,
        serde,
        strict=strict,
        batch_size=batch_size,
        dry_run=dry_run,
        migration=migration,
        verify=verify,
        compress=CompressedSerializer() if compress is True else compress or None,
        workers=workers,
        progress=progress,
        tenant_keys=tenant_keys,
    )
    items = open_items_at(store)
    if items is None:
        tally, display, primary, used = _rewrap_tables(store, run)
    else:
        with items:
            tally, display, primary, used = _with_items(items, store, run)
    return tally.report(
        "rewrap",
        store=display,
        dry_run=dry_run,
        elapsed=time.monotonic() - run.started,
        details={"primary": primary, "workers": used},
    )


@dataclass(frozen=True)
class _Run:
    cipher: TagAuthenticatingCipher
    decrypt_only: tuple[TagAuthenticatingCipher, ...]
    serde: EncryptedSerializer  # probes for a store 0.3's savers wrote (`refuse_v03`)
    strict: StrictDecoder | None
    batch_size: int
    dry_run: bool
    migration: Migration | None
    verify: bool
    compress: CompressedSerializer | None
    workers: int
    progress: Progress | None
    tenant_keys: TenantKeys | None
    started: float = field(default_factory=time.monotonic)


# What a pass over one kind of table did: its counts, the store, the primary, the workers.
_Done = tuple[Tally, str, str, int]


def _with_items(items: ItemsLayout, store: Store | str | os.PathLike[str], run: _Run) -> _Done:
    if items.holds_checkpoints:
        tally, display, primary, used = _rewrap_tables(store, run)
    else:
        _sealed_only(run, f"{items.display} holds a SealedStore's items")
        _check_workers(run.workers, items.kind)
        tally, display, primary, used = Tally(), items.display, "", 1
    planner = ItemsPlanner(run.cipher, run.decrypt_only, seal=not run.dry_run, verify=run.verify)
    planner.identify(items.reload(identity_item_ref()))
    tally.merge(
        rewrap_range(items, planner, ALL_THREADS, batch_size=run.batch_size, dry_run=run.dry_run)
    )
    return tally, display, primary or planner.primary, used


def _rewrap_tables(store: Store | str | os.PathLike[str], run: _Run) -> _Done:
    chosen: CellPlanner = Planner(
        run.cipher,
        run.decrypt_only,
        migration=run.migration,
        strict=run.strict,
        seal=not run.dry_run,
        verify=run.verify,
        compress=run.compress,
    )
    opened = open_layout(store)
    owned = opened is not store  # a Store passed in stays open
    sealed = is_sealed_layout(opened)
    try:
        if sealed:
            chosen = _sealed_planner(opened, run)
        else:
            refuse_v03(opened, "rewrap", run.serde)
            if run.tenant_keys is not None:
                raise ConfigurationError(
                    f"{opened.display} is not sealed by SealedSaver: tenant_keys= applies to a"
                    " store SealedSaver(..., tenant_keys=...) wrote"
                )
        _check_workers(run.workers, opened.kind)
        total = opened.count_all() if run.progress is not None else 0
        on_batch = reporter(run.progress, total, run.started)
        ranges = opened.thread_ranges(run.workers) if run.workers > 1 else [ALL_THREADS]
        display, size, dry_run = opened.display, run.batch_size, run.dry_run
        if len(ranges) == 1:
            tally = rewrap_range(
                opened, chosen, ALL_THREADS, batch_size=size, dry_run=dry_run, on_batch=on_batch
            )
        else:
            ciphers = dict.fromkeys((run.cipher, *run.decrypt_only))
            kms = tuple(c for c in ciphers if isinstance(c, KmsEnvelopeCipher))
            _check_forkable(kms)
            location = opened.location
            if owned:
                # A forked child must not inherit a live connection's socket.
                opened.close()
                owned = False
            tally = rewrap_in_workers(
                location, chosen, ranges, size, dry_run, on_batch, kms=kms, sealed=sealed
            )
    finally:
        if owned:
            opened.close()
    return tally, display, chosen.primary, len(ranges)


def _sealed_only(run: _Run, what: str) -> None:
    if run.migration is not None and run.migration.enabled():
        raise ConfigurationError(
            f"{what}: rewrap re-encrypts its sealed cells only, and never seals a row that was"
            " not sealed (drop the migration switches)"
        )
    if run.compress is not None:
        raise ConfigurationError(
            f"{what}: its cells are compressed (or not) by the serializer that writes them;"
            " rewrap does not change that (drop compress)"
        )


def _sealed_planner(store: Store, run: _Run) -> SealedPlanner:
    _sealed_only(run, f"{store.display} is sealed by SealedSaver")
    planner = SealedPlanner(run.cipher, run.decrypt_only, seal=not run.dry_run, verify=run.verify)
    planner.identify(store.reload(identity_ref()))
    if run.tenant_keys is not None:
        planner.use_tenant_keys(run.tenant_keys)
    return planner


def _check_workers(workers: int, kind: str) -> None:
    if workers > 1 and kind != "postgres":
        raise ConfigurationError(
            f"workers > 1 applies to PostgreSQL stores only; {kind} has one writer"
        )


def _check_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")


def _check_forkable(kms: tuple[KmsEnvelopeCipher, ...]) -> None:
    # Checked before any worker starts, so nothing is written; the workers
    # themselves each call renew_client first.
    for cipher in kms:
        if not cipher.owns_client:
            raise ConfigurationError(
                f"workers > 1 with {cipher!r}, which uses a KMS client passed in: forked"
                " workers must not share one. Build the cipher with client=None so that"
                " each worker builds its own, or use workers=1"
            )


def rewrap_in_workers(  # noqa: C901, PLR0913 - fork, run, reap in one place; explicit inputs
    location: str,
    planner: CellPlanner,
    ranges: Sequence[ThreadRange],
    batch_size: int,
    dry_run: bool,
    on_batch: BatchDone | None,
    *,
    kms: tuple[KmsEnvelopeCipher, ...] = (),
    sealed: bool = False,
) -> Tally:
    """Rewrap with one forked worker per range of thread ids (PostgreSQL); the merged tally.

    PostgreSQL picks the ranges (`Store.thread_ranges`, row percentiles of
    ``thread_id``): they never overlap, each worker has its own connection
    and transactions, and the compare-and-swap makes even an overlap
    harmless. Each worker walks its range once and sends its tally through a
    pipe; ``on_batch`` sees the workers' counts summed, every poll. Forked
    workers inherit the ciphers in memory (key material is never pickled or
    sent) and give each KMS cipher in ``kms`` a client of its own.
    """
    if "fork" not in multiprocessing.get_all_start_methods():
        raise ConfigurationError(
            "workers > 1 needs the fork start method, which this platform lacks"
        )
    ctx = multiprocessing.get_context("fork")
    counters = ctx.Array("q", _SLOTS * len(ranges), lock=False)

    def work(index: int, thread_range: ThreadRange, conn: Connection) -> None:
        # Forked, not spawned: this closure and what it holds are never pickled.
        def counted(tally: Tally) -> None:
            done = [tally.scanned, tally.changed, tally.failure_count]
            counters[index * _SLOTS : (index + 1) * _SLOTS] = done

        try:
            # A boto3 client's pooled sockets came across the fork: build new ones.
            for cipher in kms:
                cipher.renew_client()
            # The same layout the parent found: a sealed store never opens as a stock one.
            with open_sealed(location) if sealed else open_store(location) as store:
                tally = rewrap_range(
                    store,
                    planner,
                    thread_range,
                    batch_size=batch_size,
                    dry_run=dry_run,
                    on_batch=counted,
                )
            conn.send(("ok", tally))
        except SecureSerdeError as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
        except KeyboardInterrupt:
            # Ctrl-C reaches the whole process group; the parent reports it once.
            conn.send(("error", "interrupted"))
        finally:
            conn.close()

    running: dict[Connection, tuple[int, Any]] = {}
    for index, thread_range in enumerate(ranges):
        receiver, sender = ctx.Pipe(duplex=False)
        name = f"secure-serde-rewrap-{index}"
        process = ctx.Process(
            target=work, args=(index, thread_range, sender), name=name, daemon=True
        )
        process.start()
        sender.close()
        running[receiver] = (index, process)
    results: dict[int, tuple[str, Any]] = {}
    try:
        while running:
            for ready in wait(list(running), timeout=_POLL_SECONDS):
                if not isinstance(ready, Connection):
                    continue
                index, process = running.pop(ready)
                try:
                    results[index] = ready.recv()
                except EOFError:
                    process.join()
                    results[index] = ("error", f"exited with code {process.exitcode}")
                ready.close()
            if on_batch is not None:
                values = list(counters)
                scanned, changed = sum(values[0::_SLOTS]), sum(values[1::_SLOTS])
                on_batch(Tally(scanned, changed, failure_count=sum(values[2::_SLOTS])))
    finally:
        for _, process in running.values():
            process.terminate()
        for _, process in running.values():
            process.join()
    merged = Tally()
    errors = []
    for index in sorted(results):
        status, payload = results[index]
        if status == "ok" and isinstance(payload, Tally):
            merged.merge(payload)
        else:
            errors.append(f"worker {index} (thread ids {ranges[index]}): {payload}")
    if errors:
        raise StoreError(
            "; ".join(errors) + ". The other workers' batches are committed: rerun to finish"
        )
    return merged
