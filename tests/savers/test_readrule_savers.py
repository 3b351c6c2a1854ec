"""The sealed PostgreSQL savers on the suite's real PostgreSQL: what an attacker can plant there.

The savers are `secure_serde.savers.postgres`' (`SealedSaver` around the stock ones): each
checkpoint's record, its sealed metadata included, is one sealed cell in the metadata JSON
(``__secure_serde__``), beside the keys left in plaintext and the blind-index tokens.

* Sealed metadata downgraded: the sealed entry deleted and a sealed key written in plaintext,
  or a key planted beside the entry. Refused (`BindingError`, `MetadataDowngradeError`), the
  planted value never returned.
* A key left in plaintext (``plaintext_metadata``) changed: refused, it must equal its sealed
  copy.
* A serde whose type tag is not a cipher's (``PickleFallbackSerializer``: ``msgpack+pickle``)
  is not taken for an encrypting one.
* A planted plaintext-tagged value in place of the record, and 0.3's envelope layout, are
  refused before anything is decoded, even with the serializer's plaintext switch on.
* Values planted inline in the checkpoint JSON, where the stock saver keeps primitives, are
  never read: the record comes from its seal.

0.3's savers read records with no seal under ``Migration(unbound=True)`` and downgraded
metadata under ``Migration.unsealed_metadata``; `SealedSaver` has no such switch (a bound
store stays bound), so those reads are gone with them.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from psycopg.types.json import Jsonb

from secure_serde import (
    BindingError,
    ConfigurationError,
    EncryptedSerializer,
    MetadataDowngradeError,
    Migration,
)
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.pickling import NUMPY, PickleFallbackSerializer
from secure_serde.savers.postgres import AsyncPostgresSaver, PostgresSaver
from secure_serde.sealing import cell_layout as _cell
from tests.fixtures_services import saver_connection
from tests.planted_msgpack import PlantedCall, planted_value

# The metadata entry holding each checkpoint's sealed record (secure_serde/sealing/_codec.py).
RECORD_KEY = "__secure_serde__"
KEY = b"readrule-saver-key-0123456789abc"
API_KEY = "sk-readrule-0123456789"


@pytest.fixture(autouse=True)
def _reset() -> None:
    PlantedCall.reset()


def serde(**kwargs: Any) -> EncryptedSerializer:
    return EncryptedSerializer(EnvKeyCipher(KEY), **kwargs)


def put(
    saver: Any, thread_id: str, extra: dict[str, Any] | None = None, **configurable: Any
) -> Any:
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "", **configurable}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"x": [1]}
    checkpoint["channel_versions"] = {"x": 1}
    metadata: Any = {"source": "input", "step": -1, "parents": {}, **(extra or {})}
    return saver.put(config, checkpoint, metadata, {"x": 1})


def stored_metadata(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    row: Any = conn.execute("SELECT metadata FROM checkpoints WHERE thread_id = 't'").fetchone()
    return dict(row["metadata"])


def write_metadata(conn: psycopg.Connection[Any], metadata: dict[str, Any]) -> None:
    result = conn.execute(
        "UPDATE checkpoints SET metadata = %s WHERE thread_id = 't'", (Jsonb(metadata),)
    )
    assert result.rowcount == 1


@pytest.fixture
def sealed(postgres_url: str) -> Iterator[tuple[psycopg.Connection[Any], PostgresSaver, Any]]:
    with saver_connection(postgres_url) as conn:
        saver = PostgresSaver(conn, serde=serde(), plaintext_metadata=["tenant"])
        saver.setup()
        stored = put(saver, "t", api_key=API_KEY, tenant="acme")
        tup = saver.get_tuple(stored)
        assert tup is not None
        assert tup.metadata.get("api_key") == API_KEY
        metadata = stored_metadata(conn)
        assert isinstance(metadata[RECORD_KEY], str)
        assert metadata["tenant"] == "acme"
        assert "api_key" not in metadata
        yield conn, saver, stored


def test_deleted_record_with_the_key_in_plaintext_is_refused(
    sealed: tuple[Any, PostgresSaver, Any],
) -> None:
    conn, saver, stored = sealed
    metadata = stored_metadata(conn)
    del metadata[RECORD_KEY]
    metadata["api_key"] = "attacker-chosen"
    write_metadata(conn, metadata)
    with pytest.raises(BindingError) as caught:
        saver.get_tuple(stored)
    assert "attacker-chosen" not in str(caught.value)
    with pytest.raises(BindingError):
        list(saver.list(None))


def test_a_key_planted_beside_the_sealed_record_is_refused(
    sealed: tuple[Any, PostgresSaver, Any],
) -> None:
    conn, saver, stored = sealed
    metadata = stored_metadata(conn)
    metadata["api_key"] = "planted"
    write_metadata(conn, metadata)
    with pytest.raises(MetadataDowngradeError) as caught:
        saver.get_tuple(stored)
    assert "planted" not in str(caught.value)
    with pytest.raises(MetadataDowngradeError):
        list(saver.list(None))


def test_a_changed_plaintext_key_is_refused(sealed: tuple[Any, PostgresSaver, Any]) -> None:
    conn, saver, stored = sealed
    metadata = stored_metadata(conn)
    metadata["tenant"] = "other"
    write_metadata(conn, metadata)
    with pytest.raises(MetadataDowngradeError, match="tenant"):
        saver.get_tuple(stored)


async def test_async_saver_refuses_a_downgrade(postgres_url: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(postgres_url, serde=serde()) as saver:
        await saver.asetup()
        config: RunnableConfig = {
            "configurable": {"thread_id": "t", "checkpoint_ns": "", "api_key": API_KEY}
        }
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"x": [1]}
        checkpoint["channel_versions"] = {"x": 1}
        stored = await saver.aput(config, checkpoint, {"source": "input", "step": -1}, {"x": 1})
        found = await saver.aget_tuple(stored)
        assert found is not None
        assert found.metadata.get("api_key") == API_KEY
        with saver_connection(postgres_url) as conn:
            metadata = stored_metadata(conn)
            del metadata[RECORD_KEY]
            metadata["api_key"] = "attacker-chosen"
            write_metadata(conn, metadata)
        with pytest.raises(BindingError):
            await saver.aget_tuple(stored)
        with pytest.raises(BindingError):
            [t async for t in saver.alist(None)]


def test_pickle_fallback_alone_is_not_an_encrypting_serde(postgres_url: str) -> None:
    # A numpy value makes PickleFallbackSerializer tag it msgpack+pickle: a "+" in the tag,
    # but no cipher.
    assert PickleFallbackSerializer(allowed=[NUMPY]).dumps_typed(np.float32(1.5))[0] == (
        "msgpack+pickle"
    )
    with saver_connection(postgres_url) as conn:
        with pytest.raises(ConfigurationError, match="EncryptedSerializer"):
            PostgresSaver(
                conn,
                serde=PickleFallbackSerializer(allowed=[NUMPY]),  # type: ignore[arg-type]
                plaintext_metadata=["tenant"],
            )
        count: Any = conn.execute(
            "SELECT count(*) AS n FROM pg_tables WHERE tablename = 'checkpoints'"
        ).fetchone()
        assert count["n"] == 0  # refused before touching the database
        # Wrapped in EncryptedSerializer it seals, and reads back.
        wrapped = PostgresSaver(
            conn,
            serde=EncryptedSerializer(EnvKeyCipher(KEY), PickleFallbackSerializer(allowed=[NUMPY])),
            plaintext_metadata=["tenant"],
        )
        wrapped.setup()
        tup = wrapped.get_tuple(put(wrapped, "t", api_key=API_KEY))
        assert tup is not None
        assert tup.metadata.get("api_key") == API_KEY
        assert API_KEY not in str(stored_metadata(conn))


@pytest.mark.parametrize("layout", ["plaintext cell", "0.3 envelope"])
def test_a_planted_plaintext_record_is_refused_before_decoding(
    sealed: tuple[Any, PostgresSaver, Any], layout: str
) -> None:
    conn, _, stored = sealed
    metadata = stored_metadata(conn)
    if layout == "plaintext cell":
        metadata[RECORD_KEY] = _cell.to_text(_cell.pack(_cell.RECORD, "msgpack", planted_value()))
    else:
        encoded = base64.b64encode(planted_value()).decode("ascii")
        metadata[RECORD_KEY] = {"type": "msgpack", "data": encoded}
    write_metadata(conn, metadata)
    reader = PostgresSaver(
        conn, serde=serde(migration=Migration(plaintext=True)), plaintext_metadata=["tenant"]
    )
    with pytest.raises(BindingError):
        reader.get_tuple(stored)
    assert not PlantedCall.ran


@pytest.mark.parametrize(
    "planted",
    ['{"lc": 1, "type": "constructor", "id": ["os", "system"]}', '"approved"'],
    ids=["object", "primitive"],
)
def test_a_value_planted_inline_is_never_read(
    sealed: tuple[Any, PostgresSaver, Any], planted: str
) -> None:
    conn, saver, stored = sealed
    before = saver.get_tuple(stored)
    assert before is not None
    conn.execute(
        "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{channel_values,verdict}', %s)"
        " WHERE thread_id = 't'",
        (planted,),
    )
    (row,) = conn.execute("SELECT checkpoint FROM checkpoints WHERE thread_id = 't'").fetchall()
    assert "verdict" in row["checkpoint"]["channel_values"]
    # The stock saver would hand the planted value over; the sealed one reads its record.
    after = saver.get_tuple(stored)
    assert after is not None
    assert "verdict" not in after.checkpoint["channel_values"]
    assert after.checkpoint == before.checkpoint
    assert [t.checkpoint for t in saver.list(None)] == [before.checkpoint]
