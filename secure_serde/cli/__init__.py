"""The ``secure-serde`` console script: one module per subcommand.

Each subcommand module exposes ``register(subparsers)``, which adds its
parser and sets ``func`` to a callable taking the parsed arguments and
returning the exit code.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from secure_serde import SecureSerdeError
from secure_serde.cli import _audit, _inspect, _keygen, _keyring, _rewrap

__all__ = ["build_parser", "main"]

_SUBCOMMANDS = (_keygen, _keyring, _rewrap, _audit, _inspect)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="secure-serde",
        description="Keys and stores for secure_serde-encrypted LangGraph checkpoints.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in _SUBCOMMANDS:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
        print(f"secure-serde: error: {exc}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
