"""``secure-serde rewrap STORE``: re-encrypt a checkpoint store under the current primary key.

Keys: as its description says. Run it with the configuration of step 4 of the README's rotation
runbook: the new key primary, the old keys still present and not retired.

0.3's ``--bind``, ``--seal-metadata``, ``--plaintext-metadata`` and ``--indexed-metadata`` stay
for one minor version, hidden from ``--help``, so a script that passes them fails before the store
is opened, naming ``secure-serde adopt``. Exit codes: the epilog below.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any, Final

from secure_serde import ConfigurationError, Migration, TenantKeys
from secure_serde.cli._args import STORE, TENANT_KEYS, define, positive_int
from secure_serde.cli._fixes import row_error_fixes
from secure_serde.cli._pretty import command, for_terminal, print_document, report_lines
from secure_serde.config import ConfiguredCiphers, require_ciphers
from secure_serde.passes import PassProgress, PassReport, rewrap
from secure_serde.stores import DEFAULT_BATCH_SIZE

__all__ = ["ProgressLine", "add_progress_options", "progress_line", "register"]

EXIT_OK: Final = 0
EXIT_FAILED_ROWS: Final = 1
EXIT_INTERRUPTED: Final = 130
_REDRAW_SECONDS: Final = 0.1
_REMOVED: Final = {
    "--bind": "store_true",
    "--seal-metadata": "store_true",
    "--plaintext-metadata": "append",
    "--indexed-metadata": "append",
}


def register(parser: argparse.ArgumentParser) -> None:
    define(
        parser,
        run,
        "Re-encrypt every serialized value of a LangGraph checkpoint store (checkpoints,"
        " writes, blobs) under the current primary key, in batches of one transaction"
        " each. Values are decrypted and sealed again without being deserialized. Rows"
        " already under the primary are skipped, so the command can be killed and rerun"
        " at any time, and run while the application writes. Keys come from"
        " LANGGRAPH_AES_KEY (label 'env') and the keyring file named by"
        " SECURE_SERDE_KEYRING_FILE; a KMS key named by SECURE_SERDE_KMS_KEY"
        " (older ones in SECURE_SERDE_KMS_DECRYPT_KEYS, the encryption context in"
        " SECURE_SERDE_KMS_ENCRYPTION_CONTEXT) becomes the primary, and the AES keys"
        " then only read.",
        {
            "store": STORE,
            "--dry-run": "decrypt and count, write nothing",
            "--batch-size": {
                "type": positive_int,
                "default": DEFAULT_BATCH_SIZE,
                "help": f"rows per page and per transaction (default {DEFAULT_BATCH_SIZE})",
            },
            "--workers": {
                "type": positive_int,
                "default": 1,
                "help": "PostgreSQL only: worker processes, each on one range of thread ids",
            },
            "--allow-plaintext": "also encrypt unencrypted rows, once the strict decoder accepts"
            " them (unencrypted pickle rows, and rows naming types outside the allowlist, are"
            " refused even so)",
            "--allow-legacy-pickle": "also rewrap pickle rows of langgraph's built-in format,"
            " whose type tag is not authenticated: only for a store nobody untrusted could"
            " write to",
            "--verify": "also decrypt rows already under the primary, to check every row"
            " authenticates",
            "--compress": "also compress every value as CompressedSerializer writes it (zstd,"
            " or zlib without it); read SECURITY.md on compression and length leaks first",
            "--json": "print the report as JSON, failing rows listed by table and key only (up"
            " to 1,000)",
            "--tenant-keys": {
                "metavar": "LOCATION",
                "help": f"{TENANT_KEYS}tenant rows are skipped (their keys rotate with"
                " TenantKeys.rewrap) and counted as tenant-keyed or shredded",
            },
            # Hidden; refused in run.
            **{
                flag: {"action": action, "help": argparse.SUPPRESS}
                for flag, action in _REMOVED.items()
            },
        },
        "exit status: 0 all rows under the primary; 1 some rows could not be rewrapped"
        " (the first 20 listed by table and key, never by content; --json lists up to"
        " 1,000); 2 usage, configuration or store error; 130 interrupted (rerun to finish).",
    )
    add_progress_options(parser)


def add_progress_options(parser: argparse.ArgumentParser) -> None:
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument(
        "--progress",
        dest="progress",
        action="store_true",
        default=None,
        help="show a progress line on stderr (default: when stderr is a terminal)",
    )
    progress.add_argument("--no-progress", dest="progress", action="store_false")


class ProgressLine:
    """A progress callback: one line on stderr, ``render(*args)``'s text, redrawn in place with
    ``\\r`` at most ten times a second (and when it says done); `finish` ends it once drawn."""

    def __init__(self, render: Callable[..., tuple[str, bool]]) -> None:
        self._render = render
        self._last = float("-inf")
        self._drawn = False

    def __call__(self, *args: Any) -> None:
        text, done = self._render(*args)
        now = time.monotonic()
        if done or now - self._last >= _REDRAW_SECONDS:
            self._last, self._drawn = now, True
            sys.stderr.write(text)
            sys.stderr.flush()

    def finish(self) -> None:
        if self._drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()


def progress_line(
    args: argparse.Namespace, render: Callable[..., tuple[str, bool]]
) -> ProgressLine | None:
    """A `ProgressLine` under ``--progress`` (by default, when stderr is a terminal)."""
    shown = sys.stderr.isatty() if args.progress is None else args.progress
    return ProgressLine(render) if shown else None


def _bar(snapshot: PassProgress, verb: str, width: int = 24) -> str:
    fraction = snapshot.scanned / max(snapshot.total, snapshot.scanned, 1)
    filled = int(width * fraction)
    return (
        f"\rrewrap [{'#' * filled}{'-' * (width - filled)}] {snapshot.scanned:,}/"
        f"{snapshot.total:,} rows {fraction:6.1%}  {snapshot.rate:,.0f} rows/s"
        f"  {verb} {snapshot.rewrapped:,}  failed {snapshot.failures:,} "
    )


def run(args: argparse.Namespace) -> int:
    given = [flag for flag in _REMOVED if getattr(args, flag[2:].replace("-", "_"))]
    if given:
        raise ConfigurationError(
            f"rewrap {' '.join(given)} was removed in secure_serde 0.4: take a store that a"
            " stock saver or secure_serde 0.1-0.3 wrote into a sealed one with"
            " `secure-serde adopt SOURCE TARGET` (docs/upgrading.md), then rewrap that"
        )
    configured = require_ciphers()
    verb = "would rewrap" if args.dry_run else "rewrapped"
    bar = progress_line(args, lambda s: (_bar(s, verb), 0 < s.total <= s.scanned))
    try:
        report = rewrap(
            args.store,
            configured.primary,
            decrypt_only=configured.decrypt_only,
            batch_size=args.batch_size,
            dry_run=args.dry_run,
            migration=Migration(
                plaintext=args.allow_plaintext, legacy_pickle=args.allow_legacy_pickle
            ),
            verify=args.verify,
            compress=args.compress,
            workers=args.workers,
            progress=bar,
            tenant_keys=None if args.tenant_keys is None else TenantKeys.open(args.tenant_keys),
        )
    except KeyboardInterrupt:
        print(
            "\nsecure-serde: interrupted; committed batches stay committed, rerun to finish",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    finally:
        if bar is not None:
            bar.finish()
    named = lambda source: _named(source, configured)  # noqa: E731 - one use, named
    text = lambda: report_lines(report, named=named, fixes=_fixes(report))  # noqa: E731
    print_document(report.to_json(), args.json, text)
    if report.ok:
        return EXIT_OK
    print(
        f"secure-serde: {report.failure_count:,} row(s) could not be rewrapped",
        file=sys.stderr,
    )
    return EXIT_FAILED_ROWS


def _named(source: str, configured: ConfiguredCiphers) -> str:
    cipher_name, _, key_id = source.partition("/")
    label = configured.key_label(cipher_name, key_id or None)
    kms = configured.kms
    if label is None and not key_id and kms is not None and cipher_name in kms.cipher_names:
        # The KMS primary is known by its KMS key, not by a per-key key id.
        label = kms.key_arn or kms.kms_key
    return for_terminal(f"{source} ({label})" if label else source)


def _fixes(report: PassReport) -> list[str]:
    """What fixes each kind of failure (by error class), the rerun last: the pass is resumable."""
    rerun = command("rewrap", report.store)
    errors = {f.error.__name__ for f in report.failures if f.error is not None}
    fixes = row_error_fixes(errors, report.store, rerun=rerun)
    if any(f.error is None for f in report.failures):
        fixes.append(f"fix (rows that kept changing under concurrent writes): {rerun}")
    return fixes
