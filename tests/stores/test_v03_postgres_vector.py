"""A frozen PostgreSQL store that secure_serde 0.3's sealed PostgresSaver wrote, read by V03Reader.

tests/vectors/v03_postgres_store.sql is a plain-SQL dump (``pg_dump --format=plain --inserts
--no-owner --no-privileges``, psql meta-commands left out) of a database that 0.3's sealed
PostgresSaver wrote under the test key ``tests.stores.v03_support.KEY``, with
``indexed_metadata=["user_id"]``, by ``make_vector`` of this file at commit
b2e8dcec8947834760da4032f4fac020b2fc3ed7, the last with 0.3's savers
(``python -m tests.stores.test_v03_postgres_vector PATH`` there, on a throwaway cluster): a review
thread resumed after its interrupt, one left at its interrupt, and a parent graph whose subgraph
interrupts (its own namespace), with sealed, indexed and hidden (``writes``) metadata.
`load_vector` restores it into an empty database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import psycopg
import pytest
from langchain_core.runnables import RunnableConfig

from secure_serde import BindingError, Migration, UnboundValueError
from secure_serde.stores import V03Reader
from tests.graphs_support import transcript
from tests.stores.v03_support import INDEXED, serde

VECTOR: Final = Path(__file__).resolve().parent.parent / "vectors" / "v03_postgres_store.sql"
THREADS: Final = ("parent-1", "review-1", "review-2")


def load_vector(url: str) -> None:
    """Restore the frozen store into the empty database at ``url``."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(VECTOR.read_text())


@pytest.fixture
def store(postgres_url: str) -> str:
    load_vector(postgres_url)
    return postgres_url


def cfg(thread_id: str, ns: str = "") -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}


def test_the_dump_keeps_no_secret_in_the_clear() -> None:
    text = VECTOR.read_text()
    assert "INSERT INTO public.checkpoints" in text
    for secret in ("sk-canary-0123", "draft one", "u-1", "blue", "fine"):
        assert secret not in text


def test_the_reader_reads_the_frozen_store(store: str) -> None:
    with V03Reader(store, serde=serde(), indexed_metadata=INDEXED) as reader:
        everything = list(reader.list(None))
        assert sorted({t.config["configurable"]["thread_id"] for t in everything}) == list(THREADS)
        done = reader.get_tuple(cfg("review-1"))
        assert done is not None
        values = done.checkpoint["channel_values"]
        assert transcript(values["messages"])[-1] == ("ai", "published (ok)")
        assert (values["verdict"], values["reviewer_note"]) == ("ok", "fine")
        metadata: dict[str, Any] = dict(done.metadata)
        assert metadata["team"] == "blue"
        assert "writes" not in metadata  # 0.3 dropped it on write
        first = next(dict(t.metadata) for t in everything if "api_key" in t.metadata)
        assert first["user_id"] == "u-1"
        pending = reader.get_tuple(cfg("review-2"))
        assert pending is not None
        assert [w[1] for w in pending.pending_writes or ()] == ["__interrupt__"]
        namespaces = {t.config["configurable"]["checkpoint_ns"] for t in everything}
        assert any(ns.startswith("child:") for ns in namespaces)


def test_tampering_with_the_frozen_store_is_refused(store: str) -> None:
    with psycopg.connect(store, autocommit=True) as conn:
        conn.execute(
            "UPDATE checkpoints SET checkpoint = checkpoint - '__secure_serde_record__'"
            " WHERE thread_id = 'review-2'"
        )
        conn.execute(
            'UPDATE checkpoints SET metadata = metadata || \'{"team": "red"}\''
            " WHERE thread_id = 'review-1'"
        )
    with V03Reader(store, serde=serde(), indexed_metadata=INDEXED) as reader:
        with pytest.raises(UnboundValueError):
            reader.get_tuple(cfg("review-2"))
        with pytest.raises(BindingError):  # the record fails before the metadata is looked at
            reader.get_tuple(cfg("review-1"))
        assert reader.get_tuple(cfg("parent-1")) is not None
    lenient = Migration(unbound=True)
    with V03Reader(store, serde=serde(lenient), migration=lenient) as reader:
        assert reader.get_tuple(cfg("review-2")) is not None
