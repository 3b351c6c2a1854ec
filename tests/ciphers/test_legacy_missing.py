"""Without pycryptodome, the drop-in works for new rows and says so once, at the first legacy row.

Issue 22 (item 7): the warning used to fire at every construction, so every
run of every process logged it, with or without a single legacy row in the
store. It now fires once per process, when a legacy ``+aes`` row is actually
met, and every such row still raises `DecryptionError` with the install hint.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import logging, sys
    # As if pycryptodome were not installed: its import fails.
    sys.modules["Crypto"] = None
    # One stream, so the log lines fall in order between the prints.
    logging.basicConfig(stream=sys.stdout, level=logging.WARNING, format="LOG %(message)s")
    from secure_serde import DecryptionError, EncryptedSerializer
    from secure_serde.ciphers import EnvKeyCipher, KeyRotationCipher

    KEY = "0123456789abcdef0123456789abcdef"
    serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    EnvKeyCipher(KEY)
    KeyRotationCipher({"env": KEY}, "env", legacy_key="env")
    print("built", flush=True)
    assert serde.loads_typed(serde.dumps_typed({"a": 1})) == {"a": 1}
    print("v1 round trip", flush=True)
    for reader in (serde, EncryptedSerializer.from_pycryptodome_aes(key=KEY)):
        for _ in range(2):
            try:
                reader.loads_typed(("msgpack+aes", bytes(64)))
            except DecryptionError as exc:
                print("legacy row:", exc, flush=True)
    EnvKeyCipher(key=KEY, legacy_mode=None)
    print("done", flush=True)
    """
)

HINT = "pip install 'secure-serde[pycryptodome]'"


def test_missing_pycryptodome_warns_once_at_the_first_legacy_row() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # Nothing is logged while no legacy row has been met: building, and new rows.
    assert lines[:2] == ["built", "v1 round trip"], lines
    logged = [i for i, line in enumerate(lines) if line.startswith("LOG") and HINT in line]
    assert len(logged) == 1, lines
    rows = [i for i, line in enumerate(lines) if line.startswith("legacy row:")]
    assert len(rows) == 4, lines
    # Logged when the first row was met, before its error was printed.
    assert logged[0] < rows[0]
    # Every legacy row says what is missing, and how to install it.
    for i in rows:
        assert "needs pycryptodome" in lines[i]
        assert HINT in lines[i]
    assert lines[-1] == "done"


def test_a_run_that_meets_no_legacy_row_logs_nothing() -> None:
    script = SCRIPT.split('print("v1 round trip", flush=True)')[0] + 'print("end")\n'
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["built", "end"]
    assert HINT not in done.stderr
