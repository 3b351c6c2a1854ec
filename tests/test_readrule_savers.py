"""The sealed PostgreSQL savers on the suite's real PostgreSQL: what an attacker can plant there.

* Sealed metadata downgraded: the envelope deleted and a sealed key written in plaintext, or a
  plaintext key planted beside the envelope. Refused, except under
  ``Migration.plaintext_metadata``, where the sealed value still wins.
* A serde whose type tag is not a cipher's (``PickleFallbackSerializer``: ``msgpack+pickle``)
  must not be taken for an encrypting one by the metadata sealer.
* Inline values and plaintext-tagged envelopes are read strictly under the migration switches.

Each record these savers write is sealed (issue 10), so any edit to the metadata or the
checkpoint JSON fails its seal first (`BindingError`). The checks here are the ones that still
stand for records with no seal, written before binding and read under
``Migration(unbound=True)``: `strip_record_seals` makes the rows such.
"""

from __future__ import annotations

import logging
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
    EncryptedSerializer,
    EncryptionError,
    MetadataDowngradeError,
    Migration,
    StrictDecodeError,
)
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.pickling import NUMPY, PickleFallbackSerializer
from secure_serde.savers import SEALED_METADATA_KEY
from secure_serde.savers._bound import RECORD_KEY
from secure_serde.savers._v03_postgres import AsyncPostgresSaver, PostgresSaver
from tests.fixtures_services import saver_connection
from tests.planted_msgpack import PlantedCall, planted_value

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
    row: Any = conn.execute("SELECT metadata FROM checkpoints").fetchone()
    return dict(row["metadata"])


def write_metadata(conn: psycopg.Connection[Any], metadata: dict[str, Any]) -> None:
    conn.execute("UPDATE checkpoints SET metadata = %s", (Jsonb(metadata),))


def strip_record_seals(conn: psycopg.Connection[Any]) -> None:
    """Make every record look written before binding: no seal."""
    result = conn.execute("UPDATE checkpoints SET checkpoint = checkpoint - %s", (RECORD_KEY,))
    assert result.rowcount >= 1


UNBOUND = Migration(unbound=True)


@pytest.fixture
def sealed(postgres_url: str) -> Iterator[tuple[psycopg.Connection[Any], PostgresSaver, Any]]:
    with saver_connection(postgres_url) as conn:
        saver = PostgresSaver(conn, serde=serde(), plaintext_metadata=["tenant"])
        saver.setup()
        stored = put(saver, "t", api_key=API_KEY, tenant="acme")
        tup = saver.get_tuple(stored)
        assert tup is not None
        assert tup.metadata.get("api_key") == API_KEY
        assert SEALED_METADATA_KEY in stored_metadata(conn)
        yield conn, saver, stored


def test_deleted_envelope_with_the_key_in_plaintext_is_refused(
    sealed: tuple[Any, PostgresSaver, Any], caplog: pytest.LogCaptureFixture
) -> None:
    conn, saver, stored = sealed
    metadata = stored_metadata(conn)
    del metadata[SEALED_METADATA_KEY]
    metadata["api_key"] = "attacker-chosen"
    write_metadata(conn, metadata)
    with pytest.raises(BindingError):
        saver.get_tuple(stored)
    strip_record_seals(conn)
    saver = PostgresSaver(conn, serde=serde(), plaintext_metadata=["tenant"], migration=UNBOUND)
    with pytest.raises(MetadataDowngradeError, match="api_key") as caught:
        saver.get_tuple(stored)
    assert caught.value.keys == ("api_key",)
    assert "attacker-chosen" not in str(caught.value)
    with pytest.raises(MetadataDowngradeError):
        list(saver.list(None))
    # Under the logged migration switch, rows written before sealing was turned on read.
    migrating = PostgresSaver(
        conn,
        serde=serde(),
        plaintext_metadata=["tenant"],
        migration=Migration(plaintext_metadata=True, unbound=True),
    )
    with caplog.at_level(logging.WARNING, logger="secure_serde"):
        tup = migrating.get_tuple(stored)
    assert tup is not None
    assert tup.metadata.get("api_key") == "attacker-chosen"
    assert any("Migration.plaintext_metadata" in r.getMessage() for r in caplog.records)


def test_sealed_value_wins_over_a_planted_plaintext_key(
    sealed: tuple[Any, PostgresSaver, Any],
) -> None:
    conn, saver, stored = sealed
    metadata = stored_metadata(conn)
    metadata["api_key"] = "planted"
    write_metadata(conn, metadata)
    with pytest.raises(BindingError):
        saver.get_tuple(stored)
    strip_record_seals(conn)
    saver = PostgresSaver(conn, serde=serde(), plaintext_metadata=["tenant"], migration=UNBOUND)
    with pytest.raises(MetadataDowngradeError):
        saver.get_tuple(stored)
    migrating = PostgresSaver(
        conn,
        serde=serde(),
        plaintext_metadata=["tenant"],
        migration=Migration(plaintext_metadata=True, unbound=True),
    )
    tup = migrating.get_tuple(stored)
    assert tup is not None
    assert tup.metadata.get("api_key") == API_KEY
    assert tup.metadata.get("tenant") == "acme"


def test_plaintext_keys_the_saver_does_not_seal_are_not_a_downgrade(
    sealed: tuple[Any, PostgresSaver, Any],
) -> None:
    conn, saver, stored = sealed
    metadata = stored_metadata(conn)
    metadata["tenant"] = "other"
    write_metadata(conn, metadata)
    # The record seal covers plaintext keys too.
    with pytest.raises(BindingError):
        saver.get_tuple(stored)
    strip_record_seals(conn)
    saver = PostgresSaver(conn, serde=serde(), plaintext_metadata=["tenant"], migration=UNBOUND)
    tup = saver.get_tuple(stored)
    assert tup is not None
    assert tup.metadata.get("tenant") == "other"


