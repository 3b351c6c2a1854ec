"""The README's commands and its production recipe, run exactly as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from tests.fixtures_services import PostgresServer, pg_dump

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.DOTALL | re.MULTILINE)


def _section(title: str) -> str:
    start = README.index(f"\n## {title}\n")
    end = README.index("\n## ", start + 1)
    return README[start:end]


def _blocks(text: str) -> list[tuple[str, str]]:
    return [(match.group(1), match.group(2)) for match in FENCE.finditer(text)]


def test_the_ci_script_runs_the_readme_test_command() -> None:
    (_, demo), (_, suite) = _blocks(_section("Try it"))
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert suite.strip() in ci
    assert "examples/quickstart.py" in demo


def test_version_claims_match_pyproject() -> None:
    import secure_serde

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert secure_serde.__version__ == version
    for doc in ("README.md", "SECURITY.md"):
        claims = re.findall(r"covers `secure_serde` (\d+\.\d+\.\d+)", (ROOT / doc).read_text())
        assert all(claim == version for claim in claims), (doc, claims, version)
    assert "covers `secure_serde`" in (ROOT / "SECURITY.md").read_text()


def test_production_recipe_runs_as_written(
    postgres_server: PostgresServer, postgres_url: str, tmp_path: Path
) -> None:
    (kind1, setup), (kind2, app), (kind3, run) = _blocks(_section("Production recipe"))
    assert (kind1, kind2, kind3) == ("sh", "python", "sh")
    (tmp_path / "app.py").write_text(app)
    bindir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "SECURE_SERDE_"))}
    env.pop("LANGGRAPH_AES_KEY", None)
    env.update(PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}", SECURE_SERDE_PG_DSN=postgres_url)
    # One shell, as a reader pastes the blocks one after the other.
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", f"{setup}\n{run}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Noted: My card is 4111 1111 1111 1111" in done.stdout
    assert (tmp_path / "keyring.json").stat().st_mode & 0o077 == 0
    (key,) = json.loads((tmp_path / "keyring.json").read_text())["keys"].values()
    assert key not in done.stdout + done.stderr
    dump = pg_dump(postgres_server, postgres_url)
    assert b"4111 1111" not in dump
    assert b"customer-42" in dump  # the dump is real: ids are stored in clear


def test_the_seal_any_saver_example_runs_and_seals() -> None:
    ((kind, code),) = _blocks(_section("Seal any saver"))
    assert kind == "python"
    namespace: dict[str, Any] = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102 - the README's own example
    inner = namespace["saver"].inner
    stored = repr((inner.storage, inner.blobs, inner.writes)).encode()
    for canary in (b"4111 1111", b"sk-live-1", b"alice"):
        assert canary not in stored
    # The same graph on the bare saver stores all three: the check above can fail.
    sealed = 'SealedSaver(InMemorySaver(), serde=serde, indexed_metadata=["user_id"])'
    bare = code.replace(sealed, "InMemorySaver()").replace("saver.setup()", "")
    assert sealed in code
    exposed: dict[str, Any] = {}
    exec(compile(bare, "README.md", "exec"), exposed)  # noqa: S102 - the README's own example
    metadata = b"".join(blob for _, blob in _metadata_blobs(exposed["saver"]))
    assert b"sk-live-1" in metadata
    assert b"alice" in metadata


def _metadata_blobs(saver: Any) -> list[tuple[str, bytes]]:
    return [
        metadata
        for by_ns in saver.storage.values()
        for by_id in by_ns.values()
        for _, metadata, _ in by_id.values()
    ]
