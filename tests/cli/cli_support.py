"""Running the ``secure-serde`` CLI in tests: in-process through ``main`` and as the installed
console script in a real subprocess."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from secure_serde.cli import main

# Every variable the CLI (through `secure_serde.config`) reads keys from.
KEY_VARIABLES: Final = (
    "LANGGRAPH_AES_KEY",
    "SECURE_SERDE_KEYRING_FILE",
    "SECURE_SERDE_KMS_KEY",
    "SECURE_SERDE_KMS_DECRYPT_KEYS",
    "SECURE_SERDE_KMS_KEY_ID",  # 0.3's names, still read
    "SECURE_SERDE_KMS_DECRYPT_KEY_IDS",
    "SECURE_SERDE_KMS_ENCRYPTION_CONTEXT",
)


def only_env_key(monkeypatch: pytest.MonkeyPatch, key: str | None) -> None:
    """Unset every key variable of this process, then set ``LANGGRAPH_AES_KEY`` to ``key``
    (unless None): whatever the machine has configured, a test sees only its own keys."""
    for name in KEY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    if key is not None:
        monkeypatch.setenv("LANGGRAPH_AES_KEY", key)


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``secure-serde ARGV`` in this process: exit code, stdout, stderr."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _pythonpath() -> dict[str, str]:
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": path} if path else {}


def run_console_script(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The ``secure-serde`` script installed beside this interpreter, with only ``env`` set
    (plus a PATH to the interpreter's directory)."""
    bindir = str(Path(sys.executable).parent)
    script = shutil.which("secure-serde", path=bindir)
    assert script is not None, f"no secure-serde console script in {bindir}"
    return subprocess.run(
        [script, *argv],
        # PYTHONPATH passes through, so a checkout run ahead of the installed package
        # tests its own code.
        env={"PATH": bindir, **_pythonpath(), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
