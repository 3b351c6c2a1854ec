"""The sealed Postgres savers write an unchanged primitive's blob once, not at every put.

Every primitive channel value is a blob (secure_serde/savers/_values.py). A saver rewrites the
blob of an unchanged primitive only when it has not itself stored that version, so a thread
it runs costs one encryption and one row per changed channel, as non-primitive channels cost
the stock saver; a thread the stock saver started still gets its missing blobs. Runs against
the suite's real PostgreSQL; the serializer below is a real `EncryptedSerializer` that also
notes which values it encrypts.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver as StockSaver

from secure_serde import EncryptedSerializer
from secure_serde._binding import Location
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.savers._v03_postgres import AsyncPostgresSaver, PostgresSaver
from tests.fixtures_services import saver_connection

KEY = b"rewrite-tests-key-0123456789abcd"
TOPIC = "billing question about invoice 2291"


class NotingSerializer(EncryptedSerializer):
    """Encrypts as usual, and counts every value it is given, by repr."""

    def __init__(self) -> None:
        super().__init__(EnvKeyCipher(KEY))
        self.encrypted: Counter[str] = Counter()

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        self.encrypted[repr(obj)] += 1
        return super().dumps_typed(obj)

    def dumps_typed_at(self, obj: Any, location: Location) -> tuple[str, bytes]:
        # The sealed saver binds every value to its row (issue 10). Record seals (the
        # encryption of None at each checkpoint) are not channel values: not counted.
        if location.kind != "checkpoint":
            self.encrypted[repr(obj)] += 1
        return super().dumps_typed_at(obj, location)


class Chain:
    """Checkpoints of one thread: ``topic`` and ``flag`` never change after the first."""

    def __init__(self, saver: Any, thread_id: str) -> None:
        self.saver = saver
        self.config: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        self.versions: dict[str, Any] = {}
        self.values: dict[str, Any] = {"topic": TOPIC, "flag": None, "turn": 0}
        self.step = 0

    def next_args(self, metadata: Any = None) -> tuple[Any, ...]:
        self.values["turn"] = self.step * 7 + 1000
        changed = ("turn",) if self.versions else tuple(self.values)
        new_versions = {k: self.saver.get_next_version(self.versions.get(k), None) for k in changed}
        self.versions.update(new_versions)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = dict(self.values)
        checkpoint["channel_versions"] = dict(self.versions)
        self.step += 1
        meta = metadata if metadata is not None else {"source": "loop", "step": self.step}
        return self.config, checkpoint, meta, new_versions

    def put(self) -> None:
        self.config = self.saver.put(*self.next_args())

    async def aput(self) -> None:
        self.config = await self.saver.aput(*self.next_args())


def blob_rows(url: str, thread_id: str, channel: str) -> int:
    with saver_connection(url) as conn:
        row = conn.execute(
            "SELECT count(*) AS n FROM checkpoint_blobs WHERE thread_id = %s AND channel = %s",
            (thread_id, channel),
        ).fetchone()
    assert row is not None
    return int(row["n"])


def test_unchanged_primitives_are_encrypted_once(postgres_url: str) -> None:
    serde = NotingSerializer()
    with saver_connection(postgres_url) as conn:
        StockSaver(conn).setup()
        saver = PostgresSaver(conn, serde=serde)
        chain = Chain(saver, "t")
        for _ in range(5):
            chain.put()
        assert serde.encrypted[repr(TOPIC)] == 1
        assert serde.encrypted["None"] == 1
        assert [serde.encrypted[repr(1000 + 7 * i)] for i in range(5)] == [1] * 5
        # Every checkpoint still reads every primitive back, from the one stored blob.
        history = list(saver.list({"configurable": {"thread_id": "t"}}))
    assert [t.checkpoint["channel_values"] for t in history] == [
        {"topic": TOPIC, "flag": None, "turn": 1000 + 7 * i} for i in reversed(range(5))
    ]
    assert blob_rows(postgres_url, "t", "topic") == 1
    assert blob_rows(postgres_url, "t", "turn") == 5


def test_another_saver_writes_the_unchanged_blobs_again_once(postgres_url: str) -> None:
    # A new saver (another process, a restart) cannot know which blobs exist, so its first
    # put rewrites them, as it must for a thread the stock saver started.
    with saver_connection(postgres_url) as conn:
        StockSaver(conn).setup()
        first = Chain(PostgresSaver(conn, serde=NotingSerializer()), "t")
        first.put()
        first.put()
        serde = NotingSerializer()
        first.saver = PostgresSaver(conn, serde=serde)
        for _ in range(3):
            first.put()
    assert serde.encrypted[repr(TOPIC)] == 1
    assert serde.encrypted["None"] == 1


def test_a_failed_put_records_nothing(postgres_url: str) -> None:
    serde = NotingSerializer()
    with saver_connection(postgres_url) as conn:
        StockSaver(conn).setup()
        # Unsealed metadata: the stock put's own JSON then fails, after our routing ran.
        saver = PostgresSaver(conn, serde=serde, seal_metadata=False)
        chain = Chain(saver, "t")
        # Metadata JSON cannot hold this, so the stock put fails after our routing ran.
        with pytest.raises(TypeError):
            saver.put(*chain.next_args(metadata={"source": "loop", "bad": object()}))
        chain.put()
        chain.put()
        found = saver.get_tuple(chain.config)
    # The failed put's blobs were not remembered: the next put encrypted topic. (The sealed
    # saver's record seal refuses the metadata before any blob is encrypted, so that is the
    # first time; had the failed put recorded topic, it would never have been written.)
    assert serde.encrypted[repr(TOPIC)] == 1
    assert found is not None
    assert found.checkpoint["channel_values"]["topic"] == TOPIC


async def test_async_saver_encrypts_unchanged_primitives_once(postgres_url: str) -> None:
    serde = NotingSerializer()
    with saver_connection(postgres_url) as conn:
        StockSaver(conn).setup()
    async with AsyncPostgresSaver.from_conn_string(postgres_url, serde=serde) as saver:
        chain = Chain(saver, "t")
        for _ in range(4):
            await chain.aput()
        found = await saver.aget_tuple(chain.config)
    assert serde.encrypted[repr(TOPIC)] == 1
    assert found is not None
    assert found.checkpoint["channel_values"] == {"topic": TOPIC, "flag": None, "turn": 1021}
