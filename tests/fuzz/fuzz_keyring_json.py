"""atheris harness for the keyring JSON parsers: the application's and the CLI's.

Each input is one keyring file (and a set, fuzzed or absent
``LANGGRAPH_AES_KEY``), read by `KeyRotationCipher.from_env` through the
``keyring_json`` target (see `tests.fuzz._targets.keyring_json`), then by
``secure-serde keyring``: ``show``, ``show --reveal`` and an edit
(``add``, ``promote`` or ``retire``, chosen by the input's last byte), run
through the subcommand's own entry point with its output discarded. Only
`SecureSerdeError` may escape; an edit that succeeds must leave a file that
the application loads.
"""

import argparse
import contextlib
import io
import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports(include=["secure_serde"]):
    from secure_serde import SecureSerdeError
    from secure_serde.cli import _keyring as cli_keyring
    from tests.fuzz import _targets
    from tests.fuzz._targets import keyring_json

from tests.fuzz._harness import main

_EDITS = (("add", "fuzz-new"), ("promote", "a"), ("retire", "a"), ("drop", "a"))


def _cli(data: bytes) -> None:
    path = _targets._KEYRING_FILE
    path.write_bytes(data[1:])
    path.chmod(0o600)
    action, label = _EDITS[data[-1] % len(_EDITS)] if data else _EDITS[0]
    runs = [
        argparse.Namespace(action="show", file=path, reveal=False),
        argparse.Namespace(action="show", file=path, reveal=True),
        argparse.Namespace(action=action, file=path, label=label),
    ]
    for args in runs:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SecureSerdeError):
            cli_keyring.run(args)
    # Whatever the edit left must still be a keyring the CLI reads, or refuses by type.
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SecureSerdeError):
        cli_keyring.run(argparse.Namespace(action="show", file=path, reveal=False))


def target(data: bytes) -> None:
    keyring_json(data)
    _cli(data)


if __name__ == "__main__":
    main("keyring_json", target)
