"""``copy_thread`` between stores (secure_serde/passes/_copy.py): whole history or nothing.

Source and target are `SealedSaver`s over real SQLite files under different keys; the graph
waits at an interrupt (pending writes), so resuming the copy is part of "the same thread".
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from secure_serde import ConfigurationError, HistoryError, PassReport, SealedSaver
from secure_serde.passes import copy_thread
from secure_serde.savers.sqlite import SqliteSaver
from tests.passes.rewrap_support import build_graph, run_turns
from tests.serdes_support import env_serde

SOURCE_KEY = "copy-thread-source-key-012345678"
TARGET_KEY = "copy-thread-target-key-012345678"
THREAD: RunnableConfig = {"configurable": {"thread_id": "t1"}}
COPY: RunnableConfig = {"configurable": {"thread_id": "t1-copy"}}


@pytest.fixture
def source(tmp_path: Path) -> Iterator[SealedSaver]:
    with SqliteSaver.from_conn_string(
        str(tmp_path / "source.sqlite"), serde=env_serde(SOURCE_KEY)
    ) as saver:
        saver.setup()
        run_turns(build_graph(saver), "t1", 3)
        yield saver


@pytest.fixture
def target(tmp_path: Path) -> Iterator[SealedSaver]:
    with SqliteSaver.from_conn_string(
        str(tmp_path / "target.sqlite"), serde=env_serde(TARGET_KEY)
    ) as saver:
        saver.setup()
        yield saver


def test_a_dry_run_writes_nothing_then_the_copy_resumes_like_the_source(
    source: SealedSaver, target: SealedSaver
) -> None:
    checkpoints = len(list(source.list(THREAD)))
    dry = copy_thread(source, target, "t1", target_thread_id="t1-copy", dry_run=True)
    assert isinstance(dry, PassReport)
    assert (dry.name, dry.changed, dry.ok) == ("copy_thread", checkpoints, True)
    assert "would copy" in "\n".join(dry.lines())
    assert target.get_tuple(COPY) is None
    done = copy_thread(source, target, "t1", target_thread_id="t1-copy")
    assert (done.changed, done.writes) == (checkpoints, dry.writes)
    assert done.writes > 0  # the interrupt's pending writes came along
    copied, original = build_graph(target), build_graph(source)
    assert copied.get_state(COPY).values == original.get_state(THREAD).values
    assert len(list(target.list(COPY))) == checkpoints
    copied.invoke(Command(resume="ok"), COPY)
    original.invoke(Command(resume="ok"), THREAD)
    assert copied.get_state(COPY).values == original.get_state(THREAD).values


def test_an_existing_target_thread_is_refused(source: SealedSaver, target: SealedSaver) -> None:
    copy_thread(source, target, "t1")
    with pytest.raises(ConfigurationError, match="new thread"):
        copy_thread(source, target, "t1")


def test_a_history_that_does_not_reach_its_root_is_refused_whole(
    source: SealedSaver, target: SealedSaver, tmp_path: Path
) -> None:
    # The oldest checkpoint deleted behind the saver's back: the history no longer verifies.
    with sqlite3.connect(tmp_path / "source.sqlite") as db:
        (oldest,) = db.execute(
            "SELECT min(checkpoint_id) FROM checkpoints WHERE thread_id = 't1'"
        ).fetchone()
        db.execute("DELETE FROM checkpoints WHERE checkpoint_id = ?", (oldest,))
    with pytest.raises(HistoryError):
        list(source.list(THREAD))
    report = copy_thread(source, target, "t1")
    assert (report.changed, report.failure_count) == (0, 1)
    assert report.failures[0].error is not None
    assert issubclass(report.failures[0].error, HistoryError)
    assert target.get_tuple(THREAD) is None
