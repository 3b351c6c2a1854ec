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
from collections.abc import Sequence
from multiprocessing.connection import Connection, wait
from typing import Any, Final

from secure_serde._engine import BatchDone
from secure_serde._errors import ConfigurationError, SecureSerdeError
from secure_serde._report import Tally
from secure_serde.ciphers import KmsEnvelopeCipher
from secure_serde.passes._engine import CellPlanner, rewrap_range
from secure_serde.stores import StoreError, ThreadRange, open_sealed, open_store

__all__ = ["rewrap_in_workers"]

_POLL_SECONDS: Final = 0.25
# Per worker, in shared memory: scanned, rewrapped, failures.
_SLOTS: Final = 3


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
    """Run one forked worker per range; return the merged tally.

    ``kms`` are the KMS ciphers among the planner's: each worker gives each
    a client of its own before its first call. ``on_batch`` sees the
    workers' counts summed, every poll.
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
