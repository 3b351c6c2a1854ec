"""atheris harness for the ``legacy_aes`` target (see `tests.fuzz._targets.legacy_aes`)."""

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports(include=["secure_serde"]):
    from tests.fuzz._targets import legacy_aes

from tests.fuzz._harness import main

if __name__ == "__main__":
    main("legacy_aes", legacy_aes)
