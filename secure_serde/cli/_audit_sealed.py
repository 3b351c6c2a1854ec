"""``secure-serde audit`` on a store `SealedSaver` sealed: every row opened, as the app reads it.

Through the application's own saver (`open_sealed`) and keys; a SealedStore's ``store`` table
through `SealedStore`, in its own database or beside the checkpoints (then ``--json`` nests it
under ``items``). Counts, ids and error class names only. Exit code 1 for a row that does not
open, a cut history or a cell not under the primary key; shredded rows (docs/tenants.md) are
erased on purpose, so they alone never make it 1.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

from secure_serde import ConfigurationError, EncryptedSerializer, TenantKeys
from secure_serde.cli._fixes import row_error_fixes
from secure_serde.cli._inspect_read import open_sealed
from secure_serde.cli._pretty import capped, command, print_document
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
# A checkpoint's place: the first keys of each row that --json lists.
_WHERE: Final = ("thread_id", "checkpoint_ns", "checkpoint_id")
_CELLS: Final = ("under_primary", "not_under_primary")


def run_sealed(args: argparse.Namespace, display: str) -> int:
    if args.no_decrypt:
        raise ConfigurationError(
            f"{display} is sealed by SealedSaver: its rows are checked by opening them, which"
            " needs the keys (drop --no-decrypt)"
        )
    # A database with only a SealedStore table (False), or with both kinds of tables (True).
    items_too = sealed_items_at(args.store)
    serde = serializer_from_env()
    reports: list[SealedAuditReport | StoreAuditReport] = []
    if items_too is not False:
        reports.append(_audit_checkpoints(args, serde))
    if items_too is not None:
        with _sealed_store(args.store, serde) as store:
            reports.append(audit_store_items(store))
    code = _CLEAN if all(r.clean for r in reports) else _FINDINGS
    first, *items = documents = [_document(report, display, code) for report in reports]
    print_document(
        {**first, "items": items[0]} if items else first,
        args.json,
        lambda: [line for doc in documents for line in _print(doc, args.max_listed)],
    )
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


@contextmanager
def _sealed_store(location: str, serde: EncryptedSerializer) -> Iterator[SealedStore]:
    if location.startswith(("postgresql://", "postgres://")):
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


def _fields(row: object, *names: str) -> dict[str, Any]:
    return {name: getattr(row, name) for name in names}


def _document(
    report: SealedAuditReport | StoreAuditReport, display: str, code: int
) -> dict[str, Any]:
    """The report as ``--json`` prints it; its ``fixes`` start with the older keys' one, if any."""
    look, rerun = None, command("audit", display)
    if isinstance(report, SealedAuditReport):
        if report.findings:
            first = report.findings[0]
            namespace = ["--ns", first.checkpoint_ns] if first.checkpoint_ns else []
            look = command("inspect", display, "--thread", first.thread_id, *namespace)
        document = {
            "store": display,
            "layout": "sealed",
            "exit_code": code,
            **_fields(report, "threads", "checkpoints", "records", "values", "writes", *_CELLS),
            **_fields(report, "tenant_checkpoints", "tenant_cells", "shredded", "finding_count"),
            "shredded_rows": [
                _fields(row, *_WHERE, "tenant_id", "status") for row in report.shredded_rows
            ],
            "findings": [_fields(f, *_WHERE, "error") for f in report.findings],
        }
    else:
        document = {
            "store": display,
            "layout": "sealed_store",
            "exit_code": code,
            **_fields(report, "items", *_CELLS, "finding_count"),
            "findings": [
                {"namespace": list(f.namespace), "key": f.key, "error": f.error}
                for f in report.findings
            ],
        }
    older = [f"fix (cells under older keys): {command('rewrap', display)}"]
    errors = {f.error for f in report.findings}
    document["fixes"] = older[: bool(report.not_under_primary)] + row_error_fixes(
        errors, display, rerun=rerun, look=look
    )
    return document


def _print(doc: Mapping[str, Any], max_listed: int) -> list[str]:
    store, cells = doc["store"], doc["under_primary"] + doc["not_under_primary"]
    if doc["layout"] == "sealed":
        lines = [
            f"store: {store} (sealed by SealedSaver)",
            f"  {doc['threads']:,} threads, {doc['checkpoints']:,} checkpoints:"
            f" {doc['records']:,} records, {doc['values']:,} values, {doc['writes']:,} writes",
            f"  under the primary key: {doc['under_primary']:,} of {cells:,} cells",
        ]
        if doc["tenant_checkpoints"]:
            lines.append(
                f"  {doc['tenant_checkpoints']:,} checkpoints of tenants, opened with their keys"
                f" ({doc['tenant_cells']:,} cells under thread keys: `TenantKeys.rewrap` rotates"
                " those keys)"
            )
        if doc["shredded"]:
            lines.append(
                f"  {doc['shredded']:,} checkpoints of shredded tenants or threads: erased on"
                " purpose, not findings"
            )
            shredded = [
                f"shredded: thread {r['thread_id']} ns {r['checkpoint_ns']} checkpoint"
                f" {r['checkpoint_id']}"
                for r in doc["shredded_rows"]
            ]
            lines += capped(shredded, doc["shredded"], limit=max_listed, indent="    ")
        guide, noun = "docs/rotation.md", "checkpoints"
        clean = "every checkpoint opens, and every history reaches its root"
        rows = [
            f"{f['error']}: thread {f['thread_id']} ns {f['checkpoint_ns']} checkpoint"
            f" {f['checkpoint_id']}"
            for f in doc["findings"]
        ]
    else:
        lines = [
            f"store: {store} (items sealed by SealedStore)",
            f"  {doc['items']:,} items; under the primary key: {doc['under_primary']:,}"
            f" of {cells:,} cells (the store identity's included)",
        ]
        guide, noun, clean = "docs/store.md", "items", "every item opens at its location"
        rows = [
            f"{f['error']}: namespace {'.'.join(f['namespace'])} key {f['key']}"
            for f in doc["findings"]
        ]
    fixes = doc["fixes"]
    if doc["not_under_primary"]:
        lines.append(
            f"  {doc['not_under_primary']:,} cells are under older keys, to move before"
            f" retiring them ({guide})"
        )
        lines.append(f"    fix: {command('rewrap', store)}")
        fixes = fixes[1:]  # that one, just printed
    if not rows:
        return [*lines, f"  {clean}"]
    lines.append(f"  {doc['finding_count']:,} {noun} do not open:")
    return (
        lines
        + capped(rows, doc["finding_count"], limit=max_listed, indent="    ")
        + [f"    {fix}" for fix in fixes]
    )
