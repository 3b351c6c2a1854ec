"""``secure-serde audit STORE``: what a checkpoint store encrypts, under which keys, and what not.

What it reports, and why each finding is one, is in docs/cli.md (``secure-serde audit``); the
scan is `_audit_scan`, and a store SealedSaver sealed goes to `_audit_sealed`. Only names, ids,
counts and error class names are printed: never a value, a key or a ciphertext. Exit codes: 0
nothing found, 1 findings, 2 usage, configuration or store error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any, Final, TextIO

from secure_serde._errors import ConfigurationError
from secure_serde.cli._args import positive_int
from secure_serde.cli._audit_scan import (
    LANGGRAPH_METADATA_KEYS,
    STATE_METADATA_KEYS,
    AuditReport,
    CipherGroup,
    audit_store,
)
from secure_serde.cli._audit_sealed import run_sealed
from secure_serde.cli._fixes import finding_fixes
from secure_serde.cli._next import is_internal_channel
from secure_serde.cli._pretty import MAX_LISTED, capped, command, for_terminal
from secure_serde.cli._rewrap import Redraw, add_progress_options
from secure_serde.config import require_ciphers
from secure_serde.passes import RowFailure
from secure_serde.serde import compression_line
from secure_serde.stores import (
    DEFAULT_BATCH_SIZE,
    RowRef,
    open_store,
    sealed_store_display,
)

__all__ = ["EXIT_CLEAN", "EXIT_FINDINGS", "register", "report_json"]

EXIT_CLEAN: Final = 0
EXIT_FINDINGS: Final = 1
_DEFAULT_LISTED: Final = MAX_LISTED


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Scan a LangGraph checkpoint store (a SQLite file or a postgresql:// URL) and report"
        " its serialized values by cipher, key id and format version; unencrypted values;"
        " values the configured keys cannot decrypt (each is authenticated, never"
        " deserialized); channel values inline in PostgreSQL's checkpoint JSON; and the"
        " metadata key names stored in plaintext. Prints names, ids and counts only, never"
        " a value or a key. Keys come from LANGGRAPH_AES_KEY, SECURE_SERDE_KEYRING_FILE and"
        " SECURE_SERDE_KMS_KEY."
    )
    parser.epilog = (
        "exit status: 0 nothing found; 1 findings (unencrypted or undecryptable values,"
        " values the strict decoder refuses, legacy-format values, inline channel values,"
        " metadata keys not written by LangGraph); 2 usage, configuration or store error."
    )
    parser.add_argument("store", help="a SQLite file path or a postgresql:// URL")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--no-decrypt",
        action="store_true",
        help="only read type tags and headers: needs no keys, finds no tampering",
    )
    parser.add_argument(
        "--allow-metadata-key",
        action="append",
        default=[],
        metavar="KEY",
        help="a metadata key known to be harmless in plaintext (repeatable)",
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=DEFAULT_BATCH_SIZE,
        help=f"rows read per query (default {DEFAULT_BATCH_SIZE})",
    )
    parser.add_argument(
        "--max-listed",
        type=positive_int,
        default=_DEFAULT_LISTED,
        help=f"rows listed by id per kind of problem, text output (default {_DEFAULT_LISTED})",
    )
    parser.add_argument(
        "--tenant-keys",
        metavar="LOCATION",
        help=(
            "the tenant key store (a SQLite path or a postgresql:// URL) of a store written by"
            " SealedSaver(..., tenant_keys=...): each tenant's rows are opened with its keys,"
            " and the rows of shredded tenants and threads are reported as shredded, not as"
            " findings"
        ),
    )
    add_progress_options(parser)
    parser.set_defaults(func=run)


class _AuditProgress(Redraw):
    """``scanned/total`` rows on one stderr line."""

    def __call__(self, scanned: int, total: int) -> None:
        if self._due(scanned >= total):
            self._draw(f"\raudit: {scanned:,}/{total:,} rows {scanned / max(total, 1):6.1%}")


def run(args: argparse.Namespace) -> int:
    ciphers = None if args.no_decrypt else require_ciphers()  # a bad keyring fails first
    sealed = sealed_store_display(args.store)
    if sealed is not None:
        return run_sealed(args, sealed)
    if args.tenant_keys is not None:
        raise ConfigurationError(
            "--tenant-keys applies to a store SealedSaver(..., tenant_keys=...) wrote, and"
            " this one is not sealed by SealedSaver"
        )
    show = sys.stderr.isatty() if args.progress is None else args.progress
    bar = _AuditProgress(sys.stderr) if show else None
    with open_store(args.store) as store:
        try:
            report = audit_store(
                store,
                ciphers,
                batch_size=args.batch_size,
                allowed_metadata_keys=frozenset(args.allow_metadata_key),
                progress=bar,
            )
        finally:
            if bar is not None:
                bar.finish()
    code = EXIT_FINDINGS if report.findings() else EXIT_CLEAN
    if args.json:
        json.dump(report_json(report, code), sys.stdout, indent=2, sort_keys=False)
        sys.stdout.write("\n")
    else:
        _print_text(report, sys.stdout, args.max_listed)
    return code


# -- JSON ---------------------------------------------------------------------------------------


def _ref(ref: RowRef) -> dict[str, Any]:
    return {"table": ref.table, "key": dict(ref.key)}


def _group_json(group: CipherGroup, decrypted: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "cipher": group.cipher,
        "key_id": group.key_id,
        # For kms, key_label is the KMS key too until 0.5: read kms_key (docs/cli.md).
        "key_label": group.key_label,
        "kms_key": group.key_label if group.cipher == "kms" else None,
        "format_version": group.format_version,
        "legacy": group.legacy,
        "count": group.count,
        "by_table": dict(sorted(group.tables.items())),
    }
    if decrypted:
        entry.update(
            current=group.current,
            readable=group.readable,
            failed=group.failed,
            refused=group.refused,
        )
    return entry


def _failures_json(
    count: int, kinds: Mapping[str, int], failures: list[RowFailure]
) -> dict[str, Any]:
    return {
        "count": count,
        "by_error": dict(sorted(kinds.items())),
        "rows": [{**_ref(f.ref), "reason": f.reason} for f in failures],
    }


def report_json(report: AuditReport, exit_code: int) -> dict[str, Any]:
    """The ``--json`` document: the same facts as the text report, and the exit code."""
    inline = report.inline
    flagged = report.flagged_metadata_keys()
    return {
        "store": report.store,
        "kind": report.kind,
        "decrypted": report.decrypted,
        "keys": report.keys,
        "cells": {
            "total": report.cells,
            "empty": report.empty,
            "by_table": dict(sorted(report.tables.items())),
        },
        "ciphers": [_group_json(g, report.decrypted) for g in _sorted_groups(report)],
        "compression": dict(sorted(report.compression.items())),
        "stale": report.stale_count if report.decrypted else None,
        "plaintext": {
            "count": report.plaintext_count,
            "by_type": dict(sorted(report.plaintext.items())),
            "rows": [_ref(ref) for ref in report.plaintext_rows],
        },
        "undecryptable": (
            _failures_json(report.failure_count, report.failure_kinds, report.failures)
            if report.decrypted
            else None
        ),
        "refused": (
            _failures_json(report.refused_count, report.refused_kinds, report.refused)
            if report.decrypted
            else None
        ),
        "inline_values": (
            None
            if inline is None
            else {
                "count": report.inline_count,
                "channels": [
                    {
                        "channel": c.channel,
                        "checkpoints": c.checkpoints,
                        "threads": c.threads,
                        "json_types": list(c.json_types),
                        "internal": is_internal_channel(c.channel),
                    }
                    for c in inline
                ],
            }
        ),
        "metadata": {
            "checkpoints": report.metadata.checkpoints,
            "not_objects": report.metadata.not_objects,
            "keys": report.metadata.counts,
            "truncated": report.metadata.truncated,
            "flagged": flagged,
            "allowed": sorted(report.allowed_metadata_keys),
        },
        "findings": report.findings(),
        # One per finding, in the same order: the command that fixes it.
        "fixes": [
            {"kind": kind, "finding": text, "commands": _fixes_json(kind, report)}
            for kind, text in report.problems()
        ],
        "exit_code": exit_code,
    }


def fixes_for(kind: str, report: AuditReport) -> list[tuple[str, str]]:
    """What fixes a finding of ``kind`` in ``report``: (command, why) pairs, the fix first."""
    return finding_fixes(kind, report.store, report.flagged_metadata_keys())


def _fixes_json(kind: str, report: AuditReport) -> list[dict[str, str]]:
    return [{"command": line, "why": why} for line, why in fixes_for(kind, report)]


# -- text ---------------------------------------------------------------------------------------


def _sorted_groups(report: AuditReport) -> list[CipherGroup]:
    return sorted(
        report.groups.values(),
        key=lambda g: (
            g.cipher,
            g.key_id or "",
            -1 if g.format_version is None else g.format_version,
        ),
    )


def _group_line(group: CipherGroup, decrypted: bool) -> str:
    if group.legacy:
        what = f"{group.cipher}: langgraph built-in format (no key id or version)"
    else:
        key = "key id ?" if group.key_id is None else f"key id {group.key_id}"
        if group.key_label:
            key += f" ({group.key_label})"
        version = "?" if group.format_version is None else str(group.format_version)
        what = f"{group.cipher} {key} format v{version}"
    line = f"  {what}: {group.count:,}"
    if decrypted:
        line += f" ({group.current:,} under the primary, {group.failed:,} unreadable"
        line += f", {group.refused:,} refused)" if group.refused else ")"
    return line


def _refs(out: TextIO, refs: list[str], total: int, limit: int) -> None:
    for line in capped(refs, total, limit=limit, indent="    "):
        print(line, file=out)


def _counted(title: str, count: int, kinds: Mapping[str, int]) -> str:
    listed = ", ".join(f"{for_terminal(k)} {n:,}" for k, n in sorted(kinds.items()))
    return f"{title}: {count:,}" + (f" ({listed})" if listed else "")


def _print_text(report: AuditReport, out: TextIO, limit: int) -> None:
    print(f"store: {for_terminal(report.store)} ({report.kind})", file=out)
    for line in report.keys or ["keys: none (--no-decrypt: values were not authenticated)"]:
        print(for_terminal(f"keys: {line}" if report.keys else line), file=out)
    tables = ", ".join(f"{name} {n:,}" for name, n in sorted(report.tables.items()))
    print(f"serialized values: {report.cells:,} ({tables}); empty {report.empty:,}", file=out)
    print(compression_line(report.compression), file=out)
    if report.groups:
        print("encrypted, by cipher, key id and format version:", file=out)
        for group in _sorted_groups(report):
            print(for_terminal(_group_line(group, report.decrypted)), file=out)
    if report.decrypted and report.stale_count:
        print(
            f"  {report.stale_count:,} readable value(s) not under the primary key"
            f" ({command('rewrap', report.store)} moves them)",
            file=out,
        )
    print(_counted("unencrypted", report.plaintext_count, report.plaintext), file=out)
    _refs(out, [str(ref) for ref in report.plaintext_rows], report.plaintext_count, limit)
    if report.decrypted:
        print(_counted("cannot decrypt", report.failure_count, report.failure_kinds), file=out)
        _refs(out, [str(f) for f in report.failures], report.failure_count, limit)
        refused = "refused by the strict decoder (type tag not authenticated)"
        print(_counted(refused, report.refused_count, report.refused_kinds), file=out)
        _refs(out, [str(f) for f in report.refused], report.refused_count, limit)
    if report.inline is not None:
        print(
            f"inline plaintext channel values (checkpoints.checkpoint JSONB):"
            f" {report.inline_count:,}",
            file=out,
        )
        for channel in report.inline:
            internal = " (a LangGraph channel)" if is_internal_channel(channel.channel) else ""
            print(
                f"  {for_terminal(channel.channel)}{internal}: {channel.checkpoints:,}"
                f" checkpoint(s), {channel.threads:,} thread(s),"
                f" JSON {'/'.join(channel.json_types)}",
                file=out,
            )
    _print_metadata(report, out)
    findings = report.findings()
    print(f"findings: {len(findings)}", file=out)
    for kind, finding in report.problems():
        print(f"  - {for_terminal(finding)}", file=out)
        for index, (line, why) in enumerate(fixes_for(kind, report)):
            # A shell comment: the line runs as printed, explanation included.
            print(f"    {'or: ' if index else 'fix:'} {line}  # {why}", file=out)


def _print_metadata(report: AuditReport, out: TextIO) -> None:
    meta = report.metadata
    print(
        f"plaintext metadata keys (checkpoints.metadata, {meta.checkpoints:,} checkpoints):",
        file=out,
    )
    if meta.not_objects:
        print(
            f"  {meta.not_objects:,} checkpoint(s) with metadata that is not a JSON object",
            file=out,
        )
    for key, count in sorted(meta.counts.items()):
        if key in LANGGRAPH_METADATA_KEYS:
            note = "LangGraph"
        elif key in report.allowed_metadata_keys:
            note = "allowed"
        elif key in STATE_METADATA_KEYS:
            note = "NOT LangGraph's today: node outputs, written by old langgraph versions"
        else:
            note = "NOT LangGraph's: copied from config"
        print(f"  {for_terminal(key)}: {count:,} ({note})", file=out)
    if meta.truncated:
        print(f"  ... more keys, not listed (the first {len(meta.counts):,} by name are)", file=out)
