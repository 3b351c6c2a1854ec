"""``rewrap --bind`` and its options were removed in 0.4: each is refused, naming ``adopt``.

The store is never opened: the refusal comes before the keys or the store are read, so a
script that still passes a 0.3 flag fails with the command to run instead, and the store
file is left exactly as it was.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.cli_support import run_main

FLAGS = [
    ["--bind"],
    ["--bind", "--seal-metadata"],
    ["--seal-metadata"],
    ["--bind", "--seal-metadata", "--plaintext-metadata", "tenant"],
    ["--indexed-metadata", "user_id"],
]


@pytest.mark.parametrize("flags", FLAGS, ids=lambda f: " ".join(f))
def test_removed_bind_flags_are_refused_naming_adopt(
    flags: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("LANGGRAPH_AES_KEY", "k" * 32)
    store = tmp_path / "store.sqlite"
    store.write_bytes(b"not touched")
    code, out, err = run_main(capsys, "rewrap", str(store), *flags)
    assert code == 2
    assert out == ""
    assert "secure-serde adopt" in err
    for flag in flags:
        if flag.startswith("--"):
            assert flag in err
    assert store.read_bytes() == b"not touched"


def test_the_removed_flags_are_hidden_from_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run_main(capsys, "rewrap", "--help")
    out = capsys.readouterr().out
    assert "--dry-run" in out
    for flag in ("--bind", "--seal-metadata", "--plaintext-metadata", "--indexed-metadata"):
        assert flag not in out
