"""The ``secure-serde`` console script: one module per subcommand.

Each subcommand module exposes ``register(subparsers)``, which adds its
parser and sets ``func`` to a callable taking the parsed arguments and
returning the exit code.

A subcommand's module, and what it imports (the rewrap engine, the stores, a
database driver, KMS), is loaded only when that subcommand runs: the others
appear in ``--help`` by name and summary alone, from `_SUBCOMMANDS`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Final

from secure_serde._errors import SecureSerdeError

__all__ = ["build_parser", "main"]

# name -> (module, one-line help); each help must equal the one its module's
# register() gives, which tests/test_import_light.py checks.
_SUBCOMMANDS: Final = {
    "keygen": ("secure_serde.cli._keygen", "print a new 256-bit key in the base64: form"),
    "keyring": (
        "secure_serde.cli._keyring",
        "create and edit a keyring file: add, promote, retire, drop, show",
    ),
    "rewrap": (
        "secure_serde.cli._rewrap",
        "re-encrypt every stored value under the current primary key (--bind: bind it to its row)",
    ),
    "audit": (
        "secure_serde.cli._audit",
        "report what a store holds unencrypted, under which keys, and what cannot be read",
    ),
    "inspect": (
        "secure_serde.cli._inspect",
        "decrypt and show a checkpoint, or a thread's history, for time-travel debugging",
    ),
}


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command's parser.

    With ``only`` a string, only the subcommand of that name (none, for any
    other string) has its module imported and its full parser; the others
    are listed by name and help, which is all ``--help`` and a usage error
    print. With ``None``, every subcommand is registered in full.
    """
    parser = argparse.ArgumentParser(
        prog="secure-serde",
        description="Keys and stores for secure_serde-encrypted LangGraph checkpoints.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name, (module, summary) in _SUBCOMMANDS.items():
        if only is None or only == name:
            importlib.import_module(module).register(subparsers)
        else:
            subparsers.add_parser(name, help=summary)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    # The subcommand is the first argument (the command has no options of its
    # own but -h); anything else is help or a usage error, which needs no module.
    first = args_list[0] if args_list else ""
    only = first if first in _SUBCOMMANDS else ""
    args = build_parser(only).parse_args(args_list)
    try:
        code: int = args.func(args)
    except BrokenPipeError:
        # `secure-serde inspect --json | head`: the reader left, which is not an error.
        # Point stdout at devnull so the interpreter's final flush does not raise again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except SecureSerdeError as exc:
        # Our messages never carry key bytes or plaintext, so they are safe to print.
        # for_terminal: a store-derived name in a message cannot hide lines with escapes.
        from secure_serde.cli._pretty import for_terminal

        print(f"secure-serde: error: {for_terminal(str(exc))}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
