"""Rewrap split across worker processes, one per range of thread ids (PostgreSQL).

PostgreSQL picks the ranges (`Store.thread_ranges`, row percentiles of
``thread_id``) and keeps the workers apart: ranges never overlap, each
worker has its own connection and transactions, and the compare-and-swap
makes even an overlap harmless. There is no queue and no scheduler: each
worker walks its range once and reports its tally through a pipe.

Workers are forked, so they inherit the ciphers in memory: key material is
never pickled or sent anywhere. Each opens its own connection from
`Store.location`, and builds its own KMS client for each KMS cipher (a
forked child must not touch its parent's sockets).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any, Final

from secure_serde._errors import ConfigurationError, SecureSerdeError
from secure_serde._report import PassProgress, Tally
from secure_serde.ciphers import KmsEnvelopeCipher
from secure_serde.passes._engine import CellPlanner, rewrap_range
from secure_serde.stores import StoreError, ThreadRange, open_sealed, open_store

__all__ = ["rewrap_in_workers"]

_POLL_SECONDS: Final = 0.25
# Per worker, in shared memory: scanned, rewrapped, failures.
_SLOTS: Final = 3


def _fork_context() -> Any:
    if "fork" not in multiprocessing.get_all_start_methods():
        raise ConfigurationError(
            "workers > 1 needs the fork start method, which this platform lacks"
        )
    return multiprocessing.get_context("fork")


def _worker(  # noqa: PLR0913 - what each forked worker needs, passed explicitly
    location: str,
    planner: CellPlanner,
    thread_range: ThreadRange,
    batch_size: int,
    dry_run: bool,
    counters: Any,
    index: int,
    conn: Connection,
    kms: tuple[KmsEnvelopeCipher, ...],
    sealed: bool,
) -> None:
    def on_batch(tally: Tally) -> None:
        base = index * _SLOTS
        counters[base] = tally.scanned
        counters[base + 1] = tally.changed
        counters[base + 2] = tally.failure_count

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
                on_batch=on_batch,
            )
        conn.send(("ok", tally))
    except SecureSerdeError as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    except KeyboardInterrupt:
        # Ctrl-C reaches the whole process group; the parent reports it once.
        conn.send(("error", "interrupted"))
    finally:
        conn.close()


def rewrap_in_workers(  # noqa: C901, PLR0913 - fork, run, reap in one place; explicit inputs
    location: str,
    planner: CellPlanner,
    ranges: Sequence[ThreadRange],
    *,
    batch_size: int,
    dry_run: bool,
    total: int,
    started: float,
    progress: Callable[[PassProgress], None] | None,
    kms: tuple[KmsEnvelopeCipher, ...] = (),
    sealed: bool = False,
) -> Tally:
    """Run one forked worker per range; return the merged tally.

    ``kms`` are the KMS ciphers among the planner's: each worker gives each
    a client of its own before its first call.
    """
    ctx = _fork_context()
    counters = ctx.Array("q", _SLOTS * len(ranges), lock=False)
    running: dict[Connection, tuple[int, Any]] = {}
    for index, thread_range in enumerate(ranges):
        receiver, sender = ctx.Pipe(duplex=False)
        process = ctx.Process(
            target=_worker,
            args=(
                location,
                planner,
                thread_range,
                batch_size,
                dry_run,
                counters,
                index,
                sender,
                kms,
                sealed,
            ),
            name=f"secure-serde-rewrap-{index}",
            daemon=True,
        )
        process.start()
        sender.close()
        running[receiver] = (index, process)
    results: dict[int, tuple[str, Any]] = {}
    try:
        while running:
            for receiver in wait(list(running), timeout=_POLL_SECONDS):
                if not isinstance(receiver, Connection):
                    continue
                index, process = running.pop(receiver)
                try:
                    results[index] = receiver.recv()
                except EOFError:
                    process.join()
                    results[index] = ("error", f"exited with code {process.exitcode}")
                receiver.close()
            if progress is not None:
                values = list(counters)
                progress(
                    PassProgress(
                        scanned=sum(values[0::_SLOTS]),
                        total=total,
                        rewrapped=sum(values[1::_SLOTS]),
                        failures=sum(values[2::_SLOTS]),
                        elapsed=time.monotonic() - started,
                    )
                )
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
