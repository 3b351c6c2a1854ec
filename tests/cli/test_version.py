"""``secure-serde --version`` and ``secure_serde.__version__``: one version, pyproject.toml's."""

from __future__ import annotations

import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest

import secure_serde
from secure_serde.cli import main
from tests.cli.cli_support import run_console_script

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_installed_metadata_is_pyproject_s_version() -> None:
    # A stale install (pyproject bumped, package not reinstalled) fails here, not in a user's hands.
    assert version("secure-serde") == PYPROJECT


def test_the_package_version_is_the_installed_one() -> None:
    assert secure_serde.__version__ == PYPROJECT
    assert "__version__" in dir(secure_serde)


def test_version_flag_prints_the_version_on_stdout_and_exits_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    out, err = capsys.readouterr()
    assert out == f"secure-serde {PYPROJECT}\n"
    assert err == ""


def test_version_flag_of_the_console_script() -> None:
    done = run_console_script("--version", env={})
    assert (done.returncode, done.stdout, done.stderr) == (0, f"secure-serde {PYPROJECT}\n", "")


def test_version_is_listed_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "--version" in capsys.readouterr().out


def test_the_version_is_read_only_when_asked() -> None:
    # importlib.metadata is not part of `import secure_serde`'s cost (tests/test_import_light.py).
    import subprocess

    code = (
        "import sys, secure_serde, secure_serde.cli; print('secure_serde._version' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"


def test_a_source_tree_never_installed_says_so(tmp_path: Path) -> None:
    import shutil
    import subprocess

    # The package alone, on an interpreter without site-packages: no metadata names a version.
    shutil.copytree(ROOT / "secure_serde", tmp_path / "secure_serde")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        " from secure_serde.cli import main; main(['--version'])"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "secure-serde: error: not installed, so no version is known\n"