async def test_async_saver_refuses_a_downgrade(postgres_url: str) -> None:
    async with AsyncPostgresSaver.from_conn_string(
        postgres_url, serde=serde(), plaintext_metadata=()
    ) as saver:
        await saver.setup()
        config: RunnableConfig = {
            "configurable": {"thread_id": "t", "checkpoint_ns": "", "api_key": API_KEY}
        }
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"x": [1]}
        checkpoint["channel_versions"] = {"x": 1}
        stored = await saver.aput(config, checkpoint, {"source": "input", "step": -1}, {"x": 1})
        with saver_connection(postgres_url) as conn:
            metadata = stored_metadata(conn)
            del metadata[SEALED_METADATA_KEY]
            metadata["api_key"] = "attacker-chosen"
            write_metadata(conn, metadata)
        with pytest.raises(BindingError):
            await saver.aget_tuple(stored)
        with saver_connection(postgres_url) as conn:
            strip_record_seals(conn)
    async with AsyncPostgresSaver.from_conn_string(
        postgres_url, serde=serde(), plaintext_metadata=(), migration=UNBOUND
    ) as saver:
        with pytest.raises(MetadataDowngradeError):
            await saver.aget_tuple(stored)
    async with AsyncPostgresSaver.from_conn_string(
        postgres_url,
        serde=serde(),
        plaintext_metadata=(),
        migration=Migration(plaintext_metadata=True, unbound=True),
    ) as migrating:
        tup = await migrating.aget_tuple(stored)
        assert tup is not None
        assert tup.metadata.get("api_key") == "attacker-chosen"


def test_pickle_fallback_alone_is_not_an_encrypting_serde(postgres_url: str) -> None:
    # A numpy value in the metadata makes PickleFallbackSerializer tag it msgpack+pickle:
    # a "+" in the tag, but no cipher.
    extra = {"score": np.float32(1.5)}
    assert PickleFallbackSerializer(allowed=[NUMPY]).dumps_typed(extra)[0] == "msgpack+pickle"
    with saver_connection(postgres_url) as conn:
        saver = PostgresSaver(
            conn, serde=PickleFallbackSerializer(allowed=[NUMPY]), plaintext_metadata=["tenant"]
        )
        saver.setup()
        with pytest.raises(EncryptionError, match="encrypting serde"):
            put(saver, "t", extra, api_key=API_KEY)
        count: Any = conn.execute("SELECT count(*) AS n FROM checkpoints").fetchone()
        assert count["n"] == 0
        # Wrapped in EncryptedSerializer it seals, and reads back.
        wrapped = PostgresSaver(
            conn,
            serde=EncryptedSerializer(EnvKeyCipher(KEY), PickleFallbackSerializer(allowed=[NUMPY])),
            plaintext_metadata=["tenant"],
        )
        tup = wrapped.get_tuple(put(wrapped, "t", extra, api_key=API_KEY))
        assert tup is not None
        assert tup.metadata.get("api_key") == API_KEY
        assert tup.metadata.get("score") == np.float32(1.5)


def test_plaintext_tagged_envelope_is_read_strictly(
    sealed: tuple[Any, PostgresSaver, Any],
) -> None:
    import base64

    conn, _, stored = sealed
    metadata = stored_metadata(conn)
    metadata[SEALED_METADATA_KEY] = {
        "type": "msgpack",
        "data": base64.b64encode(planted_value()).decode("ascii"),
    }
    write_metadata(conn, metadata)
    strip_record_seals(conn)
    reader = PostgresSaver(
        conn,
        serde=serde(migration=Migration(plaintext=True)),
        plaintext_metadata=["tenant"],
        migration=UNBOUND,
    )
    with pytest.raises(StrictDecodeError):
        reader.get_tuple(stored)
    assert not PlantedCall.ran


def test_planted_inline_object_is_refused_even_under_the_switch(postgres_url: str) -> None:
    with saver_connection(postgres_url) as conn:
        saver = PostgresSaver(conn, serde=serde())
        saver.setup()
        stored = put(saver, "t")
        conn.execute(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{channel_values,verdict}',"
            ' \'{"lc": 1, "type": "constructor", "id": ["os", "system"]}\')'
        )
        # Refused before the record seal is even looked at.
        for migrating in (
            PostgresSaver(conn, serde=serde(), migration=Migration(inline_values=True)),
            PostgresSaver(conn, serde=serde(), migration=Migration(inline_values=True)),
        ):
            with pytest.raises(StrictDecodeError, match="verdict"):
                migrating.get_tuple(stored)
        # A primitive, which the stock saver does inline, still reads under the switch,
        # in a record with no seal (the sealed saver never inlines, so a seal fails).
        conn.execute(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{channel_values,verdict}',"
            " '\"approved\"')"
        )
        with pytest.raises(BindingError):
            PostgresSaver(conn, serde=serde(), migration=Migration(inline_values=True)).get_tuple(
                stored
            )
        strip_record_seals(conn)
        tup = PostgresSaver(
            conn, serde=serde(), migration=Migration(unbound=True, inline_values=True)
        ).get_tuple(stored)
        assert tup is not None
        assert tup.checkpoint["channel_values"]["verdict"] == "approved"
