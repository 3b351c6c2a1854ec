"""``secure-serde rewrap --bind``, removed in 0.4: a refusal that names ``secure-serde adopt``.

0.3's ``--bind`` bound a stock or 0.1 store's rows in place, and
``--seal-metadata`` (with ``--plaintext-metadata`` and
``--indexed-metadata``) sealed their metadata, for 0.3's sealed savers.
0.4 takes such a store into a `SealedSaver` with ``secure-serde adopt``,
which lists every row it cannot vouch for before anything is sealed. The
flags stay, hidden from ``--help``, for one minor version, so a script
that passes them fails before the store is opened with a message saying
what to run instead.
"""

from __future__ import annotations

import argparse
from typing import Final

from secure_serde import ConfigurationError

__all__ = ["REMOVED_FLAGS", "add_arguments", "check_options"]

# dest -> the flag as typed.
REMOVED_FLAGS: Final = {
    "bind": "--bind",
    "seal_metadata": "--seal-metadata",
    "plaintext_metadata": "--plaintext-metadata",
    "indexed_metadata": "--indexed-metadata",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The removed flags, hidden, so `check_options` can name them."""
    parser.add_argument("--bind", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seal-metadata", action="store_true", help=argparse.SUPPRESS)
    for flag in ("--plaintext-metadata", "--indexed-metadata"):
        parser.add_argument(flag, action="append", default=[], help=argparse.SUPPRESS)


def check_options(args: argparse.Namespace) -> None:
    """Refuse the removed flags, before the store is opened.

    Raises:
        ConfigurationError: one of them was given.
    """
    given = [flag for dest, flag in REMOVED_FLAGS.items() if getattr(args, dest)]
    if given:
        raise ConfigurationError(
            f"rewrap {' '.join(given)} was removed in secure_serde 0.4: take a store that a"
            " stock saver or secure_serde 0.1-0.3 wrote into a sealed one with"
            " `secure-serde adopt SOURCE TARGET` (docs/upgrading.md), then rewrap that"
        )
