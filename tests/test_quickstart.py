"""examples/quickstart.py, the README's first command: it resumes, and never loses a store."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import TypedDict

import pytest

from tests.graphs_support import linear_graph

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "examples" / "quickstart.py"


class _Turn(TypedDict):
    n: int


def _turn(state: _Turn) -> _Turn:
    return {"n": state["n"] + 1}


def _run(demo_dir: Path, *args: str, key: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SECURE_SERDE_DEMO_DIR": str(demo_dir)}
    env.pop("LANGGRAPH_AES_KEY", None)
    if key is not None:
        env["LANGGRAPH_AES_KEY"] = key
    return subprocess.run(
        [sys.executable, str(QUICKSTART), *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def first_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A demo folder after one complete first run, and what that run printed."""
    folder = tmp_path_factory.mktemp("demo")
    done = _run(folder)
    assert done.returncode == 0, done.stderr
    assert "New database" in done.stdout
    return folder, done.stdout


@pytest.fixture(scope="module")
def demo(first_run: tuple[Path, str]) -> Path:
    return first_run[0]


def test_second_run_resumes_the_encrypted_thread(demo: Path) -> None:
    before = (demo / "quickstart.sqlite").stat().st_size
    done = _run(demo)
    assert done.returncode == 0, done.stderr
    assert "Resuming the encrypted thread" in done.stdout
    assert "New database" not in done.stdout
    # The answer can only come from the history the first run stored.
    assert "Your project codename is REDKITE" in done.stdout
    assert (demo / "quickstart.sqlite").stat().st_size > before


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("short", "Cannot use the key"),
        ("base64:" + "A" * 43 + "=", "written under another key"),
    ],
)
def test_a_bad_or_other_key_leaves_the_store_untouched(demo: Path, key: str, message: str) -> None:
    db = demo / "quickstart.sqlite"
    before = db.read_bytes()
    done = _run(demo, key=key)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert db.read_bytes() == before
    assert key not in done.stdout + done.stderr


def test_the_printed_audit_command_runs_as_printed(first_run: tuple[Path, str]) -> None:
    """The line the demo prints, pasted into a shell at the repository root, no venv active."""
    demo, printed = first_run
    key = (demo / "demo.key").read_text().strip()
    (command,) = [line.strip() for line in printed.splitlines() if " audit " in line]
    assert command.startswith("LANGGRAPH_AES_KEY=$(cat ")  # the key is never printed
    bindir = str(Path(sys.executable).parent)
    path = os.pathsep.join(
        entry for entry in os.environ.get("PATH", "").split(os.pathsep) if entry != bindir
    )
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "LANGGRAPH_AES_KEY")}
    done = subprocess.run(
        ["bash", "-c", command],
        cwd=ROOT,
        env={**env, "PATH": path},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert key not in done.stdout + done.stderr
    # The demo runs on the sealed saver: every checkpoint opens at its place, under the
    # primary key, and the email LangGraph copied from the config is sealed in the records.
    assert "sealed by SealedSaver" in done.stdout
    assert "every checkpoint opens" in done.stdout
    assert re.search(r"under the primary key: ([1-9][\d,]*) of \1 cells", done.stdout), done.stdout
    assert b"ada@example.com" not in (demo / "quickstart.sqlite").read_bytes()


def test_a_store_of_the_unbound_demo_is_refused_with_the_way_forward(tmp_path: Path) -> None:
    """A demo folder written before 0.4 (no store identity): kept, and `adopt` named."""
    from langgraph.checkpoint.sqlite import SqliteSaver as StockSaver

    from secure_serde import EncryptedSerializer
    from secure_serde.ciphers import EnvKeyCipher

    key = "base64:" + "B" * 43 + "="
    db = tmp_path / "quickstart.sqlite"
    with StockSaver.from_conn_string(str(db)) as stock:
        stock.serde = EncryptedSerializer(EnvKeyCipher(key))
        graph = linear_graph(_Turn, ("turn", _turn), checkpointer=stock)
        graph.invoke({"n": 1}, {"configurable": {"thread_id": "quickstart-thread-1"}})
    before = db.read_bytes()
    done = _run(tmp_path, key=key)
    assert done.returncode == 2
    assert "older version of this demo" in done.stderr
    assert "secure-serde adopt" in done.stderr
    assert "Traceback" not in done.stderr
    assert db.read_bytes() == before


def test_fresh_deletes_only_when_asked(tmp_path: Path) -> None:
    assert _run(tmp_path).returncode == 0
    done = _run(tmp_path, "--fresh")
    assert done.returncode == 0, done.stderr
    assert "--fresh: deleted the old demo database" in done.stdout
    assert "New database" in done.stdout
