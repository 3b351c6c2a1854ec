"""Argument types shared by the subcommands, and the rule that no key-shaped argument is echoed.

The rule (docs/cli.md, "Arguments shaped like a key are never printed") is
applied once, in `secure_serde.cli.main`, which holds it so that ``--help``
loads no subcommand module: `hidden_arguments` picks the key-shaped
arguments out of the command line before it is parsed, and `RedactingStream`
stands in for stdout and stderr while the command runs.
"""

from __future__ import annotations

import argparse

from secure_serde.cli import NOT_SHOWN, is_key_shaped

__all__ = ["check_label", "positive_int"]


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
    try:
        value = int(text)
    except ValueError:
        shown = NOT_SHOWN if is_key_shaped(text) else repr(text)
        raise argparse.ArgumentTypeError(f"not an integer: {shown}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value
