"""``secure-serde keyring`` on the files deployments really have (issue 22, item 4).

A keyring is often a symbolic link into a secrets mount. Every edit must
change the file the link points to, atomically, and leave the link a link;
an edit that cannot reach the file is refused with `KeyringFileError`, and
no edit (``drop`` above all) reports success while the keyring that the
path reads is unchanged. ``show --reveal`` refuses a keyring that group or
others may read, as ssh refuses such a private key, and names the chmod
that fixes it. Hostile keyring files get typed errors from every command.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from secure_serde._errors import KeyringFileError
from secure_serde.ciphers import KeyRotationCipher
from tests.cli.cli_support import run_main


@pytest.fixture
def secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder standing in for a secrets mount, with a keyring 'a' (primary) and 'b'."""
    monkeypatch.delenv("LANGGRAPH_AES_KEY", raising=False)
    monkeypatch.delenv("SECURE_SERDE_KEYRING_STRICT_MODES", raising=False)
    folder = tmp_path / "mount"
    folder.mkdir()
    real = folder / "keyring.json"
    assert main_ok("keyring", "new", str(real), "--label", "a")
    assert main_ok("keyring", "add", str(real), "--label", "b")
    return real


def main_ok(*argv: str) -> bool:
    from secure_serde.cli import main

    return main(list(argv)) == 0


def _loaded(path: Path) -> dict[str, Any]:
    config: dict[str, Any] = json.loads(path.read_text())
    return config


def _link(tmp_path: Path, target: Path, *, relative: bool = False) -> Path:
    app = tmp_path / "app"
    app.mkdir(exist_ok=True)
    link = app / "keyring.json"
    link.symlink_to(os.path.relpath(target, app) if relative else target)
    return link


# -- edits through a symbolic link ---------------------------------------------------------------

EDITS = [
    (("add", "--label", "c"), lambda c: "c" in c["keys"]),
    (("promote", "b"), lambda c: c["primary"] == "b"),
    (("retire", "b"), lambda c: c["retired"] == ["b"]),
]


@pytest.mark.parametrize("relative", [False, True])
@pytest.mark.parametrize(("argv", "done"), EDITS)
def test_an_edit_through_a_link_changes_the_target_and_keeps_the_link(
    secrets: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    done: Any,
    relative: bool,
) -> None:
    link = _link(tmp_path, secrets, relative=relative)
    before = os.readlink(link)
    action, *rest = argv
    code, _, err = run_main(capsys, "keyring", action, str(link), *rest)
    assert code == 0, err
    assert link.is_symlink()
    assert os.readlink(link) == before
    assert done(_loaded(secrets))
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
    # No temporary or lock file is left beside the link, and none in the mount but the lock.
    assert sorted(p.name for p in link.parent.iterdir()) == ["keyring.json"]
    assert not [p for p in secrets.parent.iterdir() if p.name.endswith(".tmp")]


