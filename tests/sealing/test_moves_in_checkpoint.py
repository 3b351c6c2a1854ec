"""Cells moved within one checkpoint's rows, below the wrapper, on SQLite (ported from 0.3's tests).

The moves: a value cell to another channel, or to the same channel at another version; a pending
write to another task, channel or index. Each is refused with `BindingError`, and the moved
value is never deserialized: a marking inner serializer shows that no load produced it. An
edit to what the inner saver keeps in plaintext beside the sealed record (``versions_seen``) and
a write row re-numbered in place change nothing that is read: the sealed record and each
write's sealed index are what count.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import BindingError, EncryptedSerializer
from secure_serde.ciphers import EnvKeyCipher
from tests.serdes_support import sealed_sqlite

KEY = b"sealing-in-place-moves-key-01234"
ROOT: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
# Lists, not scalars: a small scalar may be kept inside the record instead of in a cell.
FIRST = {"a": ["secret-a1"], "b": ["secret-b1"]}
SECOND = {"a": ["secret-a2"], "b": ["secret-b1"]}
WRITES = [("task-1", "a", ["write-0"]), ("task-1", "b", ["write-1"]), ("task-2", "a", ["write-2"])]
PLAIN = JsonPlusSerializer()


class Marking(JsonPlusSerializer):
    """JsonPlus that keeps every value it loads."""

    def __init__(self) -> None:
        super().__init__()
        self.loaded: list[Any] = []

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        value = super().loads_typed(data)
        self.loaded.append(value)
        return value


def _checkpoint(values: dict[str, Any], versions: ChannelVersions) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = versions
    checkpoint["versions_seen"] = {"node": dict(versions)}
    return checkpoint


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RunnableConfig, str]:
    """A store with two checkpoints and three pending writes on the second; its config, and
    the first checkpoint's id."""
    db = tmp_path_factory.mktemp("moves") / "base.sqlite"
    with sealed_sqlite(db, EncryptedSerializer(EnvKeyCipher(KEY))) as saver:
        first = saver.put(
            ROOT, _checkpoint(FIRST, {"a": "1", "b": "1"}), {"step": 1}, {"a": "1", "b": "1"}
        )
        second = saver.put(
            first, _checkpoint(SECOND, {"a": "2", "b": "1"}), {"step": 2}, {"a": "2"}
        )
        for task in ("task-1", "task-2"):
            saver.put_writes(second, [(c, v) for t, c, v in WRITES if t == task], task)
    return db, second, first["configurable"]["checkpoint_id"]


def execute(db: Path, sql: str, params: tuple[Any, ...] = ()) -> None:
    with closing(sqlite3.connect(db)) as conn, conn:
        conn.execute(sql, params)


def stored(db: Path, checkpoint_id: str) -> dict[str, Any]:
    """The inner saver's checkpoint blob, decoded as the stock saver stored it."""
    with closing(sqlite3.connect(db)) as conn:
        row = conn.execute(
            "SELECT type, checkpoint FROM checkpoints WHERE checkpoint_id = ?", (checkpoint_id,)
        ).fetchone()
    value: dict[str, Any] = PLAIN.loads_typed((row[0], row[1]))
    return value


def edit_checkpoint(db: Path, checkpoint_id: str, edit: Callable[[dict[str, Any]], None]) -> None:
    checkpoint = stored(db, checkpoint_id)
    edit(checkpoint)
    execute(
        db,
        "UPDATE checkpoints SET checkpoint = ? WHERE checkpoint_id = ?",
        (PLAIN.dumps_typed(checkpoint)[1], checkpoint_id),
    )


def copy_of(written: tuple[Path, RunnableConfig, str], tmp_path: Path) -> Path:
    db = tmp_path / "store.sqlite"
    shutil.copyfile(written[0], db)
    return db


def reads(db: Path, config: RunnableConfig) -> tuple[list[Any], Any]:
    """What a marked read of the checkpoint loaded, and what it returned or raised."""
    marking = Marking()
    with sealed_sqlite(db, EncryptedSerializer(EnvKeyCipher(KEY), marking)) as saver:
        try:
            outcome: Any = saver.get_tuple(config)
        except BindingError as exc:
            outcome = exc
    return marking.loaded, outcome


def test_the_untouched_checkpoint_reads_and_the_marking_sees_its_values(
    written: tuple[Path, RunnableConfig, str], tmp_path: Path
) -> None:
    loaded, found = reads(copy_of(written, tmp_path), written[1])
    assert found.checkpoint["channel_values"] == SECOND
    assert found.pending_writes == WRITES
    assert ["secret-a2"] in loaded
    assert ["write-2"] in loaded


