"""``secure-serde keygen``: print a new full-entropy key."""

from __future__ import annotations

import argparse
import json

from secure_serde.crypto import generate_encoded_key

__all__ = ["register"]


def register(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Print a new key from os.urandom in the form LANGGRAPH_AES_KEY and keyring"
        " files accept. With --label, print a complete keyring file whose primary is that"
        " key, under that label, instead (or use 'secure-serde keyring new FILE --label"
        " LABEL', which writes it at mode 0600 without printing the key)."
    )
    parser.add_argument(
        "--label",
        metavar="LABEL",
        help="print a keyring file with this key as primary, under this label",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.label is not None:
        # Imported here: a bare `keygen` loads no module but its own (tests/test_import_light.py).
        from secure_serde.cli._args import check_label

        check_label(args.label)
    key = generate_encoded_key()
    if args.label is None:
        print(key)
    else:
        print(json.dumps({"primary": args.label, "keys": {args.label: key}}, indent=2))
    return 0
