"""``secure-serde adopt SOURCE TARGET``: copy an older store into a new SealedSaver store.

SOURCE is read by `secure_serde.stores.V03Reader` (read only); TARGET is opened with the 0.4
saver of its kind and set up. What is refused unless ``--accept-unvouched``, and the exit
codes: the description and epilog.
"""

from __future__ import annotations

import argparse
from contextlib import ExitStack
from typing import Final

from secure_serde import ConfigurationError, Migration
from secure_serde.cli._args import JSON, define
from secure_serde.cli._fixes import adopt_fixes
from secure_serde.cli._inspect_read import open_sealed
from secure_serde.cli._pretty import print_document, report_lines
from secure_serde.config import serializer_from_env
from secure_serde.savers import adopt
from secure_serde.stores import V03Reader

__all__ = ["register"]

# What the lenient reader of the source accepts; each such row is still listed.
# inline_values: a stock PostgreSQL saver keeps int, str, float, bool and None values in
# its checkpoint JSON, where nothing authenticates them; without it such a checkpoint does
# not read even leniently and is refused as misplaced.
_LENIENT: Final = Migration(
    plaintext=True, inline_values=True, unbound=True, unsealed_metadata=True
)


def register(parser: argparse.ArgumentParser) -> None:
    define(
        parser,
        run,
        "Copy every thread of SOURCE (written by secure_serde 0.3's sealed savers, or by a"
        " stock saver with secure_serde's serializer) into TARGET, a new store that"
        " secure_serde.SealedSaver seals. Rows the tool cannot vouch for (plaintext, legacy"
        " +aes rows whose type tag could have been relabelled, values that do not"
        " authenticate at their location) are listed and refused unless --accept-unvouched."
        " Keys come from LANGGRAPH_AES_KEY, SECURE_SERDE_KEYRING_FILE and"
        " SECURE_SERDE_KMS_KEY.",
        {
            "source": "the older store: a SQLite file or a postgresql:// URL",
            "target": "the new store: a SQLite file or a postgresql:// URL",
            "--dry-run": "list what would happen only",
            "--accept-unvouched": "also copy plaintext, legacy and unauthenticated rows (each is"
            " listed and logged)",
            "--json": JSON,
        },
        "exit status: 0 everything copied; 1 rows refused (listed); 2 error.",
    )


def run(args: argparse.Namespace) -> int:
    if args.source == args.target:
        raise ConfigurationError("adopt copies into a new store: SOURCE and TARGET are the same")
    serde = serializer_from_env()
    with ExitStack() as stack:
        # 0.3's layout is read by the 0.3 reader; a stock store's rows are unbound
        # to it, so they read only leniently (and are listed as unauthenticated).
        source = stack.enter_context(V03Reader(args.source, serde=serde))
        lenient = None
        if args.accept_unvouched:
            lenient_serde = serializer_from_env(migration=_LENIENT)
            lenient = stack.enter_context(
                V03Reader(args.source, serde=lenient_serde, migration=_LENIENT)
            )
        target = stack.enter_context(open_sealed(args.target, serde))
        target.setup()
        report = adopt(
            source,
            target,
            lenient=lenient,
            dry_run=args.dry_run,
            accept_unvouched=args.accept_unvouched,
        )
    code = 0 if report.ok else 1
    fixes = adopt_fixes({f.kind for f in report.failures}, args.source)
    document = {**report.to_json(), "exit_code": code}
    print_document(document, args.json, lambda: report_lines(report, fixes=fixes))
    return code
