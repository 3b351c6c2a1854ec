"""Without pycryptodome, the drop-in says so when it is built, and still works for new rows."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import logging, sys
    # As if pycryptodome were not installed: its import fails.
    sys.modules["Crypto"] = None
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    from secure_serde import DecryptionError, EncryptedSerializer
    from secure_serde.ciphers import EnvKeyCipher

    serde = EncryptedSerializer.from_pycryptodome_aes(key="0123456789abcdef0123456789abcdef")
    print("built")
    assert serde.loads_typed(serde.dumps_typed({"a": 1})) == {"a": 1}
    print("v1 round trip")
    try:
        serde.loads_typed(("msgpack+aes", bytes(64)))
    except DecryptionError as exc:
        print("legacy row:", exc)
    EnvKeyCipher(key="0123456789abcdef0123456789abcdef", legacy_mode=None)
    print("no legacy reader built")
    """
)


def test_missing_pycryptodome_is_reported_at_construction_with_the_install_hint() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["built", "v1 round trip"]
    hint = "pip install 'secure-serde[pycryptodome]'"
    warnings = [line for line in done.stderr.splitlines() if hint in line]
    # One warning, from the construction, and none for legacy_mode=None.
    assert len(warnings) == 1
    assert "needs pycryptodome" in lines[2]
    assert lines[3] == "no legacy reader built"
