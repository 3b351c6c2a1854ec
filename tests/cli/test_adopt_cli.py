"""``secure-serde adopt``: the frozen store 0.3.0 wrote becomes a sealed store, from the CLI.

The Python API is tested in tests/savers/test_adopt.py; here the command: keys from the
environment, a dry run that writes nothing, the listing of a planted plaintext row (refused,
exit 1), ``--accept-unvouched`` copying it, and the adopted store opening under SealedSaver.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from secure_serde.savers.sqlite import SqliteSaver
from tests.cli.cli_support import only_env_key, run_main
from tests.savers.test_adopt import THREAD, VECTOR, VECTOR_KEY, plant_plaintext_write, serde


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "old.sqlite"
    shutil.copyfile(VECTOR, copy)
    only_env_key(monkeypatch, VECTOR_KEY.decode())
    return copy


def test_dry_run_writes_nothing_then_adopt_copies_every_checkpoint(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "new.sqlite"
    before = store.read_bytes()
    code, out, err = run_main(capsys, "adopt", "--dry-run", "--json", str(store), str(target))
    assert code == 0, err
    dry = json.loads(out)
    assert dry["dry_run"] is True
    assert dry["checkpoints"] > 2
    with SqliteSaver.from_conn_string(str(target), serde=serde()) as saver:
        saver.setup()
        assert saver.get_tuple(THREAD) is None
    code, out, err = run_main(capsys, "adopt", str(store), str(target))
    assert code == 0, err
    assert "copied" in out
    assert store.read_bytes() == before
    with SqliteSaver.from_conn_string(str(target), serde=serde()) as saver:
        assert len(list(saver.list(THREAD))) == dry["checkpoints"]


def test_a_planted_row_is_listed_refused_and_copied_only_when_accepted(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint_id = plant_plaintext_write(store)
    code, out, _ = run_main(capsys, "adopt", "--json", str(store), str(tmp_path / "a.sqlite"))
    assert code == 1
    (row,) = json.loads(out)["unvouched"]
    assert (row["checkpoint_id"], row["reason"], row["copied"]) == (
        checkpoint_id,
        "plaintext",
        False,
    )
    code, out, _ = run_main(
        capsys, "adopt", "--accept-unvouched", str(store), str(tmp_path / "b.sqlite")
    )
    assert code == 0
    assert "copied (accepted)" in out
    with SqliteSaver.from_conn_string(str(tmp_path / "b.sqlite"), serde=serde()) as saver:
        tasks = {w[0] for t in saver.list(THREAD) for w in t.pending_writes or ()}
    assert "planted-task" in tasks


def test_the_same_store_twice_is_refused(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_main(capsys, "adopt", str(store), str(store))
    assert code == 2
    assert "same" in err
