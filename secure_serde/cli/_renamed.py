"""Command-line options kept under their 0.2.0 names for one release.

``--id`` named a key's *label* (docs/keys.md, "Glossary"), while "key id"
elsewhere means the 4-byte id in a ciphertext header; the option is now
``--label``. The old spelling still works, is hidden from ``--help``, and
says on stderr what to type instead.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["add_label_option"]


class _RenamedOption(argparse.Action):
    """Stores like the option it was renamed to, after a warning on stderr."""

    def __init__(self, *args: Any, replacement: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.replacement = replacement

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        print(
            f"secure-serde: warning: {option_string} is deprecated; use {self.replacement}",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def add_label_option(parser: argparse.ArgumentParser, help_text: str, *, required: bool) -> None:
    """``--label LABEL`` (into ``args.label``), with ``--id`` as its hidden old name."""
    # One of the two, never both: a mutually exclusive group, required when the label is.
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("--label", dest="label", metavar="LABEL", help=help_text)
    group.add_argument(
        "--id",
        dest="label",
        metavar="LABEL",
        help=argparse.SUPPRESS,
        action=_RenamedOption,
        replacement="--label",
    )
