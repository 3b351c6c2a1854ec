"""``secure-serde audit`` on a store SealedSaver sealed: every row opened, findings per row.

0.3's audit read the 0.3 row layout and would have counted a sealed store's cells as plaintext
``bytes`` rows; now a sealed store is recognised by its store identity and every checkpoint is
opened as the application opens it. A row that does not open is listed with its error class and
the pass goes on; a cell under an older key is counted.
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
from secure_serde.ciphers import KeyRotationCipher
from secure_serde.savers.sqlite import SqliteSaver
from secure_serde.sealing import audit_sealed
from tests.cli.cli_support import only_env_key, run_main
from tests.graphs_support import linear_graph

KEY = "0123456789abcdef0123456789abcdef"
OTHER = "fedcba9876543210fedcba9876543210"


class State(TypedDict):
    notes: Annotated[list[str], add]


def _note(state: State) -> dict[str, Any]:
    return {"notes": [f"n{len(state['notes'])}"]}


def _fill(db: Path, serde: EncryptedSerializer, threads: tuple[str, ...] = ("a", "b")) -> None:
    with SqliteSaver.from_conn_string(str(db), serde=serde) as saver:
        saver.setup()
        graph = linear_graph(State, ("note", _note), checkpointer=saver)
        for thread in threads:
            config: RunnableConfig = {"configurable": {"thread_id": thread, "api_key": "sk-1"}}
            for _ in range(2):
                graph.invoke({"notes": []}, config)


def _execute(db: Path, query: str, params: tuple[Any, ...] = ()) -> int:
    with closing(sqlite3.connect(db)) as conn, conn:
        return conn.execute(query, params).rowcount


def _ids(db: Path, thread: str) -> list[str]:
    with closing(sqlite3.connect(db)) as conn:
        rows = conn.execute(
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id",
            (thread,),
        ).fetchall()
    return [r[0] for r in rows]


def test_a_clean_sealed_store_audits_clean(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "store.sqlite"
    _fill(db, EncryptedSerializer.from_pycryptodome_aes(key=KEY))
    only_env_key(monkeypatch, KEY)
    code, out, err = run_main(capsys, "audit", str(db))
    assert code == 0, out + err
    assert "sealed by SealedSaver" in out
    assert "every checkpoint opens" in out
    code, out, _ = run_main(capsys, "audit", "--json", str(db))
    report = json.loads(out)
    assert code == 0
    assert report["layout"] == "sealed"
    assert report["threads"] == 2
    assert report["checkpoints"] == len(_ids(db, "a")) + len(_ids(db, "b")) > 4
    assert report["not_under_primary"] == 0
    assert report["under_primary"] == report["records"] + report["values"] + report["writes"]
    assert "sk-1" not in out


def test_rows_that_do_not_open_are_listed_and_the_pass_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "store.sqlite"
    _fill(db, EncryptedSerializer.from_pycryptodome_aes(key=KEY))
    a, b = _ids(db, "a"), _ids(db, "b")
    # A stripped record on thread a, a deleted ancestor on thread b.
    _execute(db, "UPDATE checkpoints SET metadata = '{}' WHERE checkpoint_id = ?", (a[-1],))
    _execute(db, "DELETE FROM checkpoints WHERE checkpoint_id = ?", (b[1],))
    only_env_key(monkeypatch, KEY)
    code, out, err = run_main(capsys, "audit", "--json", str(db))
    assert code == 1, err
    report = json.loads(out)
    errors = {(f["thread_id"], f["error"]) for f in report["findings"]}
    assert errors == {("a", "BindingError"), ("b", "HistoryError")}
    # Every other checkpoint was still opened and counted.
    assert report["checkpoints"] == len(a) + len(b) - 1
    code, out, _ = run_main(capsys, "audit", str(db))
    assert code == 1
    assert "2 checkpoints do not open" in out


def test_the_wrong_key_is_a_finding_per_row_not_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "store.sqlite"
    _fill(db, EncryptedSerializer.from_pycryptodome_aes(key=KEY))
    only_env_key(monkeypatch, OTHER)
    code, _out, err = run_main(capsys, "audit", str(db))
    assert code == 2
    assert "identity" in err
    assert "Traceback" not in err


def test_cells_under_an_older_key_are_counted(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite"
    old = KeyRotationCipher({"a": KEY.encode()}, "a")
    _fill(db, EncryptedSerializer(old), threads=("a",))
    rotated = EncryptedSerializer(KeyRotationCipher({"a": KEY.encode(), "b": OTHER.encode()}, "b"))
    _fill(db, rotated, threads=("b",))
    with SqliteSaver.from_conn_string(str(db), serde=rotated) as saver:
        report = audit_sealed(saver)
    assert not report.findings
    assert report.not_under_primary > 0
    assert report.under_primary > 0
    assert not report.clean
    # Without the new key, thread b's rows are findings, one per row, and thread a still opens.
    with SqliteSaver.from_conn_string(str(db), serde=EncryptedSerializer(old)) as saver:
        partial = audit_sealed(saver)
    assert {(f.thread_id, f.error) for f in partial.findings} == {("b", "UnknownKeyError")}
    assert partial.checkpoints == report.checkpoints
