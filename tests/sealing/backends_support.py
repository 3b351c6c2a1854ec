"""The inner savers of the sealing matrix: one store per kind, savers opened on it, raw access.

Issue 21 asks for one matrix over inner savers: InMemorySaver, SqliteSaver (a file),
AsyncSqliteSaver, PostgresSaver and AsyncPostgresSaver (the real PostgreSQL fixture), and
langgraph-checkpoint-aws's DynamoDBSaver (the suite's moto server, over HTTP). A `Lane` is one
inner saver kind driven one way (sync or async); a `Store` is one fresh storage of a kind:
``store.saver(sealed=...)`` opens a saver on it, sealed (``SealedSaver(inner)``) or bare (the
inner saver alone, on the same rows), and the raw helpers read and write its rows below any
saver: ``dump()`` for at-rest scans, `RawCheckpoint` rows, ``set_parent`` and
``delete_checkpoint`` for tampering, and each kind's own handle (SQL, boto3, the saver's dicts).

`SEALED_WRAPPER` is the one switch: False runs the whole matrix on the bare inner savers, which
validates the harness (the at-rest tests then fail on their canaries, as they must).
"""

from __future__ import annotations

import abc
import contextlib
import sqlite3
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite
import boto3
import psycopg
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
)
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph_checkpoint_aws import DynamoDBSaver  # type: ignore[import-untyped]
from psycopg import sql
from psycopg.rows import dict_row

from secure_serde import EncryptedSerializer
from tests.fixtures_services import PostgresServer, pg_dump, saver_connection
from tests.serdes_support import env_serde

# The one switch: SealedSaver around every inner saver (True), or the bare inner savers (False).
SEALED_WRAPPER = True

KEY = b"sealing-matrix-key-0123456789abc"
assert len(KEY) == 32
# The conformance suite filters on the custom key "score": indexed, as the issue expects.
INDEXED_METADATA = ("score",)
# The wrapper's reserved thread, where the store identity lives (not an application thread).
STORE_THREAD = "__secure_serde_store__"
SEALED_VALUE_PREFIX = b"SSC1"
SEALED_METADATA_KEY = "__secure_serde__"
# The only metadata keys that reach the inner saver, beside the user's indexed ones.
SEALED_METADATA_KEYS = frozenset(
    {SEALED_METADATA_KEY, "parents", "run_id", "source", "step", "counters_since_delta_snapshot"}
)

REGION = "us-east-1"
DUMMY_CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def sealing_serde() -> EncryptedSerializer:
    return env_serde(KEY)


def seal(inner: BaseCheckpointSaver[Any]) -> BaseCheckpointSaver[Any]:
    """``SealedSaver(inner)`` as the matrix configures it."""
    from secure_serde import SealedSaver

    saver: BaseCheckpointSaver[Any] = SealedSaver(
        inner, serde=sealing_serde(), indexed_metadata=INDEXED_METADATA
    )
    return saver


# --------------------------------------------------------------------------------------------
# Lanes: a kind, and whether it is driven through the sync or the async API

KINDS = ("memory", "sqlite", "aiosqlite", "postgres", "apostgres", "dynamodb")
_KIND_NAMES = {
    "memory": "InMemorySaver",
    "sqlite": "SqliteSaver",
    "aiosqlite": "AsyncSqliteSaver",
    "postgres": "PostgresSaver",
    "apostgres": "AsyncPostgresSaver",
    "dynamodb": "DynamoDBSaver",
}
# Kinds whose saver has both APIs are driven both ways; the others only the way they support.
_BOTH_WAYS = ("memory", "dynamodb")


@dataclass(frozen=True)
class Lane:
    kind: str
    is_async: bool

    @property
    def id(self) -> str:
        name = _KIND_NAMES[self.kind]
        if self.kind in _BOTH_WAYS:
            return f"{name}-{'async' if self.is_async else 'sync'}"
        return name


