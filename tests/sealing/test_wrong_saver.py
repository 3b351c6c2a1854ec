"""A sealed store opened without SealedSaver says what it is and how to open it.

0.3's sealed stores, opened by a stock saver with secure_serde's serializer, failed with
"ciphertext failed authentication", which reads like tampering (issue 22, item 7). A store
SealedSaver wrote holds sealed cells, which a stock saver stores as plain ``bytes``: with
secure_serde's serializer the read is refused naming SealedSaver; with langgraph's default
serializer the stock saver hands the cells back as bytes values (SECURITY.md says so), and the
store identity thread and ``secure-serde audit`` tell what the store is.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

from secure_serde import PlaintextRefusedError
from secure_serde.sealing._codec import MARKER_CHANNEL
from tests.serdes_support import (
    env_serde,
    sealed_sqlite,
    stock_postgres,
    stock_sqlite,
    thin_postgres,
)

KEY = b"wrong-saver-test-key-0123456789a"
CONFIG: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    db = tmp_path / "sealed.sqlite"
    with sealed_sqlite(db, env_serde(KEY)) as saver:
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"secret": "value"}
        checkpoint["channel_versions"] = {"secret": 1}
        saver.put(CONFIG, checkpoint, {"source": "input", "step": -1}, {"secret": 1})
    return db


def test_a_stock_saver_with_our_serializer_is_told_to_use_sealed_saver(store: Path) -> None:
    with (
        stock_sqlite(store, env_serde(KEY)) as stock,
        pytest.raises(PlaintextRefusedError, match=r"SealedSaver\(inner_saver"),
    ):
        stock.get_tuple(CONFIG)


def test_other_plaintext_rows_keep_their_own_refusal() -> None:
    serde = env_serde(KEY)
    with pytest.raises(PlaintextRefusedError) as refused:
        serde.loads_typed(("bytes", b"not a sealed cell"))
    assert "SealedSaver" not in str(refused.value)


def test_a_stock_saver_with_the_default_serializer_sees_only_sealed_cells(store: Path) -> None:
    with stock_sqlite(store) as bare:
        found = bare.get_tuple(CONFIG)
    assert found is not None
    # A short str is inline, in the sealed record (secure_serde/sealing/_record.py): the stock
    # saver sees no value for its channel, only the marker cell, and the record as sealed text.
    values = found.checkpoint["channel_values"]
    assert list(values) == [MARKER_CHANNEL]
    assert values[MARKER_CHANNEL].startswith(b"SSC1")
    assert "'value'" not in repr((found.checkpoint, found.metadata))


def test_a_cell_is_what_a_stock_saver_sees_of_a_value_that_is_not_inline(tmp_path: Path) -> None:
    db = tmp_path / "sealed.sqlite"
    with sealed_sqlite(db, env_serde(KEY)) as saver:
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"secret": ["value"]}
        checkpoint["channel_versions"] = {"secret": 1}
        saver.put(CONFIG, checkpoint, {"source": "input", "step": -1}, {"secret": 1})
    with stock_sqlite(db) as bare:
        found = bare.get_tuple(CONFIG)
    assert found is not None
    cell = found.checkpoint["channel_values"]["secret"]
    assert isinstance(cell, bytes)
    assert cell.startswith(b"SSC1")
    assert b"value" not in cell


def test_a_stock_postgres_saver_with_our_serializer_refuses_an_all_inline_checkpoint(
    postgres_url: str,
) -> None:
    # Every value here is inline in the sealed record, so without the marker cell the stock
    # saver would find no blob to refuse and return the checkpoint with no values at all.
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"count": 3, "flag": True, "name": "short"}
    checkpoint["channel_versions"] = {"count": 1, "flag": 1, "name": 1}
    with thin_postgres(postgres_url, env_serde(KEY)) as sealed:
        sealed.put(
            CONFIG, checkpoint, {"source": "input", "step": -1}, {"count": 1, "flag": 1, "name": 1}
        )
        opened = sealed.get_tuple(CONFIG)
    assert opened is not None
    assert opened.checkpoint["channel_values"] == {"count": 3, "flag": True, "name": "short"}
    with (
        stock_postgres(postgres_url, env_serde(KEY)) as stock,
        pytest.raises(PlaintextRefusedError, match=r"SealedSaver\(inner_saver"),
    ):
        stock.get_tuple(CONFIG)