def test_drop_through_a_link_destroys_the_key_in_the_target(
    secrets: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = _link(tmp_path, secrets)
    dropped = _loaded(secrets)["keys"]["b"]
    assert run_main(capsys, "keyring", "retire", str(link), "b")[0] == 0
    code, out, err = run_main(capsys, "keyring", "drop", str(link), "b")
    assert code == 0, err
    assert "gone" in out
    assert link.is_symlink()
    assert set(_loaded(secrets)["keys"]) == {"a"}
    assert dropped not in secrets.read_text()
    assert dropped not in link.read_text()


def test_a_chain_of_links_is_followed_to_the_file(
    secrets: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Kubernetes' secret volumes: name -> ..data/name, ..data -> a timestamped folder.
    mount = tmp_path / "k8s"
    mount.mkdir()
    (mount / "..data").symlink_to(secrets.parent)
    (mount / "keyring.json").symlink_to("..data/keyring.json")
    link = _link(tmp_path, mount / "keyring.json")
    assert run_main(capsys, "keyring", "promote", str(link), "b")[0] == 0
    assert _loaded(secrets)["primary"] == "b"
    assert link.is_symlink()
    assert (mount / "keyring.json").is_symlink()


def test_the_application_reads_what_an_edit_through_a_link_wrote(
    secrets: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    link = _link(tmp_path, secrets)
    monkeypatch.setenv("SECURE_SERDE_KEYRING_FILE", str(link))
    assert run_main(capsys, "keyring", "promote", str(link), "b")[0] == 0
    assert KeyRotationCipher.from_env().primary_label == "b"


@pytest.mark.parametrize("action", ["add", "new"])
def test_a_dangling_link_is_refused_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], action: str
) -> None:
    link = _link(tmp_path, tmp_path / "missing" / "keyring.json")
    code, out, err = run_main(capsys, "keyring", action, str(link), "--label", "x")
    assert code == 2
    assert "symbolic link" in err
    assert "KeyringFileError" not in err  # the message, not the class, explains it
    assert link.is_symlink()
    assert not (tmp_path / "missing").exists()
    assert "Traceback" not in out + err


def test_a_link_to_something_other_than_a_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    link = _link(tmp_path, folder)
    code, _, err = run_main(capsys, "keyring", "promote", str(link), "a")
    assert code == 2
    assert "not a regular file" in err or "cannot read" in err
    assert link.is_symlink()


def test_a_hard_linked_keyring_is_refused_before_any_edit(
    secrets: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A second name for the same file would keep the old keys after the rename:
    # 'drop' would report success while the key lives on under that name.
    assert run_main(capsys, "keyring", "retire", str(secrets), "b")[0] == 0
    other = tmp_path / "copy.json"
    os.link(secrets, other)
    before = secrets.read_bytes()
    code, _, err = run_main(capsys, "keyring", "drop", str(secrets), "b")
    assert code == 2
    assert "hard link" in err
    assert secrets.read_bytes() == before
    assert other.read_bytes() == before


def test_the_edit_api_raises_the_typed_error(tmp_path: Path) -> None:
    from secure_serde.ciphers import KeyringFile

    link = _link(tmp_path, tmp_path / "missing.json")
    with pytest.raises(KeyringFileError):
        _ = KeyringFile(link).target


# -- show --reveal on a keyring others may read ------------------------------------------------


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o620, 0o660])
def test_reveal_refuses_a_keyring_others_may_read(
    secrets: Path, capsys: pytest.CaptureFixture[str], mode: int
) -> None:
    keys = _loaded(secrets)["keys"].values()
    secrets.chmod(mode)
    code, out, err = run_main(capsys, "keyring", "show", str(secrets), "--reveal")
    assert code == 2
    assert f"chmod 600 {secrets}" in err
    assert f"{mode:04o}" in err
    for key in keys:
        assert key not in out + err
    # Without --reveal nothing secret is printed, so the listing still works.
    code, out, _ = run_main(capsys, "keyring", "show", str(secrets))
    assert code == 0
    assert "primary" in out


def test_reveal_through_a_link_checks_the_target(
    secrets: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    link = _link(tmp_path, secrets)
    secrets.chmod(0o644)
    code, out, err = run_main(capsys, "keyring", "show", str(link), "--reveal")
    assert code == 2
    assert "chmod 600" in err
    for key in _loaded(secrets)["keys"].values():
        assert key not in out
    secrets.chmod(0o600)
    code, out, _ = run_main(capsys, "keyring", "show", str(link), "--reveal")
    assert code == 0
    for key in _loaded(secrets)["keys"].values():
        assert key in out


# -- hostile keyring files ---------------------------------------------------------------------

HOSTILE: list[str | bytes] = [
    '{"primary": [], "keys": {}}',
    '{"retired": 5, "keys": {}}',
    '{"retired": [[]], "keys": {}}',
    '{"keys": {"a": 5}, "primary": "a"}',
    '{"keys": [], "primary": "a"}',
    '{"keys": {"a": "0123456789abcdef"}, "primary": "a", "legacy_key": {}}',
    '{"keys": {"a": "0123456789abcdef"}, "primary": "a", "legacy_mode": []}',
    '{"keys": {"a": "0123456789abcdef"}, "primary": "a", "legacy_mode": "ctr"}',
    "[" * 100_000 + "]" * 100_000,
    '{"keys": ' * 50_000,
    b"\xff\xfe{}",
    "",
]


@pytest.mark.parametrize("content", HOSTILE)
@pytest.mark.parametrize(
    "argv", [("show",), ("show", "--reveal"), ("add", "--label", "z"), ("promote", "a")]
)
def test_hostile_keyring_files_get_a_typed_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | bytes, argv: tuple[str, ...]
) -> None:
    path = tmp_path / "keyring.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    path.chmod(0o600)
    before = path.read_bytes()
    action, *rest = argv
    code, out, err = run_main(capsys, "keyring", action, str(path), *rest)
    assert code == 2, out + err
    assert err.startswith("secure-serde: error:")
    assert path.read_bytes() == before