LANES = [
    Lane("memory", False),
    Lane("memory", True),
    Lane("sqlite", False),
    Lane("aiosqlite", True),
    Lane("postgres", False),
    Lane("apostgres", True),
    Lane("dynamodb", False),
    Lane("dynamodb", True),
]
LANE_IDS = [lane.id for lane in LANES]
# Every matrix but the at-rest scan drives DynamoDB one way only: its async methods run its
# sync ones in an executor, the wrapper's sync code is driven by four other lanes, and a moto
# round trip costs ~100 times an in-process call (the folder must stay well under 3 minutes).
HEAVY_LANES = [lane for lane in LANES if lane.id != "DynamoDBSaver-sync"]
HEAVY_LANE_IDS = [lane.id for lane in HEAVY_LANES]


# --------------------------------------------------------------------------------------------
# Raw rows


@dataclass(frozen=True)
class RawCheckpoint:
    """One checkpoint row as the storage holds it (below any saver)."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None


def _leaf_bytes(value: Any, out: list[bytes]) -> None:
    """Every str, bytes and number inside ``value`` (keys included), as bytes."""
    if isinstance(value, bytes | bytearray | memoryview):
        out.append(bytes(value))
    elif isinstance(value, str):
        out.append(value.encode())
    elif isinstance(value, dict):
        for key, item in value.items():
            _leaf_bytes(key, out)
            _leaf_bytes(item, out)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            _leaf_bytes(item, out)
    elif value is not None:
        out.append(repr(value).encode())


class Store(abc.ABC):
    """One fresh storage of one kind."""

    kind: str

    @abc.abstractmethod
    def _inner(self) -> contextlib.AbstractAsyncContextManager[BaseCheckpointSaver[Any]]:
        """A bare inner saver on this storage (its tables not necessarily set up)."""

    async def _setup_bare(self, saver: BaseCheckpointSaver[Any]) -> None:
        setup = getattr(saver, "setup", None)
        if setup is not None:
            result = setup()
            if result is not None:
                await result

    @contextlib.asynccontextmanager
    async def saver(
        self, *, sealed: bool, is_async: bool = False
    ) -> AsyncIterator[BaseCheckpointSaver[Any]]:
        """A saver on this storage, set up: ``SealedSaver(inner)`` or the bare inner saver."""
        async with self._inner() as inner:
            if not sealed:
                await self._setup_bare(inner)
                yield inner
                return
            wrapped: Any = seal(inner)
            if is_async:
                await wrapped.asetup()
            else:
                wrapped.setup()
            yield wrapped

    @abc.abstractmethod
    def dump(self) -> bytes:
        """Everything the storage holds, as raw bytes (for at-rest scans)."""

    @abc.abstractmethod
    def checkpoints(self, thread_id: str) -> list[RawCheckpoint]:
        """The thread's checkpoint rows, every namespace, oldest first."""

    @abc.abstractmethod
    def thread_ids(self) -> set[str]:
        """Every thread that has a checkpoint row."""

    @abc.abstractmethod
    def set_parent(self, row: RawCheckpoint, parent_checkpoint_id: str | None) -> None:
        """Re-point (or cut, with None) a checkpoint row's parent pointer."""

    @abc.abstractmethod
    def delete_checkpoint(self, row: RawCheckpoint) -> None:
        """Delete one checkpoint row and its pending writes (its blobs, if any, stay)."""


