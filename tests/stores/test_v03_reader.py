"""`V03Reader` on its own: it only reads, opens what it should, and refuses bad input by type.

Read on the frozen stores (tests/vectors/v03_sqlite_store.sqlite, and the PostgreSQL dump of
tests/stores/test_v03_postgres_vector.py), so these tests stay once 0.3's savers are gone.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any, Final

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import (
    BindingError,
    BlindIndexError,
    EncryptedSerializer,
    Migration,
    UnboundValueError,
)
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.crypto import Key
from secure_serde.savers.sqlite import SqliteSaver
from secure_serde.stores import HistoryView, StoreError, V03Reader, open_store
from secure_serde.stores._v03_index import V03IndexKeys
from secure_serde.stores._v03_metadata import V03Metadata
from secure_serde.stores._v03_rows import V03Rows
from tests.savers.test_adopt import THREAD, VECTOR, serde
from tests.stores.test_v03_postgres_vector import load_vector
from tests.stores.v03_support import serde as pg_serde


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "v03.sqlite"
    shutil.copyfile(VECTOR, path)
    return path


def cfg(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def test_the_reader_only_reads(store: Path) -> None:
    before = store.read_bytes()
    with V03Reader(store, serde=serde()) as reader:
        newest = reader.get_tuple(THREAD)
        assert newest is not None
        with pytest.raises(ValueError, match="only reads"):
            reader.put(cfg("x"), empty_checkpoint(), {"source": "input", "step": -1}, {})
        with pytest.raises(ValueError, match="only reads"):
            reader.put_writes(cfg("x", "1"), [("a", 1)], "t")
        with pytest.raises(ValueError, match="filters"):
            list(reader.list(None, filter={"source": "loop"}))
        history = list(reader.list(THREAD))
        assert history[0] == newest
        assert list(reader.list(THREAD, before=history[1].config, limit=2)) == history[2:4]
        assert list(reader.list(THREAD, limit=1)) == history[:1]
        assert reader.get_tuple(cfg("nobody")) is None
    assert store.read_bytes() == before


def test_a_serde_that_cannot_bind_is_refused(store: Path) -> None:
    with pytest.raises(ValueError, match="binds"):
        V03Reader(store, serde=JsonPlusSerializer())  # type: ignore[arg-type]


def test_a_missing_file_is_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "missing.sqlite"
    with pytest.raises(StoreError):
        V03Reader(missing, serde=serde())
    assert not missing.exists()


def test_a_store_sealed_by_sealed_saver_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "sealed.sqlite"
    with SqliteSaver.from_conn_string(str(path), serde=serde()) as saver:
        saver.setup()
    with pytest.raises(StoreError, match="SealedSaver"):
        V03Reader(path, serde=serde())


def test_a_view_given_is_used_and_left_open(store: Path) -> None:
    with open_store(store) as opened, HistoryView(opened) as view:
        with V03Reader(view, serde=serde()) as reader:
            assert reader.get_tuple(THREAD) is not None
        assert view.checkpoint_ids("chat-1", "", 1)  # still open
        with V03Reader(opened, serde=serde()) as reader:
            assert reader.get_tuple(THREAD) is not None


def test_a_writes_table_without_task_path_reads_as_langgraph_reads_it(store: Path) -> None:
    """Such a table reads as task_path '' (langgraph's rule); 0.3 bound the real one."""
    with sqlite3.connect(store) as conn:
        conn.execute("ALTER TABLE writes DROP COLUMN task_path")
    with V03Reader(store, serde=serde()) as reader, pytest.raises(BindingError, match="write row"):
        reader.get_tuple(THREAD)


def test_planted_metadata_that_is_no_object_is_a_typed_error(postgres_url: str) -> None:
    load_vector(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE checkpoints SET checkpoint = checkpoint - '__secure_serde_record__',"
            " metadata = '5' WHERE thread_id = 'review-2'"
        )
    lenient = Migration(unbound=True)
    with V03Reader(postgres_url, serde=pg_serde(lenient), migration=lenient) as reader:
        with pytest.raises(BindingError, match="JSON object"):
            reader.get_tuple(cfg("review-2"))
        assert reader.get_tuple(cfg("review-1")) is not None


# --- the reader's record and blind-index checks, pinned by the frozen 0.3 vectors ----------

VECTORS: Final = Path(__file__).resolve().parents[1] / "vectors"
SEALS: Final = json.loads((VECTORS / "record_seal.json").read_text())["vectors"]
TOKENS: Final = json.loads((VECTORS / "blind_index.json").read_text())["vectors"]


def _rows(key: str, migration: Migration = Migration.NONE) -> V03Rows:
    reading = EncryptedSerializer(EnvKeyCipher(key=key))
    return V03Rows(reading, migration, V03Metadata(reading, migration, **_VIEWER))


_VIEWER: Final[dict[str, Any]] = {
    "seal_metadata": False,
    "plaintext_metadata": None,
    "indexed_metadata": None,
    "index_key": None,
}


@pytest.mark.parametrize("vector", SEALS, ids=lambda v: str(v["comment"]))
def test_a_frozen_record_seal_authenticates_only_its_record(vector: dict[str, Any]) -> None:
    rows = _rows(vector["key"])
    row = (vector["thread_id"], vector["checkpoint_ns"], vector["checkpoint_id"])
    rows._check_record(row, vector["parent_id"], vector["record"], vector["seal"])
    edited = {**vector["record"], "channel_versions": {"messages": "00000000000000000000.0.9"}}
    other_thread = (row[0] + "-other", row[1], row[2])
    for where, parent, record in (
        (row, vector["parent_id"], edited),
        (row, "1ef-another-parent", vector["record"]),
        (other_thread, vector["parent_id"], vector["record"]),
    ):
        with pytest.raises(BindingError):
            rows._check_record(where, parent, record, vector["seal"])
    with pytest.raises(UnboundValueError):
        rows._check_record(row, vector["parent_id"], vector["record"], None)
    _rows(vector["key"], Migration(unbound=True))._check_record(
        row, vector["parent_id"], vector["record"], None
    )


@pytest.mark.parametrize("vector", TOKENS, ids=lambda v: str(v["comment"]))
def test_a_frozen_index_token_verifies_only_its_value(vector: dict[str, Any]) -> None:
    keys = V03IndexKeys([Key.derive(vector["key"])])
    keys.verify(vector["name"], vector["value"], vector["token"])
    with pytest.raises(BlindIndexError):
        keys.verify(vector["name"], [vector["value"], "other"], vector["token"])
    with pytest.raises(BlindIndexError):
        keys.verify(vector["name"] + "x", vector["value"], vector["token"])
    with pytest.raises(BlindIndexError, match="unknown or retired"):
        keys.verify(vector["name"], vector["value"], "0" * 8 + vector["token"][8:])
