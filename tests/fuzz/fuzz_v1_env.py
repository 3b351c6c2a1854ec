"""atheris harness for the ``v1_env`` target (see `tests.fuzz._targets.v1_env`)."""

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports(include=["secure_serde"]):
    from tests.fuzz._targets import v1_env

from tests.fuzz._harness import main

if __name__ == "__main__":
    main("v1_env", v1_env)
