"""atheris harness for ``secure-serde audit`` and ``inspect`` over damaged SQLite stores (`tests.fuzz._cli.cli`)."""

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports(include=["secure_serde"]):
    from tests.fuzz._cli import cli

from tests.fuzz._harness import main

if __name__ == "__main__":
    main("cli", cli)
