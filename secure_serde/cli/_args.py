"""What the subcommands' parsers share: option tables, argument types, and key-shaped labels.

No key-shaped argument is echoed: `secure_serde.cli` applies that rule to every argument.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any, Final

from secure_serde.cli import NOT_SHOWN, is_key_shaped

__all__ = ["JSON", "STORE", "TENANT_KEYS", "check_label", "define", "positive_int"]

STORE: Final = "a SQLite file path or a postgresql:// URL"
JSON: Final = "print one JSON object"
TENANT_KEYS: Final = (
    "the tenant key store (a SQLite path or a postgresql:// URL) of a store written by"
    " SealedSaver(..., tenant_keys=...): "
)


def define(
    parser: argparse.ArgumentParser,
    run: Callable[[argparse.Namespace], int],
    description: str,
    options: Mapping[str, str | Mapping[str, Any]],
    epilog: str | None = None,
) -> None:
    """A subcommand's parser; an option given by its help alone is a flag (or a positional)."""
    parser.description, parser.epilog = description, epilog
    for name, spec in options.items():
        if isinstance(spec, str):
            spec = {"help": spec, **({"action": "store_true"} if name[0] == "-" else {})}
        parser.add_argument(name, **spec)
    parser.set_defaults(func=run)


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
