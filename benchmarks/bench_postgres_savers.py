"""What the sealed PostgreSQL saver costs per checkpoint, against the stock one, in one run.

Run from the repository root against a PostgreSQL you can create tables in (a local, idle one
gives the steadiest numbers)::

    .venv/bin/python benchmarks/bench_postgres_savers.py "postgresql://postgres@127.0.0.1:5432/bench"
    .venv/bin/python benchmarks/bench_postgres_savers.py DSN --quick

Workload: a checkpoint like a chat agent's, with a ``messages`` channel of 20 messages, eight
primitive channels (str, int, float, bool, None) and two ``branch:to:`` markers. Each put
changes ``messages`` and two primitives and leaves the rest unchanged, which is where the
sealed saver does extra work: it writes every primitive as an encrypted blob, unchanged ones
included (an ``ON CONFLICT DO NOTHING`` insert; see secure_serde/savers/_values.py).

Savers, side by side: the stock ``PostgresSaver`` with plain JsonPlus, the stock saver with
secure_serde's ``EncryptedSerializer`` (primitives then stay inline in plaintext JSON), and
secure_serde's sealed saver with the same serializer, with and without sealed metadata. Each
repetition runs one batch per saver (``put`` of a chain of checkpoints on a fresh thread, then
``get_tuple`` of each), in an order that rotates between repetitions; the tables report medians
of the per-batch means and same-run ratios. Storage is ``pg_column_size`` summed over each
saver's rows. Absolute times depend on the machine and the database; compare ratios only.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver as StockPostgresSaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from psycopg.rows import dict_row

from secure_serde import EncryptedSerializer
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.savers.postgres import PostgresSaver

KEY = b"bench-key-not-a-secret-012345678"
PRIMITIVES = {
    "topic": "billing question about invoice 2291",
    "user_name": "Ada Lovelace",
    "turns": 3,
    "score": 0.87,
    "escalated": False,
    "resolved": True,
    "language": "en",
    "pending": None,
}
CHANGING = ("turns", "score")


@dataclass
class Subject:
    name: str
    make: Callable[[psycopg.Connection[Any]], Any]
    put_us: list[float] = field(default_factory=list)
    get_us: list[float] = field(default_factory=list)


def messages(n: int, step: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n):
        cls = HumanMessage if i % 2 == 0 else AIMessage
        out.append(cls(content=f"message {i} at step {step}: " + "lorem ipsum " * 12, id=f"m{i}"))
    return out


def run_batch(saver: Any, chain: int, prefix: str) -> tuple[float, float]:
    """``chain`` puts on a fresh thread, then a get_tuple of each; mean µs per put and get."""
    thread_id = f"{prefix}-{uuid.uuid4().hex[:12]}"
    config: dict[str, Any] = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    versions: dict[str, Any] = {}
    values: dict[str, Any] = {**PRIMITIVES, "branch:to:agent": None, "branch:to:tools": None}
    stored = []
    gc.disable()
    start = time.perf_counter()
    for step in range(chain):
        values["messages"] = messages(20, step)
        values["turns"] = step
        values["score"] = step / chain
        changed = ("messages", *CHANGING) if step else tuple(values)
        new_versions = {k: saver.get_next_version(versions.get(k), None) for k in changed}
        versions.update(new_versions)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = dict(values)
        checkpoint["channel_versions"] = dict(versions)
        metadata: Any = {"source": "loop", "step": step, "parents": {}}
        config = saver.put(config, checkpoint, metadata, new_versions)
        stored.append(config)
    put_s = time.perf_counter() - start
    start = time.perf_counter()
    for cfg in stored:
        if saver.get_tuple(cfg) is None:
            raise RuntimeError("checkpoint not found")
    get_s = time.perf_counter() - start
    gc.enable()
    return put_s / chain * 1e6, get_s / chain * 1e6


def storage(conn: psycopg.Connection[Any], prefix: str) -> int:
    total = 0
    for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
        row = conn.execute(
            f"SELECT coalesce(sum(pg_column_size(t.*)), 0) AS n FROM {table} t"  # noqa: S608
            " WHERE thread_id LIKE %s",
            (prefix + "-%",),
        ).fetchone()
        total += int(row["n"]) if row else 0
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dsn")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few repetitions")
    args = parser.parse_args()
    reps, chain = (3, 5) if args.quick else (31, 20)
    serde = EncryptedSerializer(EnvKeyCipher(KEY))
    subjects = [
        Subject("stock + JsonPlus", lambda c: StockPostgresSaver(c, serde=JsonPlusSerializer())),
        Subject("stock + secure_serde", lambda c: StockPostgresSaver(c, serde=serde)),
        Subject("sealed + secure_serde", lambda c: PostgresSaver(c, serde=serde)),
        Subject(
            "sealed + sealed metadata",
            lambda c: PostgresSaver(c, serde=serde, plaintext_metadata=()),
        ),
    ]
    with psycopg.connect(
        args.dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        StockPostgresSaver(conn).setup()
        savers = [s.make(conn) for s in subjects]
        run = uuid.uuid4().hex[:8]  # this run's threads, apart from earlier runs' rows
        for saver, subject in zip(savers, subjects, strict=True):
            run_batch(saver, 2, f"warm{subject.name[:4]}")
        for rep in range(reps):
            order = list(range(len(subjects)))
            order = order[rep % len(order) :] + order[: rep % len(order)]
            for i in order:
                put_us, get_us = run_batch(savers[i], chain, f"{run}-s{i}")
                subjects[i].put_us.append(put_us)
                subjects[i].get_us.append(get_us)
            print(f"repetition {rep + 1}/{reps}", file=sys.stderr)
        sizes = [storage(conn, f"{run}-s{i}") / (reps * chain) for i in range(len(subjects))]

    base = subjects[1]
    base_put, base_get = statistics.median(base.put_us), statistics.median(base.get_us)
    print(f"{reps} repetitions x {chain} checkpoints per saver\n")
    print(
        "| saver | put µs (median) | get_tuple µs (median) | put ratio | get ratio"
        " | bytes/checkpoint |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for subject, size in zip(subjects, sizes, strict=True):
        put, get = statistics.median(subject.put_us), statistics.median(subject.get_us)
        print(
            f"| {subject.name} | {put:,.0f} | {get:,.0f} | {put / base_put:.3f}x"
            f" | {get / base_get:.3f}x | {size:,.0f} |"
        )
    print("\nRatios are to 'stock + secure_serde' in the same run.")


if __name__ == "__main__":
    main()
