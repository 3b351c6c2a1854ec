"""``secure-serde rewrap --bind``: bind a stock or 0.1 store's rows in place, then rewrap.

The binding pass (`secure_serde.savers.bind_postgres` / `bind_sqlite`) runs
on a sealed saver opened on the store with the environment's keys. With
``--seal-metadata`` the store kind's metadata resealer runs after it, on a
saver whose sealing policy is the one the flags describe: it seals every
plaintext metadata key outside ``--plaintext-metadata`` (and the structural
keys), and binds 0.1 envelopes to their rows. `RESEALERS` maps each store
kind to its resealer; a kind missing from it refuses ``--seal-metadata``
before anything is written.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Final, TextIO

from secure_serde import ConfigurationError, EncryptedSerializer, Migration
from secure_serde.cli._pretty import for_terminal
from secure_serde.config import ConfiguredCiphers
from secure_serde.savers import BindReport, bind_postgres, bind_sqlite
from secure_serde.stores import StoreError, open_store

__all__ = [
    "RESEALERS",
    "BindOutcome",
    "Resealed",
    "add_arguments",
    "bind_store",
    "check_options",
    "print_outcome",
]

_LISTED: Final = 20


@dataclass(frozen=True)
class Resealed:
    """What a metadata resealer did, in the CLI's words."""

    rewritten: int
    current: int
    raced: int
    refused: tuple[str, ...]


def _resealed(report: Any) -> Resealed:
    """A `ResealReport` (any store's) in the CLI's words."""
    return Resealed(
        report.rewritten,
        report.current,
        report.raced,
        tuple(f"checkpoints {row!r}: {error}" for row, error in report.failed),
    )


def _reseal_postgres(saver: Any, batch_size: int, dry_run: bool) -> Resealed:
    from secure_serde.savers import reseal_postgres_metadata

    return _resealed(reseal_postgres_metadata(saver, batch_size=batch_size, dry_run=dry_run))


def _reseal_sqlite(saver: Any, batch_size: int, dry_run: bool) -> Resealed:
    from secure_serde.savers import reseal_sqlite_metadata

    return _resealed(reseal_sqlite_metadata(saver, batch_size=batch_size, dry_run=dry_run))


# Store kind -> the pass that brings its stored metadata up to the sealing
# policy, run on the same sealed saver as the binding pass; each takes the
# saver, the batch size and whether this is a dry run.
RESEALERS: Final[Mapping[str, Callable[[Any, int, bool], Resealed]]] = {
    "postgres": _reseal_postgres,
    "sqlite": _reseal_sqlite,
}


@dataclass(frozen=True)
class BindOutcome:
    """The binding pass's report and, with ``--seal-metadata``, the resealer's."""

    bound: BindReport
    resealed: Resealed | None

    @property
    def ok(self) -> bool:
        return self.bound.ok and (self.resealed is None or not self.resealed.refused)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bind",
        action="store_true",
        help=(
            "first bind every row a stock saver or secure_serde 0.1 wrote to where it lives"
            " (values, pending writes, checkpoint records; PostgreSQL's inline channel"
            " values move to bound blobs), so the sealed savers read the store with no"
            " migration switch"
        ),
    )
    parser.add_argument(
        "--seal-metadata",
        action="store_true",
        help=(
            "with --bind: also seal plaintext metadata keys and bind 0.1 sealed metadata to"
            " its row, as the sealed savers do by default"
        ),
    )
    parser.add_argument(
        "--plaintext-metadata",
        action="append",
        default=[],
        metavar="KEY",
        help="with --seal-metadata: a metadata key to keep in plaintext (repeatable)",
    )
    parser.add_argument(
        "--indexed-metadata",
        action="append",
        default=[],
        metavar="KEY",
        help="with --seal-metadata: a sealed key list(filter=...) matches by blind index",
    )


def check_options(args: argparse.Namespace) -> None:
    """Refuse flag combinations that mean nothing, before the store is opened."""
    if not args.bind and (args.seal_metadata or args.plaintext_metadata or args.indexed_metadata):
        raise ConfigurationError("--seal-metadata and its options need --bind")
    if not args.seal_metadata and (args.plaintext_metadata or args.indexed_metadata):
        raise ConfigurationError("--plaintext-metadata and --indexed-metadata need --seal-metadata")


