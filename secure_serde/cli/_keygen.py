"""``secure-serde keygen``: print a new full-entropy key."""

from __future__ import annotations

import argparse
import json
from typing import Any

from secure_serde._keys import generate_encoded_key

__all__ = ["register"]


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "keygen",
        help="print a new 256-bit key in the base64: form",
        description=(
            "Print a new key from os.urandom in the form LANGGRAPH_AES_KEY and keyring"
            " files accept. With --id, print a complete keyring file whose primary is that"
            " key instead (or use 'secure-serde keyring new FILE --id ID', which writes it"
            " at mode 0600 without printing the key)."
        ),
    )
    parser.add_argument("--id", dest="key_id", help="print a keyring file with this key as primary")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    key = generate_encoded_key()
    if args.key_id is None:
        print(key)
    else:
        print(json.dumps({"primary": args.key_id, "keys": {args.key_id: key}}, indent=2))
    return 0
