"""atheris harness for the ``keyring_json`` target (see `tests.fuzz._targets.keyring_json`)."""

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports(include=["secure_serde"]):
    from tests.fuzz._targets import keyring_json

from tests.fuzz._harness import main

if __name__ == "__main__":
    main("keyring_json", keyring_json)
