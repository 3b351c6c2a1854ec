"""A small store of bound rows, and the moves the binding must refuse, for both databases.

`populate` writes, through a sealed saver's public API, two threads x two namespaces x two
checkpoints (the second a child of the first, one channel at a newer version), two tasks of
pending writes with two indices each, and sealed metadata. Every stored value carries a
marker naming the cell it was written to, so a test can tell whether a moved value was ever
deserialized: `MarkingSerde` records what its inner serializer returned.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import EncryptedSerializer
from secure_serde.ciphers import EnvKeyCipher

KEY = b"binding-matrix-key-0123456789abc"
THREADS = ("tenant-a", "tenant-b")
NAMESPACES = ("", "child:1")
CHECKPOINTS = ("1f0000000000000000000001", "1f0000000000000000000002")
TASKS = ("task-1", "task-2")


class MarkingSerde(JsonPlusSerializer):
    """JsonPlus that remembers the repr of every value it deserialized."""

    def __init__(self) -> None:
        super().__init__()
        self.loaded: list[str] = []

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        value = super().loads_typed(data)
        self.loaded.append(repr(value))
        return value


def marking_serde() -> tuple[EncryptedSerializer, MarkingSerde]:
    inner = MarkingSerde()
    return EncryptedSerializer(EnvKeyCipher(KEY), inner), inner


@dataclass(frozen=True)
class Cell:
    """One stored value: its kind and the coordinates of its row."""

    kind: str  # blob, write, metadata, record, checkpoint
    thread_id: str
    checkpoint_ns: str
    key: tuple[Any, ...]

    @property
    def marker(self) -> str:
        return f"marker<{self.kind}|{self.thread_id}|{self.checkpoint_ns}|{self.key}>"

    def __str__(self) -> str:
        return f"{self.kind}:{self.thread_id}:{self.checkpoint_ns or '-'}:{self.key}"


def version(n: int) -> str:
    return f"{n:032}.0.5"


def populate(saver: Any) -> None:
    """Write the store through ``saver.put``/``put_writes`` (sealed metadata on)."""
    for thread_id in THREADS:
        for ns in NAMESPACES:
            parent: str | None = None
            for n, checkpoint_id in enumerate(CHECKPOINTS, start=1):
                checkpoint = empty_checkpoint()
                checkpoint["id"] = checkpoint_id
                x_version = version(n)
                checkpoint["channel_values"] = {
                    "x": [Cell("blob", thread_id, ns, ("x", x_version)).marker],
                    "y": {"y": Cell("blob", thread_id, ns, ("y", version(1))).marker},
                }
                checkpoint["channel_versions"] = {"x": x_version, "y": version(1)}
                new_versions = {"x": x_version, **({"y": version(1)} if n == 1 else {})}
                configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ns}
                if parent is not None:
                    configurable["checkpoint_id"] = parent
                configurable["api_key"] = Cell("metadata", thread_id, ns, (checkpoint_id,)).marker
                stored = saver.put(
                    {"configurable": configurable},
                    checkpoint,
                    {"source": "loop", "step": n, "parents": {}},
                    new_versions,
                )
                for task_id in TASKS:
                    saver.put_writes(
                        stored,
                        [
                            (
                                channel,
                                Cell(
                                    "write", thread_id, ns, (checkpoint_id, task_id, idx, channel)
                                ).marker,
                            )
                            for idx, channel in enumerate(("x", "y"))
                        ],
                        task_id,
                    )
                parent = checkpoint_id


def write_cells() -> Iterator[Cell]:
    for thread_id in THREADS:
        for ns in NAMESPACES:
            for checkpoint_id in CHECKPOINTS:
                for task_id in TASKS:
                    for idx, channel in enumerate(("x", "y")):
                        yield Cell("write", thread_id, ns, (checkpoint_id, task_id, idx, channel))


def per_checkpoint(kind: str) -> Iterator[Cell]:
    for thread_id in THREADS:
        for ns in NAMESPACES:
            for checkpoint_id in CHECKPOINTS:
                yield Cell(kind, thread_id, ns, (checkpoint_id,))


def envelope(value: tuple[str, bytes]) -> dict[str, str]:
    return {"type": value[0], "data": base64.b64encode(value[1]).decode("ascii")}


def from_envelope(found: dict[str, str]) -> tuple[str, bytes]:
    return found["type"], base64.b64decode(found["data"])


def configs(cell: Cell) -> list[RunnableConfig]:
    """The reads that must fail once ``cell`` holds a moved value."""
    base = {"thread_id": cell.thread_id, "checkpoint_ns": cell.checkpoint_ns}
    return [{"configurable": {**base, "checkpoint_id": c}} for c in CHECKPOINTS if reads(cell, c)]


def reads(cell: Cell, checkpoint_id: str) -> bool:
    """Whether reading ``checkpoint_id`` (of the cell's thread and namespace) reads ``cell``."""
    if cell.kind == "blob":
        channel, at = cell.key
        n = CHECKPOINTS.index(checkpoint_id) + 1
        return bool(at == (version(n) if channel == "x" else version(1)))
    return bool(cell.key[0] == checkpoint_id)
