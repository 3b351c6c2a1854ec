"""``secure-serde keyring``: the staged rotation runbook (its description) as commands on a
keyring file, each stage a `secure_serde.ciphers.KeyringFile` edit, which validates it and
writes it atomically at mode 0600 under a lock (docs/cli.md, "secure-serde keyring").
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Final

from secure_serde._scrub import scrubbed
from secure_serde.ciphers import KeyringFile
from secure_serde.cli._args import check_label

__all__ = ["register"]

_REVEAL: Final[dict[str, Any]] = {"action": "store_true", "help": "also print the keys themselves"}
# What each edit prints; ``old`` is the primary before it.
_DONE: Final = {
    "add": "added key {label!r}; it only decrypts. Deploy this file everywhere, then run"
    " 'secure-serde keyring promote FILE {label}'",
    "promote": "key {label!r} is now the primary (was {old!r}). Deploy, run 'secure-serde"
    " rewrap', then retire {old!r}",
    "retire": "key {label!r} is retired: rows under it are now refused, naming it",
    "drop": "key {label!r} is gone from the file; rows still under it can never be read",
}


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Edit the JSON keyring file that SECURE_SERDE_KEYRING_FILE names, one rotation"
        " stage per command: add (decrypt only) -> deploy -> promote -> secure-serde"
        " rewrap -> retire -> drop. Edits are atomic, the file is kept at mode 0600,"
        " and keys are never printed unless 'show --reveal' asks."
    )
    actions = parser.add_subparsers(dest="action", required=True)
    new = {"metavar": "LABEL", "required": True, "help": "the new key's label, such as 2025-06"}
    old = {"help": "the key's label"}
    for name, text, argument, spec in (
        ("new", "create a keyring file with one new primary key", "--label", new),
        ("add", "add a new random key that only decrypts", "--label", new),
        ("promote", "make a key the primary: new rows are encrypted under it", "label", old),
        ("retire", "stop a key from decrypting: its rows are refused, naming it", "label", old),
        ("drop", "remove a retired key from the file for good", "label", old),
        ("show", "list the labels, roles and key ids", "--reveal", _REVEAL),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("file", type=Path)
        action.add_argument(argument, **spec)
    parser.set_defaults(func=run)


@scrubbed  # show --reveal holds keys: no error leaves them in a frame local
def run(args: argparse.Namespace) -> int:
    keyring = KeyringFile(args.file)
    if args.action == "show":
        entries, legacy_key = keyring.entries(reveal=args.reveal)
        print(f"{args.file}:")
        for entry in entries:
            line = f"  {entry.label:<20} {entry.role:<13} key id {entry.key_id}"
            print(f"{line}  {entry.key}" if args.reveal else line)
        if legacy_key:
            print(f"  legacy '+aes' rows are read with key {legacy_key!r}")
        return 0
    if args.action in ("new", "add"):
        check_label(args.label)
    if args.action == "new":
        keyring.create(args.label)
        print(f"created {args.file} (mode 0600) with primary key {args.label!r}")
        print(f"point the application at it: SECURE_SERDE_KEYRING_FILE={args.file}")
    else:
        print(
            _DONE[args.action].format(label=args.label, old=keyring.edit(args.action, args.label))
        )
    return 0
