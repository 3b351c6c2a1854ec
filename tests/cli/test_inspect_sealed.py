"""``secure-serde inspect`` on a store SealedSaver sealed: the history as the app reads it.

Namespaces and ids come from the raw rows; every checkpoint is opened by the sealed saver
with all its checks, so a tampered checkpoint is shown with its error in its place (exit 1),
and the rest of the history is still shown.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from operator import add
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.runnables import RunnableConfig
from typing_extensions import TypedDict

from secure_serde import EncryptedSerializer
from secure_serde.savers.sqlite import SqliteSaver
from tests.cli.cli_support import only_env_key, run_main
from tests.graphs_support import linear_graph

KEY = "0123456789abcdef0123456789abcdef"


class State(TypedDict):
    notes: Annotated[list[str], add]


def _note(state: State) -> dict[str, Any]:
    return {"notes": [f"note-{len(state['notes'])}"]}


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "store.sqlite"
    serde = EncryptedSerializer.from_pycryptodome_aes(key=KEY)
    with SqliteSaver.from_conn_string(str(db), serde=serde) as saver:
        saver.setup()
        graph = linear_graph(State, ("note", _note), checkpointer=saver)
        config: RunnableConfig = {"configurable": {"thread_id": "t"}}
        for _ in range(2):
            graph.invoke({"notes": []}, config)
    only_env_key(monkeypatch, KEY)
    return db


def test_the_history_reads_as_the_app_reads_it(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_main(capsys, "inspect", str(store), "--thread", "t", "--json")
    assert code == 0, err
    document = json.loads(out)
    checkpoints = document["checkpoints"]
    assert len(checkpoints) == document["namespaces"][""] > 3
    assert checkpoints[0]["values"]["notes"] == ["note-0", "note-1"]
    assert all(c["error"] is None for c in checkpoints)
    ids = [c["checkpoint_id"] for c in checkpoints]
    assert ids == sorted(ids, reverse=True)


def test_a_tampered_checkpoint_is_shown_with_its_error_in_place(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with closing(sqlite3.connect(store)) as conn, conn:
        (newest,) = conn.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = 't'"
            " ORDER BY checkpoint_id DESC LIMIT 1"
        ).fetchone()
        conn.execute("UPDATE checkpoints SET metadata = '{}' WHERE checkpoint_id = ?", (newest,))
    code, out, _ = run_main(capsys, "inspect", str(store), "--thread", "t", "--json")
    assert code == 1
    checkpoints = json.loads(out)["checkpoints"]
    assert checkpoints[0]["checkpoint_id"] == newest
    assert checkpoints[0]["error"].startswith("BindingError")
    assert [c["error"] for c in checkpoints[1:]] == [None] * (len(checkpoints) - 1)
