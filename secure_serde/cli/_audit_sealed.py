"""``secure-serde audit`` on a store `SealedSaver` sealed: every row opened, as the app reads it.

The store is opened with the same thin constructor the application uses (`open_sealed`), under
the keys from the environment. Prints counts, ids and error class names only. Exit codes as for
the 0.3 layout: 0 clean, 1 findings (a row that does not open, a cut history, a cell not under
the primary key), 2 usage, configuration or store error. ``--tenant-keys``: docs/tenants.md
(shredded rows are erased on purpose, so they alone never make the exit code 1).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final, TextIO

from secure_serde import ConfigurationError, EncryptedSerializer, TenantKeys
from secure_serde.cli._fixes import row_error_fixes
from secure_serde.cli._inspect_read import open_sealed
from secure_serde.cli._pretty import capped, command, for_terminal
from secure_serde.config import serializer_from_env
from secure_serde.sealing import (
    SealedAuditReport,
    SealedStore,
    StoreAuditReport,
    audit_sealed,
    audit_store_items,
)
from secure_serde.stores import sealed_items_at, store_thread_ids

__all__ = ["run_sealed"]

_CLEAN: Final = 0
_FINDINGS: Final = 1
_POSTGRES: Final = ("postgresql://", "postgres://")
# A checkpoint's place: the first keys of each row that --json lists.
_WHERE: Final = ("thread_id", "checkpoint_ns", "checkpoint_id")
_CELLS: Final = ("under_primary", "not_under_primary")


def run_sealed(args: argparse.Namespace, display: str) -> int:
    if args.no_decrypt:
        raise ConfigurationError(
            f"{display} is sealed by SealedSaver: its rows are checked by opening them, which"
            " needs the keys (drop --no-decrypt)"
        )
    # SealedStore items (issue 26): a database with only a store table (False), or with both
    # kinds of tables (True: one application, one database); see the block below.
    items_too = sealed_items_at(args.store)
    serde = serializer_from_env()
    report = None if items_too is False else _audit_checkpoints(args, serde)
    items: StoreAuditReport | None = None
    if items_too is not None:
        with _sealed_store(args.store, serde) as store:
            items = audit_store_items(store)
    code = _CLEAN if all(r.clean for r in (report, items) if r is not None) else _FINDINGS
    if args.json:
        document = {} if report is None else report_json(report, display, code)
        if items is not None:
            listed = store_items_json(items, display, code)
            document = listed if report is None else {**document, "items": listed}
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        if report is not None:
            _print(report, display, sys.stdout, args.max_listed)
        if items is not None:
            _print_items(items, display, sys.stdout, args.max_listed)
    return code


def _audit_checkpoints(args: argparse.Namespace, serde: EncryptedSerializer) -> SealedAuditReport:
    keys = None if args.tenant_keys is None else TenantKeys.open(args.tenant_keys)
    try:
        threads = store_thread_ids(args.store)
        with open_sealed(args.store, serde) as saver:
            return audit_sealed(saver, thread_ids=threads, tenant_keys=keys)
    finally:
        if keys is not None:
            keys.close()


def report_json(report: SealedAuditReport, display: str, code: int) -> dict[str, Any]:
    return {
        "store": display,
        "layout": "sealed",
        "exit_code": code,
        **_fields(report, "threads", "checkpoints", "records", "values", "writes", *_CELLS),
        **_fields(report, "tenant_checkpoints", "tenant_cells", "shredded", "finding_count"),
        "shredded_rows": [
            _fields(row, *_WHERE, "tenant_id", "status") for row in report.shredded_rows
        ],
        "findings": [_fields(f, *_WHERE, "error") for f in report.findings],
        "fixes": (
            _older_keys_fix(report.not_under_primary, display)
            + _checkpoint_row_fixes(report, display)
        ),
    }


def _fields(row: object, *names: str) -> dict[str, Any]:
    return {name: getattr(row, name) for name in names}


def _print(report: SealedAuditReport, display: str, out: TextIO, max_listed: int) -> None:
    cells = report.under_primary + report.not_under_primary
    out.write(f"store: {for_terminal(display)} (sealed by SealedSaver)\n")
    out.write(
        f"  {report.threads:,} threads, {report.checkpoints:,} checkpoints:"
        f" {report.records:,} records, {report.values:,} values, {report.writes:,} writes\n"
    )
    out.write(f"  under the primary key: {report.under_primary:,} of {cells:,} cells\n")
    if report.tenant_checkpoints:
        out.write(
            f"  {report.tenant_checkpoints:,} checkpoints of tenants, opened with their keys"
            f" ({report.tenant_cells:,} cells under thread keys: `TenantKeys.rewrap` rotates"
            " those keys)\n"
        )
    if report.shredded:
        out.write(
            f"  {report.shredded:,} checkpoints of shredded tenants or threads: erased on"
            " purpose, not findings\n"
        )
        rows = [
            f"shredded: thread {row.thread_id} ns {row.checkpoint_ns} checkpoint"
            f" {row.checkpoint_id}"
            for row in report.shredded_rows
        ]
        _write_rows(out, rows, report.shredded, max_listed)
    _write_older_keys(out, report.not_under_primary, display, "docs/rotation.md")
    if not report.findings:
        out.write("  every checkpoint opens, and every history reaches its root\n")
        return
    out.write(f"  {report.finding_count:,} checkpoints do not open:\n")
    rows = [
        f"{finding.error}: thread {finding.thread_id} ns {finding.checkpoint_ns} checkpoint"
        f" {finding.checkpoint_id}"
        for finding in report.findings
    ]
    _write_rows(out, rows, report.finding_count, max_listed, _checkpoint_row_fixes(report, display))


# ---------------------------------------------------------------------------------------------
# SealedStore items (issue 26): a database holding only a SealedStore's ``store`` table,
# audited by secure_serde/sealing/_store_audit.py (every item opened through SealedStore).


@contextmanager
def _sealed_store(location: str, serde: EncryptedSerializer) -> Iterator[SealedStore]:
    if location.startswith(_POSTGRES):
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(location) as pg:
            yield SealedStore(pg, serde=serde)
    else:
        import sqlite3

        from langgraph.store.sqlite import SqliteStore

        conn = sqlite3.connect(location, check_same_thread=False, isolation_level=None)
        try:
            yield SealedStore(SqliteStore(conn), serde=serde)
        finally:
            conn.close()


def store_items_json(report: StoreAuditReport, display: str, code: int) -> dict[str, Any]:
    return {
        "store": display,
        "layout": "sealed_store",
        "exit_code": code,
        **_fields(report, "items", *_CELLS, "finding_count"),
        "findings": [
            {"namespace": list(f.namespace), "key": f.key, "error": f.error}
            for f in report.findings
        ],
        "fixes": (
            _older_keys_fix(report.not_under_primary, display) + _item_row_fixes(report, display)
        ),
    }


def _print_items(report: StoreAuditReport, display: str, out: TextIO, max_listed: int) -> None:
    cells = report.under_primary + report.not_under_primary
    out.write(f"store: {for_terminal(display)} (items sealed by SealedStore)\n")
    out.write(f"  {report.items:,} items; under the primary key: {report.under_primary:,}")
    out.write(f" of {cells:,} cells (the store identity's included)\n")
    _write_older_keys(out, report.not_under_primary, display, "docs/store.md")
    if not report.findings:
        out.write("  every item opens at its location\n")
        return
    out.write(f"  {report.finding_count:,} items do not open:\n")
    rows = [
        f"{finding.error}: namespace {'.'.join(finding.namespace)} key {finding.key}"
        for finding in report.findings
    ]
    _write_rows(out, rows, report.finding_count, max_listed, _item_row_fixes(report, display))


def _write_rows(
    out: TextIO, rows: list[str], total: int, max_listed: int, fixes: Sequence[str] = ()
) -> None:
    for line in capped(rows, total, limit=max_listed, indent="    ") + [f"    {f}" for f in fixes]:
        out.write(line + "\n")


def _write_older_keys(out: TextIO, not_under_primary: int, display: str, doc: str) -> None:
    if not_under_primary:
        out.write(
            f"  {not_under_primary:,} cells are under older keys, to move before retiring them"
            f" ({doc})\n    fix: {command('rewrap', display)}\n"
        )


def _older_keys_fix(not_under_primary: int, display: str) -> list[str]:
    if not not_under_primary:
        return []
    return [f"fix (cells under older keys): {command('rewrap', display)}"]


def _checkpoint_row_fixes(report: SealedAuditReport, display: str) -> list[str]:
    if not report.findings:
        return []
    first = report.findings[0]
    namespace = ["--ns", first.checkpoint_ns] if first.checkpoint_ns else []
    look = command("inspect", display, "--thread", first.thread_id, *namespace)
    errors = {f.error for f in report.findings}
    return row_error_fixes(errors, display, rerun=command("audit", display), look=look)


def _item_row_fixes(report: StoreAuditReport, display: str) -> list[str]:
    errors = {f.error for f in report.findings}
    return row_error_fixes(errors, display, rerun=command("audit", display))
