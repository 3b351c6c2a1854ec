"""Stores sealed by SealedSaver (the thin SQLite and PostgreSQL constructors), for rotation tests.

A store is written by a real graph under key A: the chat graph of rewrap_support (messages, a
list channel, an ``interrupt()`` every turn, the last turn left waiting) and the DeltaChannel
loop of tests/serde/test_delta_channel.py (update_state, replay, fork). `observe` records
everything a reader sees, so a test can check that a saver holding only key B, after rotation,
sees exactly what key A's saver saw before.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from secure_serde import EncryptedSerializer
from secure_serde.sealing import SealedAuditReport, SealedSaver, audit_sealed
from tests.passes.rewrap_support import (
    KEY_A,
    KEY_B,
    build_graph,
    histories,
    rotation_serde,
    run_turns,
)
from tests.serde.test_delta_channel import build as build_delta
from tests.serde.test_delta_channel import describe, run_scenario
from tests.serdes_support import thin_postgres, thin_sqlite

CHAT_THREADS = ("chat-0", "chat-1", "chat-2")
DELTA_THREAD = "delta-0"
A_ONLY = {"a": KEY_A}
A_AND_B = {"a": KEY_A, "b": KEY_B}
B_ONLY = {"b": KEY_B}

SaverFactory = Callable[[EncryptedSerializer], AbstractContextManager[SealedSaver]]


def serde_a() -> EncryptedSerializer:
    return rotation_serde(A_ONLY, "a")


def serde_rotated() -> EncryptedSerializer:
    """Step 4 of the runbook: B primary, A still decrypting."""
    return rotation_serde(A_AND_B, "b")


def serde_b() -> EncryptedSerializer:
    return rotation_serde(B_ONLY, "b")


def factory(location: str | Path) -> SaverFactory:
    if isinstance(location, str) and location.startswith("postgresql://"):
        return lambda serde: thin_postgres(location, serde)
    return lambda serde: thin_sqlite(Path(location), serde)


def populate(open_saver: SaverFactory, *, turns: int = 2) -> None:
    """The chat threads and the DeltaChannel thread, all under key A."""
    with open_saver(serde_a()) as saver:
        graph = build_graph(saver)
        for thread in CHAT_THREADS:
            run_turns(graph, thread, turns)
        run_scenario(build_delta(saver, with_frame=False), saver, DELTA_THREAD)


def observe(open_saver: SaverFactory, serde: EncryptedSerializer) -> dict[str, Any]:
    """Every state and history of every thread, as a saver under ``serde`` reads them."""
    with open_saver(serde) as saver:
        chat = histories(build_graph(saver), CHAT_THREADS)
        delta = describe(build_delta(saver, with_frame=False), saver, DELTA_THREAD)
    return {"chat": chat, "delta": delta}


def audit(open_saver: SaverFactory, serde: EncryptedSerializer) -> SealedAuditReport:
    with open_saver(serde) as saver:
        return audit_sealed(saver)


# ---------------------------------------------------------------------------------------------
# The raw rows, read without the code under test


def sqlite_rows(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = sqlite3.connect(path)
    try:
        return {
            "checkpoints": conn.execute(
                "SELECT thread_id, checkpoint_ns, checkpoint_id, type, checkpoint,"
                " CAST(metadata AS TEXT) FROM checkpoints ORDER BY 1, 2, 3"
            ).fetchall(),
            "writes": conn.execute(
                "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value"
                " FROM writes ORDER BY 1, 2, 3, 4, 5"
            ).fetchall(),
        }
    finally:
        conn.close()


def postgres_rows(url: str) -> dict[str, list[tuple[Any, ...]]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return {
            "checkpoints": conn.execute(
                "SELECT thread_id, checkpoint_ns, checkpoint_id, checkpoint::text, metadata::text"
                " FROM checkpoints ORDER BY 1, 2, 3"
            ).fetchall(),
            "checkpoint_blobs": conn.execute(
                "SELECT thread_id, checkpoint_ns, channel, version, type, blob"
                " FROM checkpoint_blobs ORDER BY 1, 2, 3, 4"
            ).fetchall(),
            "checkpoint_writes": conn.execute(
                "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob"
                " FROM checkpoint_writes ORDER BY 1, 2, 3, 4, 5"
            ).fetchall(),
        }


def raw_rows(location: str | Path) -> dict[str, list[tuple[Any, ...]]]:
    if isinstance(location, str) and location.startswith("postgresql://"):
        return postgres_rows(location)
    return sqlite_rows(Path(location))


def digest(rows: Mapping[str, list[tuple[Any, ...]]]) -> str:
    h = hashlib.sha256()
    for table in sorted(rows):
        h.update(table.encode())
        for row in rows[table]:
            h.update(
                repr(tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)).encode()
            )
    return h.hexdigest()
