"""``secure-serde audit`` on a store `SealedSaver` sealed: every row opened, as the app reads it.

The store is opened with the same thin constructor the application uses
(`secure_serde.savers.postgres.PostgresSaver` or `...sqlite.SqliteSaver`,
both `SealedSaver` around the stock saver), under the keys from the
environment. Prints counts, ids and error class names only. Exit codes as
for the 0.3 layout: 0 clean, 1 findings (a row that does not open, a cut
history, a cell not under the primary key), 2 usage, configuration or store
error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Final, TextIO

from secure_serde import ConfigurationError, EncryptedSerializer
from secure_serde.cli._pretty import for_terminal
from secure_serde.config import serializer_from_env
from secure_serde.sealing import SealedAuditReport, SealedSaver, audit_sealed
from secure_serde.stores import store_thread_ids

__all__ = ["run_sealed"]

_CLEAN: Final = 0
_FINDINGS: Final = 1
_POSTGRES: Final = ("postgresql://", "postgres://")


@contextmanager
def _saver(location: str, serde: EncryptedSerializer) -> Iterator[SealedSaver]:
    if location.startswith(_POSTGRES):
        from secure_serde.savers.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(location, serde=serde) as saver:
            yield saver
    else:
        from secure_serde.savers.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(location, serde=serde) as saver:
            yield saver


def run_sealed(args: argparse.Namespace, display: str) -> int:
    if args.no_decrypt:
        raise ConfigurationError(
            f"{display} is sealed by SealedSaver: its rows are checked by opening them, which"
            " needs the keys (drop --no-decrypt)"
        )
    threads = store_thread_ids(args.store)
    with _saver(args.store, serializer_from_env()) as saver:
        report = audit_sealed(saver, thread_ids=threads)
    code = _CLEAN if report.clean else _FINDINGS
    if args.json:
        json.dump(report_json(report, display, code), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print(report, display, sys.stdout, args.max_listed)
    return code


def report_json(report: SealedAuditReport, display: str, code: int) -> dict[str, Any]:
    return {
        "store": display,
        "layout": "sealed",
        "exit_code": code,
        "threads": report.threads,
        "checkpoints": report.checkpoints,
        "records": report.records,
        "values": report.values,
        "writes": report.writes,
        "under_primary": report.under_primary,
        "not_under_primary": report.not_under_primary,
        "findings": [
            {
                "thread_id": f.thread_id,
                "checkpoint_ns": f.checkpoint_ns,
                "checkpoint_id": f.checkpoint_id,
                "error": f.error,
            }
            for f in report.findings
        ],
    }


def _print(report: SealedAuditReport, display: str, out: TextIO, max_listed: int) -> None:
    cells = report.under_primary + report.not_under_primary
    out.write(f"store: {for_terminal(display)} (sealed by SealedSaver)\n")
    out.write(
        f"  {report.threads:,} threads, {report.checkpoints:,} checkpoints:"
        f" {report.records:,} records, {report.values:,} values, {report.writes:,} writes\n"
    )
    out.write(f"  under the primary key: {report.under_primary:,} of {cells:,} cells\n")
    if report.not_under_primary:
        out.write(
            f"  {report.not_under_primary:,} cells are under older keys: run `secure-serde"
            " rewrap` before retiring them (docs/rotation.md)\n"
        )
    if not report.findings:
        out.write("  every checkpoint opens, and every history reaches its root\n")
        return
    out.write(f"  {len(report.findings):,} checkpoints do not open:\n")
    for finding in report.findings[:max_listed]:
        out.write(
            f"    {finding.error}: thread {for_terminal(finding.thread_id)!s}"
            f" ns {for_terminal(finding.checkpoint_ns)!s} checkpoint"
            f" {for_terminal(finding.checkpoint_id)!s}\n"
        )
    if len(report.findings) > max_listed:
        out.write(f"    ... and {len(report.findings) - max_listed:,} more (--json lists all)\n")