def _check_kind(args: argparse.Namespace, kind: str) -> None:
    if args.seal_metadata and kind not in RESEALERS:
        raise ConfigurationError(f"--seal-metadata is not supported on {kind} stores yet")


@contextmanager
def _sealed_saver(
    kind: str, location: str, serde: EncryptedSerializer, args: argparse.Namespace
) -> Iterator[Any]:
    # Reading what the resealer rewrites: plaintext keys, and 0.1 envelopes.
    migration = Migration(plaintext_metadata=True, unbound=True)
    policy: dict[str, Any] = {
        "seal_metadata": args.seal_metadata,
        "plaintext_metadata": args.plaintext_metadata or None,
        "indexed_metadata": args.indexed_metadata or None,
    }
    if kind == "postgres":
        from secure_serde.savers import V03PostgresSaver as PostgresSaver

        with PostgresSaver.from_conn_string(
            location, serde=serde, migration=migration, **policy
        ) as saver:
            yield saver
        return
    from secure_serde.savers import V03SqliteSaver as SqliteSaver

    with SqliteSaver.from_conn_string(
        location, serde=serde, migration=migration, **policy
    ) as saver:
        yield saver


def bind_store(
    args: argparse.Namespace, configured: ConfiguredCiphers, migration: Migration
) -> BindOutcome:
    """Run the binding pass (and the resealer) on ``args.store``; nothing printed."""
    with open_store(args.store) as store:
        kind, location, display = store.kind, store.location, store.display
    _check_kind(args, kind)
    serde = EncryptedSerializer(
        configured.primary, decrypt_only=configured.decrypt_only, migration=migration
    )
    opened: AbstractContextManager[Any] = _sealed_saver(kind, location, serde, args)
    try:
        with opened as saver:
            binder = bind_postgres if kind == "postgres" else bind_sqlite
            bound = binder(
                saver, migration=migration, batch_size=args.batch_size, dry_run=args.dry_run
            )
            resealed = (
                RESEALERS[kind](saver, args.batch_size, args.dry_run)
                if args.seal_metadata
                else None
            )
    except _driver_errors(kind) as exc:
        # Named by class only: a driver's message may quote the connection string.
        raise StoreError(f"binding {display} failed: {type(exc).__name__}") from None
    return BindOutcome(bound, resealed)


def _driver_errors(kind: str) -> tuple[type[Exception], ...]:
    if kind == "postgres":
        import psycopg

        return (psycopg.Error,)
    import sqlite3

    return (sqlite3.Error,)


def print_outcome(outcome: BindOutcome, out: TextIO) -> None:
    report = outcome.bound
    verb = "would bind" if report.dry_run else "bound"
    print(
        f"bind: {verb} {report.checkpoints_sealed:,} checkpoint record(s),"
        f" {report.blobs_bound:,} blob(s), {report.writes_bound:,} write(s);"
        f" moved {report.inline_values_moved:,} inline value(s);"
        f" already bound {report.already_bound:,}, refused {report.refused:,},"
        f" changed meanwhile {report.raced:,} (rerun to bind them)",
        file=out,
    )
    _list("rows that could not be bound", report.refusals, report.refused, out)
    resealed = outcome.resealed
    if resealed is not None:
        verb = "would reseal" if report.dry_run else "resealed"
        print(
            f"metadata: {verb} {resealed.rewritten:,}, already current {resealed.current:,},"
            f" changed meanwhile {resealed.raced:,}, refused {len(resealed.refused):,}",
            file=out,
        )
        _list("metadata that could not be resealed", resealed.refused, len(resealed.refused), out)


def _list(title: str, lines: tuple[str, ...], total: int, out: TextIO) -> None:
    if not lines:
        return
    print(f"{title}:", file=out)
    for line in lines[:_LISTED]:
        print(f"  {for_terminal(line)}", file=out)
    if total > _LISTED:
        print(f"  ... and {total - _LISTED:,} more", file=out)
