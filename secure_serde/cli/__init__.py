"""The ``secure-serde`` console script: one module per subcommand.

No argument shaped like a key is printed back, by any command, in any output or error: `main`
applies that one rule to every argument. A subcommand's module (its ``register(parser)`` sets
``func``, which returns the exit code), and what it imports (the pass engine, a database
driver, KMS), is loaded only when that subcommand runs: ``--help`` lists the others by name
and summary alone, from `_SUBCOMMANDS`.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import importlib
import json
import os
import re
import sys
import traceback
from collections.abc import Collection, Iterable, Sequence
from typing import Any, Final, TextIO

from secure_serde._errors import SecureSerdeError

__all__ = [
    "NOT_SHOWN",
    "RedactingStream",
    "build_parser",
    "hidden_arguments",
    "is_key_shaped",
    "main",
    "option_strings",
]

# name -> one-line help (the only copy); NAME's module is secure_serde.cli._NAME.
_SUBCOMMANDS: Final = {
    "keygen": "print a new 256-bit key in the base64: form",
    "keyring": "create and edit a keyring file: add, promote, retire, drop, show",
    "rewrap": "re-encrypt every stored value under the current primary key",
    "audit": "report what a store holds unencrypted, under which keys, and what cannot be read",
    "inspect": "decrypt and show a checkpoint, or a thread's history, for time-travel debugging",
    "adopt": "copy a store secure_serde 0.3 or a stock saver wrote into a new sealed store",
    "tenants": "crypto-shred a tenant's (or one thread's) key in a tenant key store",
}


NOT_SHOWN: Final = "<argument not shown: it has the shape of a key>"
# As secure_serde.crypto._keys (not imported: the command's start-up stays light).
_KEY_SIZES: Final = frozenset({16, 24, 32})
_ENCODED_PREFIX: Final = "base64:"
_HEX: Final = re.compile(r"[0-9a-fA-F]+")
_BASE64: Final = re.compile(r"[A-Za-z0-9+/]+={0,2}|[A-Za-z0-9_-]+={0,2}")


def is_key_shaped(text: str) -> bool:
    """True when ``text`` could be a key, in any form someone might paste one."""
    core = text.strip()
    if core.startswith(_ENCODED_PREFIX):
        return True
    if len(core.encode("utf-8", "surrogatepass")) in _KEY_SIZES:
        return True
    if _HEX.fullmatch(core) and len(core) % 2 == 0 and len(core) // 2 in _KEY_SIZES:
        return True
    if _BASE64.fullmatch(core):
        body = core.rstrip("=")
        padded = body + "=" * (-len(body) % 4)
        altchars = b"-_" if ("-" in body or "_" in body) else None
        try:
            decoded = base64.b64decode(padded, altchars=altchars, validate=True)
        except (binascii.Error, ValueError):
            return False
        return len(decoded) in _KEY_SIZES
    return False


def option_strings(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of ``parser`` and of the subcommand parsers under it."""
    found: set[str] = set()
    todo = [parser]
    while todo:
        current = todo.pop()
        for action in current._actions:
            found.update(action.option_strings)
            if isinstance(action, argparse._SubParsersAction):
                todo.extend(action.choices.values())
    return found


def hidden_arguments(argv: Iterable[str], options: Collection[str]) -> list[str]:
    """The arguments of ``argv`` that must not be printed: each key-shaped one.

    ``--option=VALUE`` is looked at as its value, and the command's own
    option names (``options``) never count.
    """
    hidden = []
    for arg in argv:
        candidates = [arg]
        if arg.startswith("-") and "=" in arg:
            name, value = arg.split("=", 1)
            candidates = [value] if name in options else [arg, value]
        elif arg in options:
            continue
        hidden += [c for c in candidates if c.strip() and is_key_shaped(c)]
    return hidden


def _forms(text: str) -> set[str]:
    """The ways a message may quote ``text``: as typed, stripped, repr, JSON, terminal, path."""
    from secure_serde.cli._pretty import for_terminal

    forms = set()
    for value in {text, text.strip()}:
        forms |= {value, repr(value)[1:-1], json.dumps(value)[1:-1], for_terminal(value)}
        forms.add(json.dumps(value, ensure_ascii=False)[1:-1])
        if value and "\x00" not in value:
            forms.add(os.path.normpath(value))
    return {f for f in forms if f.strip()}


class RedactingStream:
    """A text stream that writes `NOT_SHOWN` in place of every form of the hidden arguments.

    Every other attribute (``fileno``, ``isatty``, ``flush``, ``encoding``)
    is the wrapped stream's. Each ``write`` is redacted on its own: the CLI
    writes every string through ``print``, ``json.dump`` or ``write``,
    which never split a string across calls.
    """

    def __init__(self, stream: TextIO, hidden: Iterable[str]) -> None:
        forms: set[str] = set()
        for text in hidden:
            forms |= _forms(text)
        # Longest first: a form inside a longer one must not leave the rest behind.
        self._forms = sorted(forms, key=len, reverse=True)
        self._stream = stream

    def write(self, text: str) -> int:
        shown = text
        for form in self._forms:
            shown = shown.replace(form, NOT_SHOWN)
        self._stream.write(shown)
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _VersionAction(argparse.Action):
    """The installed version, from the package metadata, read only when asked: importing
    `importlib.metadata` is slow, and every other command starts without it."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("secure-serde")
        except PackageNotFoundError:
            # Run from a source tree that was never installed: no metadata holds a version.
            parser.exit(2, f"{parser.prog}: error: not installed, so no version is known\n")
        sys.stdout.write(f"{parser.prog} {installed}\n")
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command's parser, with every subcommand in full (``only=None``) or only the one
    named ``only`` (none, for another string): ``--help`` and usage errors need no more."""
    parser = argparse.ArgumentParser(
        prog="secure-serde",
        description="Keys and stores for secure_serde-encrypted LangGraph checkpoints.",
    )
    parser.add_argument(
        "--version", action=_VersionAction, nargs=0, help="print the installed version and exit"
    )
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name, summary in _SUBCOMMANDS.items():
        sub = subparsers.add_parser(name, help=summary)
        if only is None or only == name:
            importlib.import_module(f"secure_serde.cli._{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    # The subcommand is the first argument: the command has no options of its
    # own but -h and --version.
    first = args_list[0] if args_list else ""
    only = first if first in _SUBCOMMANDS else ""
    parser = build_parser(only)
    hidden = hidden_arguments(args_list, option_strings(parser))
    if not hidden:
        return _run(parser, args_list)
    saved = sys.stdout, sys.stderr
    sys.stdout = RedactingStream(saved[0], hidden)
    sys.stderr = RedactingStream(saved[1], hidden)
    try:
        return _run(parser, args_list)
    except Exception:  # noqa: BLE001 - a crash's traceback is printed here, through the redaction
        traceback.print_exc()
        return 1
    finally:
        sys.stdout, sys.stderr = saved


def _run(parser: argparse.ArgumentParser, args_list: list[str]) -> int:
    args = parser.parse_args(args_list)
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
