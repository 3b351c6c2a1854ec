"""``secure-serde audit STORE``: what a checkpoint store encrypts, under which keys, and what not.

What it reports, and why each finding is one, is in docs/cli.md (``secure-serde audit``); the
scan is `secure_serde.passes.audit_store`, a store SealedSaver sealed goes to `_audit_sealed`,
and what fixes each finding is `_problems`. Only names, ids, counts and error class names are
printed: never a value, a key or a ciphertext. Exit codes: the epilog.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Collection, Mapping
from typing import Any, Final

from secure_serde._errors import ConfigurationError
from secure_serde.cli._args import JSON, STORE, TENANT_KEYS, define, positive_int
from secure_serde.cli._audit_sealed import run_sealed
from secure_serde.cli._fixes import NEW_STORE
from secure_serde.cli._pretty import MAX_LISTED, capped, command, print_document
from secure_serde.cli._rewrap import add_progress_options, progress_line
from secure_serde.config import require_ciphers
from secure_serde.passes import (
    LANGGRAPH_METADATA_KEYS,
    STATE_METADATA_KEYS,
    AuditReport,
    CipherGroup,
    Listed,
    RowFailure,
    audit_store,
)
from secure_serde.serde import compression_line
from secure_serde.stores import (
    DEFAULT_BATCH_SIZE,
    RowRef,
    is_internal_channel,
    open_store,
    sealed_store_display,
)

__all__ = ["EXIT_CLEAN", "EXIT_FINDINGS", "register", "report_json"]

EXIT_CLEAN: Final = 0
EXIT_FINDINGS: Final = 1


def register(parser: argparse.ArgumentParser) -> None:
    define(
        parser,
        run,
        "Scan a LangGraph checkpoint store (a SQLite file or a postgresql:// URL) and report"
        " its serialized values by cipher, key id and format version; unencrypted values;"
        " values the configured keys cannot decrypt (each is authenticated, never"
        " deserialized); channel values inline in PostgreSQL's checkpoint JSON; and the"
        " metadata key names stored in plaintext. Prints names, ids and counts only, never"
        " a value or a key. Keys come from LANGGRAPH_AES_KEY, SECURE_SERDE_KEYRING_FILE and"
        " SECURE_SERDE_KMS_KEY.",
        {
            "store": STORE,
            "--json": JSON,
            "--no-decrypt": "only read type tags and headers: needs no keys, finds no tampering",
            "--allow-metadata-key": {
                "action": "append",
                "default": [],
                "metavar": "KEY",
                "help": "a metadata key known to be harmless in plaintext (repeatable)",
            },
            "--batch-size": {
                "type": positive_int,
                "default": DEFAULT_BATCH_SIZE,
                "help": f"rows read per query (default {DEFAULT_BATCH_SIZE})",
            },
            "--max-listed": {
                "type": positive_int,
                "default": MAX_LISTED,
                "help": "rows listed by id per kind of problem, text output"
                f" (default {MAX_LISTED})",
            },
            "--tenant-keys": {
                "metavar": "LOCATION",
                "help": f"{TENANT_KEYS}each tenant's rows are opened with its keys, and the rows"
                " of shredded tenants and threads are reported as shredded, not as findings",
            },
        },
        "exit status: 0 nothing found; 1 findings (unencrypted or undecryptable values,"
        " values the strict decoder refuses, legacy-format values, inline channel values,"
        " metadata keys not written by LangGraph); 2 usage, configuration or store error.",
    )
    add_progress_options(parser)


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
    bar = progress_line(
        args,
        lambda n, total: (f"\raudit: {n:,}/{total:,} rows {n / max(total, 1):6.1%}", n >= total),
    )
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
    code = EXIT_FINDINGS if _problems(report) else EXIT_CLEAN
    document = report_json(report, code)
    print_document(document, args.json, lambda: _text(document, args.max_listed))
    return code


def _problems(report: AuditReport) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """One finding per kind of problem: its kind, its text, and what fixes it, as (command,
    why) pairs, the fix first, then any alternative. The kinds: ``plaintext``,
    ``undecryptable``, ``refused``, ``legacy``, ``inline``, ``metadata``."""
    store, flagged = report.store, report.flagged_metadata_keys()
    adopt = command("adopt", store, NEW_STORE)
    table = [
        (
            "plaintext",
            report.plaintext.count,
            "unencrypted serialized value(s)",
            [(command("rewrap", store, "--allow-plaintext"), "encrypts them in place")],
        ),
        (
            "undecryptable",
            report.undecryptable.count,
            "value(s) the configured keys cannot decrypt",
            [
                (
                    adopt,
                    "copies every row that opens into a new sealed store and lists the rest;"
                    " first configure any key the rows name (`secure-serde keyring show FILE`"
                    " lists the key ids a keyring holds)",
                )
            ],
        ),
        (
            "refused",
            report.refused.count,
            "value(s) whose type tag nothing authenticates hold what the strict decoder"
            " refuses (a type outside the allowlist, a pickle): planted or relabelled rows"
            " would run code when loaded permissively; rewrap will not seal them",
            [(adopt, "copies the store into a new sealed store, listing and leaving these")],
        ),
        (
            "legacy",
            sum(g.count for g in report.groups.values() if g.legacy),
            "value(s) in langgraph's built-in format (type tag not authenticated):"
            " run secure-serde rewrap",
            [
                (
                    command("rewrap", store),
                    "moves them to the current format; pickle rows also need"
                    " --allow-legacy-pickle, only for a store nobody untrusted could write",
                )
            ],
        ),
        (
            "inline",
            report.inline_count,
            "plaintext channel value(s) inline in the checkpoint JSON",
            [
                (
                    command("adopt", store, NEW_STORE, "--accept-unvouched"),
                    "seals them in a new store (each is listed as plaintext)",
                )
            ],
        ),
    ]
    found = [(kind, f"{n:,} {text}", fixes) for kind, n, text, fixes in table if n]
    if flagged:
        allow = [arg for key in sorted(flagged) for arg in ("--allow-metadata-key", key)]
        text = f"plaintext metadata key(s) not written by LangGraph: {sorted(flagged)}"
        fixes = [
            (adopt, "seals every metadata key in a new store"),
            (command("audit", store, *allow), "if they are harmless in plaintext"),
        ]
        found.append(("metadata", text, fixes))
    return found


def _row(row: RowRef | RowFailure) -> dict[str, Any]:
    if isinstance(row, RowFailure):
        return {**_row(row.ref), "reason": row.reason}
    return {"table": row.table, "key": dict(row.key)}


def _listed(listed: Listed, by: str = "by_error") -> dict[str, Any]:
    rows = [_row(row) for row in listed.rows]
    return {"count": listed.count, by: dict(sorted(listed.kinds.items())), "rows": rows}


def _group_json(group: CipherGroup, decrypted: bool) -> dict[str, Any]:
    entry = {name: getattr(group, name) for name in ("cipher", "key_id", "key_label")}
    # For kms, key_label is the KMS key too until 0.5: read kms_key (docs/cli.md).
    entry["kms_key"] = group.key_label if group.cipher == "kms" else None
    entry |= {name: getattr(group, name) for name in ("format_version", "legacy", "count")}
    entry["by_table"] = dict(sorted(group.tables.items()))
    if decrypted:
        entry |= {n: getattr(group, n) for n in ("current", "readable", "failed", "refused")}
    return entry


def report_json(report: AuditReport, exit_code: int) -> dict[str, Any]:
    """The ``--json`` document: every fact of the report (the text prints it), and the exit code."""
    decrypted, inline, meta = report.decrypted, report.inline, report.metadata
    groups = sorted(
        report.groups.values(),
        key=lambda g: (
            g.cipher,
            g.key_id or "",
            -1 if g.format_version is None else g.format_version,
        ),
    )
    problems = _problems(report)
    return {
        "store": report.store,
        "kind": report.kind,
        "decrypted": decrypted,
        "keys": report.keys,
        "cells": {
            "total": report.cells,
            "empty": report.empty,
            "by_table": dict(sorted(report.tables.items())),
        },
        "ciphers": [_group_json(g, decrypted) for g in groups],
        "compression": dict(sorted(report.compression.items())),
        "stale": report.stale_count if decrypted else None,
        "plaintext": _listed(report.plaintext, "by_type"),
        "undecryptable": _listed(report.undecryptable) if decrypted else None,
        "refused": _listed(report.refused) if decrypted else None,
        "inline_values": (
            None
            if inline is None
            else {
                "count": report.inline_count,
                "channels": [
                    {**dataclasses.asdict(c), "internal": is_internal_channel(c.channel)}
                    for c in inline
                ],
            }
        ),
        "metadata": {
            "checkpoints": meta.checkpoints,
            "not_objects": meta.not_objects,
            "keys": meta.counts,
            "truncated": meta.truncated,
            "flagged": report.flagged_metadata_keys(),
            "allowed": sorted(report.allowed_metadata_keys),
        },
        "findings": [text for _, text, _ in problems],
        # One per finding, in the same order: the command that fixes it.
        "fixes": [
            {
                "kind": kind,
                "finding": text,
                "commands": [{"command": line, "why": why} for line, why in fixes],
            }
            for kind, text, fixes in problems
        ],
        "exit_code": exit_code,
    }


def _group_line(group: Mapping[str, Any], decrypted: bool) -> str:
    if group["legacy"]:
        what = f"{group['cipher']}: langgraph built-in format (no key id or version)"
    else:
        key = "key id ?" if group["key_id"] is None else f"key id {group['key_id']}"
        if group["key_label"]:
            key += f" ({group['key_label']})"
        version = "?" if group["format_version"] is None else group["format_version"]
        what = f"{group['cipher']} {key} format v{version}"
    line = f"  {what}: {group['count']:,}"
    if decrypted:
        line += f" ({group['current']:,} under the primary, {group['failed']:,} unreadable"
        line += f", {group['refused']:,} refused)" if group["refused"] else ")"
    return line


def _rows(title: str, listed: Mapping[str, Any], limit: int) -> list[str]:
    kinds = listed.get("by_error", listed.get("by_type", {}))
    counts = ", ".join(f"{kind} {n:,}" for kind, n in kinds.items())
    rows = [
        f"{row['table']} {' '.join(f'{k}={v!r}' for k, v in row['key'].items())}"
        + (f": {row['reason']}" if "reason" in row else "")
        for row in listed["rows"]
    ]
    return [
        f"{title}: {listed['count']:,}" + (f" ({counts})" if counts else ""),
        *capped(rows, listed["count"], limit=limit, indent="    "),
    ]


def _metadata_note(key: str, allowed: Collection[str]) -> str:
    if key in LANGGRAPH_METADATA_KEYS:
        return "LangGraph"
    if key in allowed:
        return "allowed"
    if key in STATE_METADATA_KEYS:
        return "NOT LangGraph's today: node outputs, written by old langgraph versions"
    return "NOT LangGraph's: copied from config"


def _text(doc: Mapping[str, Any], limit: int) -> list[str]:
    store, cells, meta = doc["store"], doc["cells"], doc["metadata"]
    lines = [f"store: {store} ({doc['kind']})"]
    lines += [f"keys: {key}" for key in doc["keys"]] or [
        "keys: none (--no-decrypt: values were not authenticated)"
    ]
    tables = ", ".join(f"{name} {n:,}" for name, n in cells["by_table"].items())
    lines += [
        f"serialized values: {cells['total']:,} ({tables}); empty {cells['empty']:,}",
        compression_line(doc["compression"]),
    ]
    if doc["ciphers"]:
        lines.append("encrypted, by cipher, key id and format version:")
        lines += [_group_line(group, doc["decrypted"]) for group in doc["ciphers"]]
    if doc["stale"]:
        lines.append(
            f"  {doc['stale']:,} readable value(s) not under the primary key"
            f" ({command('rewrap', store)} moves them)"
        )
    lines += _rows("unencrypted", doc["plaintext"], limit)
    if doc["decrypted"]:
        lines += _rows("cannot decrypt", doc["undecryptable"], limit)
        refused = "refused by the strict decoder (type tag not authenticated)"
        lines += _rows(refused, doc["refused"], limit)
    if (inline := doc["inline_values"]) is not None:
        lines.append(
            f"inline plaintext channel values (checkpoints.checkpoint JSONB): {inline['count']:,}"
        )
        lines += [
            f"  {c['channel']}{' (a LangGraph channel)' if c['internal'] else ''}:"
            f" {c['checkpoints']:,} checkpoint(s), {c['threads']:,} thread(s),"
            f" JSON {'/'.join(c['json_types'])}"
            for c in inline["channels"]
        ]
    lines.append(
        f"plaintext metadata keys (checkpoints.metadata, {meta['checkpoints']:,} checkpoints):"
    )
    if meta["not_objects"]:
        lines.append(
            f"  {meta['not_objects']:,} checkpoint(s) with metadata that is not a JSON object"
        )
    lines += [
        f"  {key}: {count:,} ({_metadata_note(key, meta['allowed'])})"
        for key, count in sorted(meta["keys"].items())
    ]
    if meta["truncated"]:
        lines.append(f"  ... more keys, not listed (the first {len(meta['keys']):,} by name are)")
    lines.append(f"findings: {len(doc['findings'])}")
    for fix in doc["fixes"]:
        lines.append(f"  - {fix['finding']}")
        # A shell comment: the line runs as printed, explanation included.
        lines += [
            f"    {'or: ' if index else 'fix:'} {c['command']}  # {c['why']}"
            for index, c in enumerate(fix["commands"])
        ]
    return lines
