"""langgraph-checkpoint-conformance, for every saver we support paired with every cipher.

Savers: InMemorySaver, SqliteSaver, AsyncSqliteSaver, and the sealed savers of
`secure_serde.savers` (`SealedSaver` around the stock ones): AsyncPostgresSaver (on the real
PostgreSQL fixture), SqliteSaver and AsyncSqliteSaver. Ciphers: EnvKeyCipher, KeyRotationCipher
(two keys, "b" primary) and KmsEnvelopeCipher (moto over HTTP). A new cipher is one more entry
in ``CIPHERS``. (tests/sealing/test_conformance_matrix.py runs `SealedSaver` around every inner
saver kind under one cipher.)

The suite runs every base capability and each extended one it detects; the test requires them
all to pass, pins which ones are detected (so a saver that gains or loses one is noticed), and
checks afterwards that what the suite stored went through the cipher: the type tags of the
stored rows, or for the sealed savers those of the sealed cells they hand the stock saver."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import aiosqlite
import psycopg
import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
)
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import BASE_CAPABILITIES
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from secure_serde import EncryptedSerializer
from secure_serde.ciphers import EnvKeyCipher, KeyRotationCipher, KmsEnvelopeCipher
from secure_serde.savers.postgres import AsyncPostgresSaver
from secure_serde.savers.sqlite import AsyncSqliteSaver as SealedAsyncSqliteSaver
from secure_serde.savers.sqlite import SqliteSaver as SealedSqliteSaver
from secure_serde.sealing import cell_layout as _cell
from tests.sealing.backends_support import sync_driven

KEY_A = b"conformance-key-a-0123456789abcd"
KEY_B = b"conformance-key-b-0123456789abcd"
BASE = sorted(c.value for c in BASE_CAPABILITIES)


def _env_key(request: pytest.FixtureRequest) -> EnvKeyCipher:
    return EnvKeyCipher(KEY_A)


def _key_rotation(request: pytest.FixtureRequest) -> KeyRotationCipher:
    return KeyRotationCipher({"a": KEY_A, "b": KEY_B}, primary="b")


def _kms(request: pytest.FixtureRequest) -> KmsEnvelopeCipher:
    client = request.getfixturevalue("kms_client")
    arn = client.create_key(Description="conformance")["KeyMetadata"]["Arn"]
    return KmsEnvelopeCipher(arn, client=client)


# The parametrization point: name -> builder (a builder may pull fixtures from ``request``).
CIPHERS: dict[str, Callable[[pytest.FixtureRequest], Any]] = {
    "env-key": _env_key,
    "key-rotation": _key_rotation,
    "kms": _kms,
}


@pytest.fixture(params=sorted(CIPHERS))
def serde(request: pytest.FixtureRequest) -> EncryptedSerializer:
    return EncryptedSerializer(CIPHERS[request.param](request))


def cipher_suffix(serde: EncryptedSerializer) -> str:
    type_tag, _ = serde.dumps_typed("probe")
    return "+" + type_tag.rpartition("+")[2]


class _AsyncBySync(BaseCheckpointSaver[str]):
    """SqliteSaver, its async methods run by its own sync ones (the suite is async-only).

    The stock class raises NotImplementedError from every async method and points at
    AsyncSqliteSaver; here each one calls the sync method of the same name, so what the suite
    tests is SqliteSaver's own code.
    """

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.get_tuple(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for item in self.list(config, filter=filter, before=before, limit=limit):
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self.put(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Any,
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.put_writes(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        self.delete_thread(thread_id)


class SyncSqliteSaver(_AsyncBySync, SqliteSaver):
    """The stock SqliteSaver, driven through its sync methods."""


def _types_in_sqlite(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as conn:
        rows = conn.execute("SELECT type FROM checkpoints UNION ALL SELECT type FROM writes")
        return [r[0] for r in rows]


def _types_in_postgres(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT type FROM checkpoint_blobs UNION ALL SELECT type FROM checkpoint_writes"
        ).fetchall()
        return [r[0] for r in rows]


def _sealed_types(tuples: list[CheckpointTuple]) -> list[str]:
    """The type tags of the sealed cells the stock saver holds: every channel value and write."""
    types = [
        _cell.unpack(v, _cell.VALUE).type_tag
        for t in tuples
        for v in t.checkpoint["channel_values"].values()
    ]
    types += [
        _cell.unpack(v, _cell.WRITE).type_tag for t in tuples for _, _, v in t.pending_writes or ()
    ]
    return types


def _types_in_memory(savers: list[InMemorySaver]) -> list[str]:
    types: list[str] = []
    for saver in savers:
        for by_ns in saver.storage.values():
            for by_id in by_ns.values():
                for checkpoint, metadata, _parent in by_id.values():
                    types += [checkpoint[0], metadata[0]]
        types += [blob[0] for blob in saver.blobs.values()]
        for writes in saver.writes.values():
            types += [w[2][0] for w in writes.values()]
    return types


class Case:
    """One saver kind: a conformance factory, and what it stored once the suite is done."""

    def __init__(self, name: str, extended: list[str]) -> None:
        self.name = name
        self.expected = sorted([*BASE, *extended])
        self.memory: list[InMemorySaver] = []

    def factory(self, serde: EncryptedSerializer, tmp_path: Path, pg_url: str | None) -> Any:
        db = tmp_path / "conformance.sqlite"
        if self.name == "sealed-SqliteSaver":

            async def sealed_sync() -> AsyncIterator[BaseCheckpointSaver[Any]]:
                with closing(sqlite3.connect(db, check_same_thread=False)) as conn:
                    # Metadata is sealed, as on PostgreSQL below: the suite's "score" is indexed.
                    yield sync_driven(
                        SealedSqliteSaver(conn, serde=serde, indexed_metadata=["score"])
                    )

            return sealed_sync
        if self.name == "sealed-AsyncSqliteSaver":

            async def sealed_async() -> AsyncIterator[BaseCheckpointSaver[Any]]:
                async with SealedAsyncSqliteSaver.from_conn_string(
                    str(db), serde=serde, indexed_metadata=["score"]
                ) as saver:
                    yield saver

            return sealed_async
        if self.name == "InMemorySaver":

            async def memory() -> AsyncIterator[BaseCheckpointSaver[Any]]:
                saver = InMemorySaver(serde=serde)
                self.memory.append(saver)
                yield saver

            return memory
        if self.name == "SqliteSaver":

            async def sqlite_sync() -> AsyncIterator[BaseCheckpointSaver[Any]]:
                with closing(sqlite3.connect(db)) as conn:
                    yield SyncSqliteSaver(conn, serde=serde)

            return sqlite_sync
        if self.name == "AsyncSqliteSaver":

            async def sqlite_async() -> AsyncIterator[BaseCheckpointSaver[Any]]:
                async with aiosqlite.connect(db) as conn:
                    yield AsyncSqliteSaver(conn, serde=serde)

            return sqlite_async

        assert pg_url is not None

        async def postgres() -> AsyncIterator[BaseCheckpointSaver[Any]]:
            # The suite filters on a custom key ("score"): metadata is sealed, so it is
            # indexed (under the store's own index key, KMS or not).
            async with AsyncPostgresSaver.from_conn_string(
                pg_url, serde=serde, indexed_metadata=["score"]
            ) as saver:
                await saver.asetup()
                yield saver

        return postgres

    def stored_types(self, tmp_path: Path, pg_url: str | None) -> list[str]:
        if self.name == "InMemorySaver":
            return _types_in_memory(self.memory)
        if self.name.startswith("sealed-"):
            return _sealed_types(self._bare_tuples(tmp_path, pg_url))
        if pg_url is not None:
            return _types_in_postgres(pg_url)
        return _types_in_sqlite(tmp_path / "conformance.sqlite")

    def _bare_tuples(self, tmp_path: Path, pg_url: str | None) -> list[CheckpointTuple]:
        """Every checkpoint the stock saver under the sealed one holds, read by a bare one."""
        if pg_url is not None:
            from langgraph.checkpoint.postgres import PostgresSaver

            with PostgresSaver.from_conn_string(pg_url) as bare:
                return list(bare.list(None))
        with closing(sqlite3.connect(tmp_path / "conformance.sqlite")) as conn:
            return list(SqliteSaver(conn).list(None))


CASES = {
    "InMemorySaver": [],
    "SqliteSaver": [],
    "AsyncSqliteSaver": [],
    # SealedSaver keeps the stock saver's capabilities and adds copy_thread.
    "secure_serde.sealed-AsyncPostgresSaver": ["copy_thread", "prune"],
    "secure_serde.sealed-SqliteSaver": ["copy_thread"],
    "secure_serde.sealed-AsyncSqliteSaver": ["copy_thread"],
}


@pytest.fixture(params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> Iterator[tuple[Case, str | None]]:
    case = Case(request.param.rpartition(".")[2], CASES[request.param])
    if request.param.endswith("PostgresSaver"):
        yield case, request.getfixturevalue("postgres_url")
    else:
        yield case, None


async def test_conformance(
    case: tuple[Case, str | None], serde: EncryptedSerializer, tmp_path: Path
) -> None:
    saver_case, pg_url = case
    registered = checkpointer_test(name=saver_case.name)(
        saver_case.factory(serde, tmp_path, pg_url)
    )
    report = await validate(registered)

    failures = {cap: r.failures for cap, r in report.results.items() if r.failures}
    assert report.passed_all_base(), failures
    assert report.passed_all(), failures
    detected = sorted(cap for cap, r in report.results.items() if r.detected)
    assert detected == saver_case.expected

    # The suite passed through our serde, not around it: every stored type tag carries the
    # cipher's name (and there were some).
    types = saver_case.stored_types(tmp_path, pg_url)
    suffix = cipher_suffix(serde)
    assert len([t for t in types if t.endswith(suffix)]) > 20
    assert [t for t in types if not t.endswith(suffix) and t != "empty"] == []
