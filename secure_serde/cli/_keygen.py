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
            " files accept. With --id, print it as a keyring file entry instead."
        ),
    )
    parser.add_argument("--id", dest="key_id", help="print as a keyring entry with this id")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    key = generate_encoded_key()
    if args.key_id is None:
        print(key)
    else:
        print(json.dumps({args.key_id: key}))
    return 0
