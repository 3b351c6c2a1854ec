"""atheris harness for `tests.fuzz._targets.pickle_fallback`."""

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

with atheris.instrument_imports(include=["secure_serde"]):
    from tests.fuzz._targets import pickle_fallback

from tests.fuzz._harness import main

if __name__ == "__main__":
    main("pickle_fallback", pickle_fallback)
