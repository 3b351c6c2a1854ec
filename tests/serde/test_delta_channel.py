"""DeltaChannel graphs: encrypted runs reach exactly the state of the same graph run unencrypted.

A small loop graph with two ``DeltaChannel``s (a list of strings and a
DataFrame, snapshot every 3 and every 2 updates) runs many supersteps, then
goes through ``update_state``, a replay from an old checkpoint and a fork.
The same scenario runs twice on the same saver kind: once with a plain serde
(JsonPlus, with ``pickle_fallback=True`` when the state holds a frame) and
once through `EncryptedSerializer` (over `PickleFallbackSerializer` for the
frame). Everything the graph and the saver report must be identical: every
``get_state_history`` entry (values, next, structural metadata), the state
rebuilt at every checkpoint, and ``get_delta_channel_history`` at every
checkpoint, whose seeds must be ``_DeltaSnapshot`` values, type included.

Savers: SqliteSaver on a file, and on the real PostgreSQL fixture both
langgraph's PostgresSaver and secure_serde's sealed one; secure_serde's sealed
savers (`SealedSaver` around the stock ones) run the encrypted half, the stock
saver the plain one. For them the stored type tags checked are those of the
sealed cells the stock saver holds.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Annotated, Any

import pandas as pd
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.postgres import PostgresSaver as StockPostgresSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from secure_serde import EncryptedSerializer, PickleFallbackSerializer
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.pickling import PANDAS
from secure_serde.savers.postgres import PostgresSaver as SealedPostgresSaver
from secure_serde.savers.sqlite import SqliteSaver as SealedSqliteSaver
from secure_serde.sealing import cell_layout as _cell
from secure_serde.serde import _langgraph as lg
from tests import strategies as cs
from tests import strategies_pandas  # noqa: F401  (registers exact frame comparison)
from tests.fixtures_services import saver_connection
from tests.graphs_support import KEY

STEPS = 14
SUFFIX = "+aesgcm"


# --- the graph ------------------------------------------------------------------------------


def extend(state: list[str], writes: Sequence[list[str]]) -> list[str]:
    out = list(state)
    for write in writes:
        out.extend(write)
    return out


def concat(state: pd.DataFrame, writes: Sequence[pd.DataFrame]) -> pd.DataFrame:
    frames = [frame for frame in (state, *writes) if len(frame.columns)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


class LogState(TypedDict, total=False):
    log: Annotated[list[str], DeltaChannel(extend, snapshot_frequency=3)]
    step: int


class FrameState(LogState, total=False):
    frame: Annotated[pd.DataFrame, DeltaChannel(concat, snapshot_frequency=2)]


def row(n: int, label: str) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "n": pd.array([n], dtype="Int64"),
            "at": [pd.Timestamp("2024-03-30 22:00", tz="Europe/Paris") + pd.Timedelta(hours=n)],
            "label": pd.Categorical([label]),
            "score": [n / 7],
        }
    )


def build(checkpointer: Any, *, with_frame: bool) -> Any:
    def work(state: Any) -> dict[str, Any]:
        n = state.get("step", 0) + 1
        update: dict[str, Any] = {"log": [f"step {n}"], "step": n}
        if with_frame:
            update["frame"] = row(n, f"w{n % 3}")
        return update

    def route(state: Any) -> str:
        return "work" if state["step"] < STEPS else END

    builder = StateGraph(FrameState if with_frame else LogState)
    builder.add_node("work", work)
    builder.add_edge(START, "work")
    builder.add_conditional_edges("work", route)
    return builder.compile(checkpointer=checkpointer)


# --- the scenario and what it reports -------------------------------------------------------


def cfg(thread_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id}}


def describe(graph: Any, saver: BaseCheckpointSaver[Any], thread_id: str) -> dict[str, Any]:
    """Everything observable about a thread, with run-specific ids left out."""
    channels = ["log", "frame"] if "frame" in graph.channels else ["log"]
    entries = []
    for snapshot in graph.get_state_history(cfg(thread_id)):
        rebuilt = graph.get_state(snapshot.config)
        deltas = saver.get_delta_channel_history(config=snapshot.config, channels=channels)
        metadata = snapshot.metadata or {}
        entries.append(
            {
                "values": snapshot.values,
                "rebuilt": rebuilt.values,
                "next": snapshot.next,
                "step": metadata.get("step"),
                "source": metadata.get("source"),
                "counters": metadata.get("counters_since_delta_snapshot"),
                "deltas": {
                    name: {
                        "seed": history.get("seed", "<none>"),
                        "writes": [(channel, value) for _task, channel, value in history["writes"]],
                    }
                    for name, history in deltas.items()
                },
            }
        )
    return {"final": graph.get_state(cfg(thread_id)).values, "history": entries}


def run_scenario(graph: Any, saver: BaseCheckpointSaver[Any], thread_id: str) -> dict[str, Any]:
    with_frame = "frame" in graph.channels
    graph.invoke({"step": 0}, cfg(thread_id))
    # update_state rewinds the counter, so the loop runs again from step 9.
    extra: dict[str, Any] = {"log": ["manual"], "step": STEPS - 6}
    if with_frame:
        extra["frame"] = row(100, "manual")
    graph.update_state(cfg(thread_id), extra, as_node="work")
    graph.invoke(None, cfg(thread_id))

    history = list(graph.get_state_history(cfg(thread_id)))
    by_step = {snap.metadata["step"]: snap for snap in reversed(history) if snap.metadata}
    # Replay from a checkpoint between snapshots, then fork from another one.
    graph.invoke(None, by_step[5].config)
    fork = graph.update_state(by_step[4].config, {"log": ["fork"]}, as_node="work")
    graph.invoke(None, fork)
    report = describe(graph, saver, thread_id)
    seeds = [
        entry["deltas"][name]["seed"] for entry in report["history"] for name in entry["deltas"]
    ]
    # Through the module, as the package does: mypy rejects isinstance on a bare alias of a
    # NamedTuple class ("parameterized generic").
    snapshots = [seed for seed in seeds if isinstance(seed, lg.DeltaSnapshot)]
    # Not vacuous: the snapshots were stored, and came back as _DeltaSnapshot.
    assert len(snapshots) >= len(report["history"]) // 2
    assert all(type(seed) is lg.DeltaSnapshot for seed in snapshots)
    if with_frame:
        assert any(isinstance(seed.value, pd.DataFrame) for seed in snapshots)
        assert len(report["final"]["frame"]) >= STEPS
    return report


def plain_serde(with_frame: bool) -> JsonPlusSerializer:
    return JsonPlusSerializer(pickle_fallback=with_frame)


def encrypted_serde(with_frame: bool) -> EncryptedSerializer:
    inner = PickleFallbackSerializer(allowed=[PANDAS]) if with_frame else JsonPlusSerializer()
    return EncryptedSerializer(EnvKeyCipher(KEY), inner)


# --- savers ---------------------------------------------------------------------------------

SaverFactory = Callable[[Any], BaseCheckpointSaver[Any]]


@contextmanager
def sqlite_savers(path: Path) -> Iterator[tuple[SaverFactory, Callable[[], list[str]]]]:
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:

        def types() -> list[str]:
            return [
                t
                for table in ("checkpoints", "writes")
                for (t,) in conn.execute(f"SELECT type FROM {table} WHERE thread_id = 'enc'")  # noqa: S608
            ]

        yield (lambda serde: SqliteSaver(conn, serde=serde)), types


def sealed_types(tuples: Sequence[CheckpointTuple]) -> list[str]:
    """The type tags inside the sealed cells a bare stock saver reads: channel values, writes."""
    types = [
        _cell.unpack(v, _cell.VALUE).type_tag
        for t in tuples
        for v in t.checkpoint["channel_values"].values()
    ]
    types += [
        _cell.unpack(v, _cell.WRITE).type_tag for t in tuples for _, _, v in t.pending_writes or ()
    ]
    return types


ENC: RunnableConfig = {"configurable": {"thread_id": "enc"}}


@contextmanager
def postgres_savers(url: str) -> Iterator[tuple[SaverFactory, Callable[[], list[str]]]]:
    with saver_connection(url) as conn:
        StockPostgresSaver(conn, serde=JsonPlusSerializer()).setup()

        def types() -> list[str]:
            return [
                row["type"]
                for table in ("checkpoint_blobs", "checkpoint_writes")
                for row in conn.execute(
                    f"SELECT type FROM {table} WHERE thread_id = 'enc'"  # noqa: S608
                ).fetchall()
            ]

        yield (lambda serde: StockPostgresSaver(conn, serde=serde)), types


@contextmanager
def sealed_postgres_savers(url: str) -> Iterator[tuple[SaverFactory, Callable[[], list[str]]]]:
    with saver_connection(url) as conn:
        # The store identity first: a sealed saver refuses a store already holding checkpoints.
        SealedPostgresSaver(conn, serde=encrypted_serde(False)).setup()

        def make_saver(serde: Any) -> BaseCheckpointSaver[Any]:
            if isinstance(serde, EncryptedSerializer):
                return SealedPostgresSaver(conn, serde=serde)
            return StockPostgresSaver(conn, serde=serde)

        def types() -> list[str]:
            return sealed_types(list(StockPostgresSaver(conn).list(ENC)))

        yield make_saver, types


def compare_runs(
    make_saver: SaverFactory, stored_types: Callable[[], list[str]], *, with_frame: bool
) -> None:
    plain_saver = make_saver(plain_serde(with_frame))
    plain = run_scenario(build(plain_saver, with_frame=with_frame), plain_saver, "plain")
    enc_saver = make_saver(encrypted_serde(with_frame))
    encrypted = run_scenario(build(enc_saver, with_frame=with_frame), enc_saver, "enc")

    assert len(encrypted["history"]) == len(plain["history"]) > 2 * STEPS
    cs.assert_same(encrypted, plain)

    tags = [t for t in stored_types() if t != "empty"]
    assert tags
    assert all(t.endswith(SUFFIX) for t in tags), set(tags)
    assert ("msgpack+pickle" + SUFFIX in tags) is with_frame


@pytest.mark.parametrize("with_frame", [False, True], ids=["list", "list+frame"])
def test_sqlite_encrypted_matches_unencrypted(tmp_path: Path, with_frame: bool) -> None:
    with sqlite_savers(tmp_path / "delta.sqlite") as (make_saver, types):
        compare_runs(make_saver, types, with_frame=with_frame)


@pytest.mark.parametrize("with_frame", [False, True], ids=["list", "list+frame"])
def test_sealed_sqlite_encrypted_matches_unencrypted(tmp_path: Path, with_frame: bool) -> None:
    """Bound rows: the delta history walks authenticated ancestors (the stock saver runs plain)."""
    with closing(sqlite3.connect(tmp_path / "sealed.sqlite", check_same_thread=False)) as conn:
        # The store identity first: a sealed saver refuses a store already holding checkpoints.
        SealedSqliteSaver(conn, serde=encrypted_serde(False)).setup()

        def make_saver(serde: Any) -> BaseCheckpointSaver[Any]:
            if isinstance(serde, EncryptedSerializer):
                return SealedSqliteSaver(conn, serde=serde)
            return SqliteSaver(conn, serde=serde)

        def types() -> list[str]:
            return sealed_types(list(SqliteSaver(conn).list(ENC)))

        compare_runs(make_saver, types, with_frame=with_frame)


@pytest.mark.parametrize("with_frame", [False, True], ids=["list", "list+frame"])
@pytest.mark.parametrize("sealed", [False, True], ids=["stock", "sealed"])
def test_postgres_encrypted_matches_unencrypted(
    postgres_url: str, sealed: bool, with_frame: bool
) -> None:
    savers = sealed_postgres_savers if sealed else postgres_savers
    with savers(postgres_url) as (make_saver, types):
        compare_runs(make_saver, types, with_frame=with_frame)