class MemoryStore(Store):
    kind = "memory"

    def __init__(self) -> None:
        self.memory = InMemorySaver()

    @contextlib.asynccontextmanager
    async def _inner(self) -> AsyncIterator[BaseCheckpointSaver[Any]]:
        yield self.memory

    def dump(self) -> bytes:
        out: list[bytes] = []
        _leaf_bytes(self.memory.storage, out)
        _leaf_bytes(self.memory.writes, out)
        _leaf_bytes(self.memory.blobs, out)
        return b"\x00".join(out)

    def checkpoints(self, thread_id: str) -> list[RawCheckpoint]:
        rows = [
            RawCheckpoint(thread_id, ns, cid, parent)
            for ns, by_id in self.memory.storage.get(thread_id, {}).items()
            for cid, (_checkpoint, _metadata, parent) in by_id.items()
        ]
        return sorted(rows, key=lambda r: r.checkpoint_id)

    def thread_ids(self) -> set[str]:
        return {t for t, by_ns in self.memory.storage.items() if any(by_ns.values())}

    def set_parent(self, row: RawCheckpoint, parent_checkpoint_id: str | None) -> None:
        by_id = self.memory.storage[row.thread_id][row.checkpoint_ns]
        checkpoint, metadata, _parent = by_id[row.checkpoint_id]
        by_id[row.checkpoint_id] = (checkpoint, metadata, parent_checkpoint_id)

    def delete_checkpoint(self, row: RawCheckpoint) -> None:
        del self.memory.storage[row.thread_id][row.checkpoint_ns][row.checkpoint_id]
        self.memory.writes.pop((row.thread_id, row.checkpoint_ns, row.checkpoint_id), None)


