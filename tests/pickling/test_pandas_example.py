"""examples/pandas_state.py runs as documented, and shows only the DataFrame as a pickle."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pandas_state.py"


def test_pandas_example_runs_and_pickles_only_the_frame() -> None:
    env = {k: v for k, v in os.environ.items() if k != "LANGGRAPH_AES_KEY"}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "readings: PICKLE" in done.stdout
    assert "log: msgpack array" in done.stdout
    assert "Int64" in done.stdout
    assert "mean reading: 12.00" in done.stdout
