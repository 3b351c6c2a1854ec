"""atheris harness: ``secure-serde audit`` and ``inspect`` over damaged stores (`_cli.cli`)."""

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

# Only the CLI and the layers under it that no other harness covers are
# instrumented: the ciphers and serializers have harnesses of their own, and
# instrumenting them too would halve the speed of a harness that reads a
# whole store per input.
with atheris.instrument_imports(
    include=["secure_serde.cli", "secure_serde.stores", "secure_serde.passes"]
):
    from tests.fuzz._cli import cli

from tests.fuzz._harness import main

if __name__ == "__main__":
    main("cli", cli)
