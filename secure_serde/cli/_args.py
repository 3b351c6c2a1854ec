"""Argument types shared by the subcommands, and the rule that no key-shaped argument is echoed.

The rule, for every argument of every command: a value shaped like a key
is never printed back, in any output or error. *Key-shaped* (see
`is_key_shaped`) is anything `secure_serde._keys.parse_key` would accept
(16, 24 or 32 bytes of text, or ``base64:...``), whitespace around it
ignored, and the hex or base64 (standard or URL-safe, padded or not) of
16, 24 or 32 bytes. The command's own option names are never key-shaped.

It is applied once, in `secure_serde.cli.main` (which holds the rule, so
that ``--help`` loads no subcommand module): `hidden_arguments` picks the
key-shaped arguments out of the command line before it is parsed, and
`RedactingStream` stands in for stdout and stderr while the command runs,
so argparse's usage errors, every subcommand's output and errors, logged
warnings and a traceback all print `NOT_SHOWN` in place of each such
argument, in every form a message quotes it (as typed, ``repr``, JSON or
terminal escapes, as a path).
"""

from __future__ import annotations

import argparse

from secure_serde.cli import NOT_SHOWN, is_key_shaped

__all__ = ["check_label", "positive_int", "shown_argument"]


def shown_argument(text: str) -> str:
    """``text`` for a message: its ``repr``, or `NOT_SHOWN` when it is key-shaped."""
    return NOT_SHOWN if is_key_shaped(text) else repr(text)


def check_label(label: str) -> str:
    """``label``, or `ConfigurationError` when it is key-shaped: labels are printed everywhere."""
    if is_key_shaped(label):
        from secure_serde._errors import ConfigurationError

        raise ConfigurationError(
            "the label has the shape of a key (16, 24 or 32 bytes of text, 'base64:...', or"
            " the hex or base64 of 16, 24 or 32 bytes), so it is not shown and not accepted:"
            " labels are printed by show, audit and every message that names a key. Use a"
            " short label such as '2025-06'"
        )
    return label


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {shown_argument(text)}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
