"""Run a report function in a fresh interpreter with ``LANGGRAPH_STRICT_MSGPACK=true``.

langgraph reads that variable once, when it is imported, so a test process that has already
imported langgraph cannot switch strict mode on: the scenario runs in a child Python instead.
The child imports the named function from the repository, calls it, and prints its JSON-able
report on one marked line, which `run_strict_report` reads back.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
_MARK: Final = "REPORT="


@dataclass(frozen=True)
class StrictRun:
    """What the child printed as its report, and what it wrote to stderr (its log, if any)."""

    report: dict[str, Any]
    stderr: str


def run_strict_report(
    module: str, function: str, *, log_warnings: bool = False, timeout: float = 120
) -> StrictRun:
    """Call ``module.function()`` in a strict-msgpack child process and return its report.

    The child gets no ``LANGGRAPH_AES_KEY`` (a report names its keys itself). With
    ``log_warnings`` the child's root logger prints warnings to stderr, for tests that check
    langgraph's own warnings there. Fails unless the child exits cleanly and strict mode was on.
    """
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true", "PYTHONPATH": str(REPO_ROOT)}
    env.pop("LANGGRAPH_AES_KEY", None)
    logging_setup = (
        "import logging\nlogging.basicConfig(level=logging.WARNING)\n" if log_warnings else ""
    )
    script = (
        f"import json\n{logging_setup}"
        f"from {module} import {function}\n"
        f"print({_MARK!r} + json.dumps({function}()))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith(_MARK)]
    report: dict[str, Any] = json.loads(line.removeprefix(_MARK))
    assert report["strict"] is True
    return StrictRun(report=report, stderr=proc.stderr)


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.name}: {record.getMessage()}")


@contextmanager
def collected_warnings() -> Iterator[list[str]]:
    """Warnings logged anywhere while the block runs, as ``"logger name: message"`` lines.

    For report functions: the warnings langgraph logs when a serializer loses the allowlist
    are what the strict-mode tests look for.
    """
    root = logging.getLogger()
    root.setLevel(logging.WARNING)
    handler = _Collect()
    root.addHandler(handler)
    try:
        yield handler.messages
    finally:
        root.removeHandler(handler)
