"""``secure-serde tenants``: crypto-shred a tenant's (or one thread's) key in a tenant key store.

``shred`` leaves a tombstone (docs/tenants.md): every checkpoint of that tenant or thread, in
every copy of the store, then raises `ShreddedError`. It needs only the key store, asks for the
tenant id to be typed back unless ``--yes``, and prints what it did as one line of JSON.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from contextlib import closing
from typing import Final

__all__ = ["register"]

# The JSON names of `ShredResult`'s fields, in their order.
_JSON_NAMES: Final = ("tenant", "thread", "key_id", "shredded_at", "already_shredded")


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Per-tenant keys of SealedSaver(..., tenant_keys=TenantKeys.open(LOCATION))."
        " 'shred' destroys a tenant's key (or, with --thread, one thread's): its"
        " checkpoints, in the store and in every backup of it, can no longer be read."
        " This cannot be undone, except from a backup of the key store."
    )
    commands = parser.add_subparsers(dest="tenants_command", required=True)
    shred = commands.add_parser(
        "shred",
        help="destroy a tenant's key (or one thread's), for good",
        description="Destroy a tenant's key (or one thread's key with --thread), for good.",
    )
    shred.add_argument(
        "--keys",
        required=True,
        metavar="LOCATION",
        help="the tenant key store: a SQLite file path or a postgresql:// URL",
    )
    shred.add_argument("tenant", metavar="TENANT", help="the tenant id")
    shred.add_argument("--thread", metavar="THREAD", help="shred only this thread's key")
    shred.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    shred.set_defaults(func=run_shred)


def _confirmed(tenant: str, thread: str | None) -> bool:
    what = f"thread {thread!r} of tenant {tenant!r}" if thread else f"tenant {tenant!r}"
    print(
        f"This destroys the key of {what}: its checkpoints, and every copy of them, can no"
        " longer be read. Type the tenant id to confirm: ",
        end="",
        file=sys.stderr,
        flush=True,
    )
    try:
        answer = sys.stdin.readline()
    except (OSError, ValueError):
        return False
    return answer.strip() == tenant


def run_shred(args: argparse.Namespace) -> int:
    from secure_serde import TenantKeys

    if not args.yes and not _confirmed(args.tenant, args.thread):
        print("secure-serde: nothing shredded (not confirmed)", file=sys.stderr)
        return 1
    with closing(TenantKeys.open(args.keys)) as keys:
        if args.thread is None:
            result = keys.shred(args.tenant)
        else:
            result = keys.shred_thread(args.tenant, args.thread)
    print(json.dumps(dict(zip(_JSON_NAMES, dataclasses.astuple(result), strict=True))))
    return 0
