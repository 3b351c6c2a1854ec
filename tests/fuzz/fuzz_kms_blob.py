"""atheris harness for the ``kms_blob`` target (see `tests.fuzz._targets.kms_blob`)."""

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports(include=["secure_serde"]):
    from tests.fuzz._targets import kms_blob

from tests.fuzz._harness import main

if __name__ == "__main__":
    main("kms_blob", kms_blob)