def _swap_channels(checkpoint: dict[str, Any]) -> None:
    values = checkpoint["channel_values"]
    values["a"], values["b"] = values["b"], values["a"]


def test_a_value_moved_to_another_channel_is_refused_unread(
    written: tuple[Path, RunnableConfig, str], tmp_path: Path
) -> None:
    db = copy_of(written, tmp_path)
    edit_checkpoint(db, written[1]["configurable"]["checkpoint_id"], _swap_channels)
    loaded, outcome = reads(db, written[1])
    assert isinstance(outcome, BindingError)
    assert ["secret-a2"] not in loaded
    assert ["secret-b1"] not in loaded


def test_a_value_moved_to_another_version_of_its_channel_is_refused_unread(
    written: tuple[Path, RunnableConfig, str], tmp_path: Path
) -> None:
    db = copy_of(written, tmp_path)
    older = stored(db, written[2])["channel_values"]["a"]

    def repoint(checkpoint: dict[str, Any]) -> None:
        checkpoint["channel_values"]["a"] = older  # version 1's cell where version 2 is due

    edit_checkpoint(db, written[1]["configurable"]["checkpoint_id"], repoint)
    loaded, outcome = reads(db, written[1])
    assert isinstance(outcome, BindingError)
    assert ["secret-a1"] not in loaded


@pytest.mark.parametrize(
    ("move", "moved"),
    [
        ("UPDATE writes SET task_id = 'task-3' WHERE task_id = 'task-2'", ["write-2"]),
        ("UPDATE writes SET channel = 'b' WHERE task_id = 'task-2'", ["write-2"]),
        # Into another task's free index: the task is in the write's location.
        (
            "UPDATE writes SET task_id = 'task-2', idx = 1 WHERE task_id = 'task-1' AND idx = 1",
            ["write-1"],
        ),
        # A second copy at another index: the sealed index is claimed twice.
        (
            "INSERT INTO writes SELECT thread_id, checkpoint_ns, checkpoint_id, task_id,"
            " task_path, 7, channel, type, value FROM writes WHERE task_id = 'task-1' AND idx = 0",
            None,
        ),
    ],
    ids=["another task", "another channel", "another task's index", "copied to another index"],
)
def test_a_write_moved_within_the_checkpoint_is_refused(
    written: tuple[Path, RunnableConfig, str], tmp_path: Path, move: str, moved: Any
) -> None:
    db = copy_of(written, tmp_path)
    execute(db, move)
    loaded, outcome = reads(db, written[1])
    assert isinstance(outcome, BindingError)
    if moved is not None:
        assert moved not in loaded


def test_writes_renumbered_in_place_read_back_in_their_sealed_order(
    written: tuple[Path, RunnableConfig, str], tmp_path: Path
) -> None:
    db = copy_of(written, tmp_path)
    for sql in (
        "UPDATE writes SET idx = -5 WHERE task_id = 'task-1' AND idx = 0",
        "UPDATE writes SET idx = 0 WHERE task_id = 'task-1' AND idx = 1",
        "UPDATE writes SET idx = 1 WHERE task_id = 'task-1' AND idx = -5",
    ):
        execute(db, sql)
    _, found = reads(db, written[1])
    assert found.pending_writes == WRITES


def test_an_edit_to_versions_seen_beside_the_record_changes_nothing_read(
    written: tuple[Path, RunnableConfig, str], tmp_path: Path
) -> None:
    """The inner saver keeps ``versions_seen`` in plaintext too; only the sealed record's copy
    is ever returned, so an edit there cannot make a node run again or skip."""
    db = copy_of(written, tmp_path)
    checkpoint_id = written[1]["configurable"]["checkpoint_id"]

    def rewind(checkpoint: dict[str, Any]) -> None:
        checkpoint["versions_seen"] = {"node": {"a": "1", "b": "1"}, "other": {"a": "9"}}
        checkpoint["channel_versions"] = {"a": "9", "b": "9"}

    edit_checkpoint(db, checkpoint_id, rewind)
    assert stored(db, checkpoint_id)["versions_seen"]["other"] == {"a": "9"}
    _, found = reads(db, written[1])
    assert found.checkpoint["versions_seen"] == {"node": {"a": "2", "b": "1"}}
    assert found.checkpoint["channel_versions"] == {"a": "2", "b": "1"}
    with sealed_sqlite(db, EncryptedSerializer(EnvKeyCipher(KEY))) as saver:
        listed = [t.checkpoint["versions_seen"] for t in saver.list(ROOT)]
    assert listed == [{"node": {"a": "2", "b": "1"}}, {"node": {"a": "1", "b": "1"}}]