class SqliteStore(Store):
    """A SQLite file alone in its own folder (so the scan reads the file, -wal and -shm)."""

    def __init__(self, directory: Path, kind: str) -> None:
        directory.mkdir(parents=True)
        self.kind = kind
        self.path = directory / "checkpoints.sqlite"

    @contextlib.asynccontextmanager
    async def _inner(self) -> AsyncIterator[BaseCheckpointSaver[Any]]:
        if self.kind == "aiosqlite":
            async with aiosqlite.connect(self.path) as aconn:
                yield AsyncSqliteSaver(aconn)
        else:
            with closing(sqlite3.connect(self.path, check_same_thread=False)) as conn:
                yield SqliteSaver(conn)

    def dump(self) -> bytes:
        files = sorted(p for p in self.path.parent.iterdir() if p.is_file())
        return b"".join(p.read_bytes() for p in files)

    def wal_present(self) -> bool:
        return self.path.with_name(self.path.name + "-wal").is_file()

    def sql(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement on a connection of its own (committed), and return its rows."""
        with closing(sqlite3.connect(self.path)) as conn, conn:
            return list(conn.execute(query, params))

    def checkpoints(self, thread_id: str) -> list[RawCheckpoint]:
        rows = self.sql(
            "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id FROM checkpoints "
            "WHERE thread_id = ? ORDER BY checkpoint_id",
            (thread_id,),
        )
        return [RawCheckpoint(thread_id, ns, cid, parent) for ns, cid, parent in rows]

    def thread_ids(self) -> set[str]:
        return {t for (t,) in self.sql("SELECT DISTINCT thread_id FROM checkpoints")}

    def set_parent(self, row: RawCheckpoint, parent_checkpoint_id: str | None) -> None:
        self.sql(
            "UPDATE checkpoints SET parent_checkpoint_id = ? "
            "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?",
            (parent_checkpoint_id, row.thread_id, row.checkpoint_ns, row.checkpoint_id),
        )

    def delete_checkpoint(self, row: RawCheckpoint) -> None:
        key = (row.thread_id, row.checkpoint_ns, row.checkpoint_id)
        where = "WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
        self.sql(f"DELETE FROM writes {where}", key)  # noqa: S608
        self.sql(f"DELETE FROM checkpoints {where}", key)  # noqa: S608


class PostgresStore(Store):
    """A fresh database on the session's PostgreSQL cluster."""

    def __init__(self, server: PostgresServer, kind: str) -> None:
        self.kind = kind
        self.server = server
        self.dbname = f"sealing_{uuid.uuid4().hex[:16]}"
        with psycopg.connect(server.conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.dbname)))
        self.url = server.url(self.dbname)

    def drop(self) -> None:
        with psycopg.connect(self.server.conninfo, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(self.dbname)
                )
            )

    @contextlib.asynccontextmanager
    async def _inner(self) -> AsyncIterator[BaseCheckpointSaver[Any]]:
        if self.kind == "apostgres":
            async with await psycopg.AsyncConnection.connect(
                self.url, autocommit=True, prepare_threshold=0, row_factory=dict_row
            ) as aconn:
                yield AsyncPostgresSaver(aconn)
        else:
            with saver_connection(self.url) as conn:
                yield PostgresSaver(conn)

    def dump(self) -> bytes:
        return pg_dump(self.server, self.url)

    def sql(self, query: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Run one statement (autocommit) and return its rows as dicts."""
        with psycopg.connect(self.url, autocommit=True, row_factory=dict_row) as conn:
            cursor = conn.execute(query.encode(), params)
            return cursor.fetchall() if cursor.description else []

    def checkpoints(self, thread_id: str) -> list[RawCheckpoint]:
        rows = self.sql(
            "SELECT checkpoint_ns, checkpoint_id, parent_checkpoint_id FROM checkpoints "
            "WHERE thread_id = %s ORDER BY checkpoint_id",
            (thread_id,),
        )
        return [
            RawCheckpoint(
                thread_id, r["checkpoint_ns"], r["checkpoint_id"], r["parent_checkpoint_id"]
            )
            for r in rows
        ]

    def thread_ids(self) -> set[str]:
        return {r["thread_id"] for r in self.sql("SELECT DISTINCT thread_id FROM checkpoints")}

    def set_parent(self, row: RawCheckpoint, parent_checkpoint_id: str | None) -> None:
        self.sql(
            "UPDATE checkpoints SET parent_checkpoint_id = %s "
            "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s",
            (parent_checkpoint_id, row.thread_id, row.checkpoint_ns, row.checkpoint_id),
        )

    def delete_checkpoint(self, row: RawCheckpoint) -> None:
        key = (row.thread_id, row.checkpoint_ns, row.checkpoint_id)
        where = "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s"
        self.sql(f"DELETE FROM checkpoint_writes {where}", key)  # noqa: S608
        self.sql(f"DELETE FROM checkpoints {where}", key)  # noqa: S608


def _attribute_bytes(value: dict[str, Any], out: list[bytes]) -> None:
    """The bytes inside one DynamoDB attribute value (low-level client shape)."""
    for type_code, inner in value.items():
        if type_code == "B":
            out.append(bytes(inner))
        elif type_code in ("S", "N"):
            out.append(str(inner).encode())
        elif type_code in ("SS", "NS"):
            out.extend(str(v).encode() for v in inner)
        elif type_code == "BS":
            out.extend(bytes(v) for v in inner)
        elif type_code == "M":
            for key, item in inner.items():
                out.append(key.encode())
                _attribute_bytes(item, out)
        elif type_code == "L":
            for item in inner:
                _attribute_bytes(item, out)


class DynamoStore(Store):
    """A fresh table (PK/SK strings) on the suite's moto server, over HTTP."""

    kind = "dynamodb"

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.table = f"sealing-{uuid.uuid4().hex[:12]}"
        self.client: Any = self.session().client("dynamodb", endpoint_url=endpoint)
        self.client.create_table(
            TableName=self.table,
            KeySchema=[
                {"AttributeName": "PK", "KeyType": "HASH"},
                {"AttributeName": "SK", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "PK", "AttributeType": "S"},
                {"AttributeName": "SK", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )

    @staticmethod
    def session() -> Any:
        return boto3.Session(region_name=REGION, **DUMMY_CREDENTIALS)

    def drop(self) -> None:
        self.client.delete_table(TableName=self.table)

    @contextlib.asynccontextmanager
    async def _inner(self) -> AsyncIterator[BaseCheckpointSaver[Any]]:
        yield DynamoDBSaver(
            table_name=self.table,
            session=self.session(),
            region_name=REGION,
            endpoint_url=self.endpoint,
        )

    def items(self) -> list[dict[str, Any]]:
        """Every item of the table, as the low-level client returns them."""
        found: list[dict[str, Any]] = []
        for page in self.client.get_paginator("scan").paginate(TableName=self.table):
            found += page["Items"]
        return found

    def dump(self) -> bytes:
        out: list[bytes] = []
        for item in self.items():
            for name, value in item.items():
                out.append(name.encode())
                _attribute_bytes(value, out)
        return b"\x00".join(out)

    def checkpoints(self, thread_id: str) -> list[RawCheckpoint]:
        rows = []
        for item in self.items():
            if item["PK"]["S"] != f"CHECKPOINT_{thread_id}":
                continue
            ns, _, cid = item["SK"]["S"].rpartition("#")
            parent = item.get("parent_checkpoint_id", {}).get("S")
            rows.append(RawCheckpoint(thread_id, ns, cid, parent))
        return sorted(rows, key=lambda r: r.checkpoint_id)

    def thread_ids(self) -> set[str]:
        pks = {item["PK"]["S"] for item in self.items()}
        return {pk.removeprefix("CHECKPOINT_") for pk in pks if pk.startswith("CHECKPOINT_")}

    def _key(self, row: RawCheckpoint) -> dict[str, Any]:
        return {
            "PK": {"S": f"CHECKPOINT_{row.thread_id}"},
            "SK": {"S": f"{row.checkpoint_ns}#{row.checkpoint_id}"},
        }

    def set_parent(self, row: RawCheckpoint, parent_checkpoint_id: str | None) -> None:
        if parent_checkpoint_id is None:
            self.client.update_item(
                TableName=self.table,
                Key=self._key(row),
                UpdateExpression="REMOVE parent_checkpoint_id",
            )
        else:
            self.client.update_item(
                TableName=self.table,
                Key=self._key(row),
                UpdateExpression="SET parent_checkpoint_id = :p",
                ExpressionAttributeValues={":p": {"S": parent_checkpoint_id}},
            )

    def delete_checkpoint(self, row: RawCheckpoint) -> None:
        writes_pk = f"WRITES_{row.thread_id}#{row.checkpoint_ns}#{row.checkpoint_id}"
        for item in self.items():
            if item["PK"]["S"] == writes_pk:
                self.client.delete_item(
                    TableName=self.table, Key={"PK": item["PK"], "SK": item["SK"]}
                )
        self.client.delete_item(TableName=self.table, Key=self._key(row))


class Stores:
    """Makes fresh stores for one test and removes them afterwards."""

    def __init__(self, tmp_path: Path, request: Any) -> None:
        self.tmp_path = tmp_path
        self.request = request
        self.made: list[Store] = []

    def new(self, kind: str) -> Store:
        store: Store
        if kind == "memory":
            store = MemoryStore()
        elif kind in ("sqlite", "aiosqlite"):
            store = SqliteStore(self.tmp_path / f"store{len(self.made)}", kind)
        elif kind in ("postgres", "apostgres"):
            store = PostgresStore(self.request.getfixturevalue("postgres_server"), kind)
        elif kind == "dynamodb":
            store = DynamoStore(self.request.getfixturevalue("kms_endpoint"))
        else:
            raise ValueError(f"unknown saver kind {kind!r}")
        self.made.append(store)
        return store

    def close(self) -> None:
        for store in self.made:
            if isinstance(store, PostgresStore | DynamoStore):
                store.drop()


# --------------------------------------------------------------------------------------------
# Sync-only savers under the async conformance suite


_SYNC_TWINS = {
    "aget_tuple": "get_tuple",
    "aput": "put",
    "aput_writes": "put_writes",
    "adelete_thread": "delete_thread",
    "adelete_for_runs": "delete_for_runs",
    "acopy_thread": "copy_thread",
    "aprune": "prune",
    "aget_delta_channel_history": "get_delta_channel_history",
}


# Optional methods: forwarded (sync) only when the target has them.
_EXTENDED = ("delete_for_runs", "copy_thread", "prune")


class _SyncDriven(BaseCheckpointSaver[Any]):
    """Delegates to ``target``'s sync methods, the async ones included (see `sync_driven`)."""

    def __init__(self, target: BaseCheckpointSaver[Any]) -> None:
        super().__init__(serde=target.serde)
        self.target = target

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self.target.get_tuple(config)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        return self.target.list(config, filter=filter, before=before, limit=limit)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self.target.put(config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self.target.put_writes(config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self.target.delete_thread(thread_id)

    def get_next_version(self, current: Any, channel: None) -> Any:
        return self.target.get_next_version(current, channel)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> Mapping[str, DeltaChannelHistory]:
        return self.target.get_delta_channel_history(config=config, channels=channels)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for item in self.target.list(config, filter=filter, before=before, limit=limit):
            yield item


def _async_by_sync(async_name: str, sync_name: str) -> Any:
    async def method(self: _SyncDriven, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.target, sync_name)(*args, **kwargs)

    method.__name__ = async_name
    return method


def _sync_forward(sync_name: str) -> Any:
    def method(self: _SyncDriven, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.target, sync_name)(*args, **kwargs)

    method.__name__ = sync_name
    return method


def _overrides(cls: type[Any], name: str) -> bool:
    return getattr(cls, name, None) is not getattr(BaseCheckpointSaver, name, None)


def sync_driven(target: BaseCheckpointSaver[Any]) -> BaseCheckpointSaver[Any]:
    """``target`` with every async method run by its sync twin (the suite is async-only).

    Only the twins ``target`` overrides are overridden here, so the conformance suite detects
    the capabilities of ``target`` itself, no more.
    """
    namespace: dict[str, Any] = {}
    for async_name, sync_name in _SYNC_TWINS.items():
        if _overrides(type(target), sync_name):
            namespace[async_name] = _async_by_sync(async_name, sync_name)
            if sync_name in _EXTENDED:
                namespace[sync_name] = _sync_forward(sync_name)
    cls = type(f"SyncDriven[{type(target).__name__}]", (_SyncDriven,), namespace)
    driven: BaseCheckpointSaver[Any] = cls(target)
    return driven


# --------------------------------------------------------------------------------------------
# What reaches the inner saver


async def bare_tuples(store: Store, thread_ids: Sequence[str]) -> list[CheckpointTuple]:
    """Every checkpoint of these threads as the bare inner saver reads them from ``store``."""
    found: list[CheckpointTuple] = []
    async with store.saver(sealed=False) as inner:
        for thread_id in thread_ids:
            config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
            if store.kind in ("aiosqlite", "apostgres"):
                found += [t async for t in inner.alist(config)]
            else:
                found += list(inner.list(config))
    return found


def sealed_shape_problems(tuples: Sequence[CheckpointTuple]) -> list[str]:
    """What in these raw tuples breaks the wrapper's at-rest contract (empty: nothing).

    Every channel value and pending write is a sealed value (bytes starting with ``SSC1``);
    the metadata holds only the sealed entry, the indexed keys, parents and the wrapper's own
    tokens; and the config the inner saver kept holds only the ids.
    """
    problems: list[str] = []
    for t in tuples:
        ids = t.config["configurable"]
        where = f"{ids.get('thread_id')}/{ids.get('checkpoint_id')}"
        for channel, value in t.checkpoint["channel_values"].items():
            if not (isinstance(value, bytes) and value.startswith(SEALED_VALUE_PREFIX)):
                problems.append(f"{where}: channel {channel!r} holds {type(value).__name__}")
        for _task, channel, value in t.pending_writes or ():
            if not (isinstance(value, bytes) and value.startswith(SEALED_VALUE_PREFIX)):
                problems.append(f"{where}: write to {channel!r} holds {type(value).__name__}")
        metadata = dict(t.metadata)
        if not isinstance(metadata.get(SEALED_METADATA_KEY), str):
            problems.append(f"{where}: no sealed metadata entry")
        extra = set(metadata) - SEALED_METADATA_KEYS - set(INDEXED_METADATA)
        if extra:
            problems.append(f"{where}: plaintext metadata keys {sorted(extra)}")
        for key in INDEXED_METADATA:
            if key in metadata and not str(metadata[key]).startswith("ssix2:"):
                problems.append(f"{where}: indexed key {key!r} is not a token")
        extra_config = set(t.config["configurable"]) - {
            "thread_id",
            "checkpoint_ns",
            "checkpoint_id",
        }
        if extra_config:
            problems.append(f"{where}: config keys {sorted(extra_config)}")
    return problems
