"""``secure-serde adopt``: the frozen store 0.3.0 wrote becomes a sealed store, from the CLI.

The Python API is tested in tests/savers/test_adopt.py; here the command: keys from the
environment, a dry run that writes nothing, the listing of a planted plaintext row (refused,
exit 1), ``--accept-unvouched`` copying it, and the adopted store opening under SealedSaver; on
both 0.3 layouts (the frozen SQLite file and PostgreSQL dump) and on a stock store.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver as StockSqliteSaver
from langgraph.graph import END, START, StateGraph

from secure_serde.savers import V03Reader
from secure_serde.savers.sqlite import SqliteSaver
from tests.cli.cli_support import only_env_key, run_main
from tests.graphs_support import build_review_graph
from tests.savers.test_adopt import (
    THREAD,
    VECTOR,
    VECTOR_KEY,
    graph,
    plant_plaintext_write,
    serde,
)
from tests.stores.test_v03_postgres_vector import load_vector
from tests.stores.v03_support import KEY as PG_KEY
from tests.stores.v03_support import serde as pg_serde


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


def test_the_frozen_postgres_store_is_adopted(
    postgres_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    load_vector(postgres_url)
    only_env_key(monkeypatch, PG_KEY.decode())
    target = tmp_path / "new.sqlite"
    code, out, err = run_main(capsys, "adopt", "--json", postgres_url, str(target))
    assert code == 0, err
    report = json.loads(out)
    assert (report["threads"], report["unvouched"]) == (3, [])
    with (
        V03Reader(postgres_url, serde=pg_serde()) as old,
        SqliteSaver.from_conn_string(str(target), serde=pg_serde()) as new,
    ):
        assert report["checkpoints"] == len(list(old.list(None)))
        for thread in ("review-1", "review-2"):
            config: RunnableConfig = {"configurable": {"thread_id": thread}}
            got = build_review_graph(new).get_state(config)
            assert got.values == build_review_graph(old).get_state(config).values


def test_a_stock_store_is_listed_unauthenticated_and_copied_when_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows a stock saver wrote with secure_serde's serializer are bound to no row."""
    only_env_key(monkeypatch, VECTOR_KEY.decode())
    stock = tmp_path / "stock.sqlite"
    with StockSqliteSaver.from_conn_string(str(stock)) as saver:
        saver.serde = serde()
        graph(saver).invoke({"messages": [HumanMessage("hi")]}, THREAD)
        checkpoints = len(list(saver.list(None)))
    code, out, _ = run_main(capsys, "adopt", "--json", str(stock), str(tmp_path / "a.sqlite"))
    assert code == 1
    rows = json.loads(out)["unvouched"]
    assert [(r["row"], r["reason"]) for r in rows] == [("checkpoint", "unauthenticated")] + [
        ("checkpoint", "parent refused")
    ] * (checkpoints - 1)
    code, out, _ = run_main(
        capsys, "adopt", "--json", "--accept-unvouched", str(stock), str(tmp_path / "b.sqlite")
    )
    assert code == 0
    assert json.loads(out)["checkpoints"] == checkpoints
    with SqliteSaver.from_conn_string(str(tmp_path / "b.sqlite"), serde=serde()) as saver:
        assert graph(saver).get_state(THREAD).values["messages"][0].content == "hi"


class _Counter(TypedDict):
    n: int
    name: str


def _count_graph(saver: BaseCheckpointSaver[Any]) -> Any:
    def step(state: _Counter) -> dict[str, Any]:
        return {"n": state["n"] + 1, "name": f"{state['name']}!"}

    builder = StateGraph(_Counter)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder.compile(checkpointer=saver)


def test_a_plaintext_stock_postgres_store_with_inline_values_is_adopted_when_accepted(
    postgres_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Ints and strs a stock PostgresSaver keeps inline in its JSON: plaintext, not misplaced."""
    from langgraph.checkpoint.postgres import PostgresSaver as StockPostgresSaver

    only_env_key(monkeypatch, VECTOR_KEY.decode())
    with StockPostgresSaver.from_conn_string(postgres_url) as stock:
        stock.setup()
        _count_graph(stock).invoke({"n": 41, "name": "ada"}, THREAD)
        checkpoints = len(list(stock.list(None)))
    code, out, _ = run_main(capsys, "adopt", "--json", postgres_url, str(tmp_path / "a.sqlite"))
    assert code == 1
    refused = json.loads(out)["unvouched"]
    assert {r["reason"] for r in refused} == {"plaintext", "parent refused"}
    code, out, err = run_main(
        capsys, "adopt", "--json", "--accept-unvouched", postgres_url, str(tmp_path / "b.sqlite")
    )
    assert code == 0, err
    report = json.loads(out)
    assert "misplaced" not in {r["reason"] for r in report["unvouched"]}
    assert all(r["copied"] for r in report["unvouched"])
    assert report["checkpoints"] == checkpoints
    with SqliteSaver.from_conn_string(str(tmp_path / "b.sqlite"), serde=serde()) as saver:
        assert _count_graph(saver).get_state(THREAD).values == {"n": 42, "name": "ada!"}
