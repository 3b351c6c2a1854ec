"""What the sealed PostgreSQL savers cost per call, against the stock ones, in one run.

Run from the repository root, against a PostgreSQL you can create tables in, or with no DSN to
let the script start (and remove) its own throwaway cluster on 127.0.0.1, the way the tests
do::

    .venv/bin/python benchmarks/bench_postgres_savers.py                 # about 5 minutes
    .venv/bin/python benchmarks/bench_postgres_savers.py --quick         # smoke run
    .venv/bin/python benchmarks/bench_postgres_savers.py "postgresql://postgres@127.0.0.1:5432/b"

Workload: a checkpoint like a chat agent's, with a ``messages`` channel of 20 messages, eight
primitive channels (str, int, float, bool, None) and two ``branch:to:`` markers. Each put
changes ``messages`` and two primitives and leaves the rest unchanged, which is where the
sealed saver does extra work: it seals every primitive, where the stock saver keeps it inline
in plaintext JSON.

Operations, each on the sync and on the async saver:

* ``put``: a chain of checkpoints on a fresh thread;
* ``put_writes``: two writes (a message and a primitive) per checkpoint of that chain;
* ``get_tuple``: each checkpoint of the chain, by id;
* ``list``: the whole thread, newest first;
* ``graph step``: one ``invoke`` of a compiled LangGraph graph (sync savers only): a chat node
  that appends a reply and updates three primitive channels, four checkpoints and their
  writes per invoke, on a thread that grows through the batch.

Savers, side by side: the stock ``PostgresSaver`` with plain JsonPlus, the stock saver with
secure_serde's ``EncryptedSerializer`` (primitives then stay inline in plaintext JSON), and
secure_serde's sealed saver (``secure_serde.savers.postgres``: `SealedSaver` around the stock
one) with the same serializer, its metadata sealed, or with ``source`` and ``step`` left in
plaintext (``plaintext_metadata``).

Method: in every repetition each saver gets a new thread, and the savers' calls are interleaved
one by one (put number i of every saver, then put number i+1 of every saver, ...), in an order
that rotates between repetitions, so that load on a shared machine hits every saver alike. The
garbage collector is paused during a repetition and run between them. Each repetition gives,
per saver and operation, the mean wall time per call and the mean CPU time of this process
per call (``time.process_time``: the client's own work, encryption included, without the
time spent waiting for the server). The tables report medians over repetitions and two
ratios to the stock saver with the same serializer: the ratio of the medians, and the median
of the per-repetition ratios (paired). Absolute times depend on the machine and the database;
compare the same-run ratios only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import operator
import os
import platform
import statistics
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any, TypedDict

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import psycopg  # noqa: E402
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage  # noqa: E402
from langgraph.checkpoint.base import empty_checkpoint  # noqa: E402
from langgraph.checkpoint.postgres import PostgresSaver as StockPostgresSaver  # noqa: E402
from langgraph.checkpoint.postgres.aio import (  # noqa: E402
    AsyncPostgresSaver as StockAsyncPostgresSaver,
)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402
from psycopg.rows import dict_row  # noqa: E402

from secure_serde import EncryptedSerializer  # noqa: E402
from secure_serde.ciphers import EnvKeyCipher  # noqa: E402
from secure_serde.savers.postgres import AsyncPostgresSaver, PostgresSaver  # noqa: E402

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
SYNC_OPS = ("put", "put_writes", "get_tuple", "list", "graph step")
ASYNC_OPS = ("aput", "aput_writes", "aget_tuple", "alist")
BASE = "stock + secure_serde"


@dataclass
class Subject:
    name: str
    make: Callable[[Any], Any]
    samples: dict[str, list[float]] = field(default_factory=dict)


def messages(n: int, step: int) -> list[Any]:
    out: list[Any] = []
    for i in range(n):
        cls = HumanMessage if i % 2 == 0 else AIMessage
        out.append(cls(content=f"message {i} at step {step}: " + "lorem ipsum " * 12, id=f"m{i}"))
    return out


def chain_args(saver: Any, chain: int, thread_id: str) -> Iterator[tuple[Any, ...]]:
    """The (checkpoint, metadata, new_versions) of each put of a chain, built outside timing."""
    versions: dict[str, Any] = {}
    values: dict[str, Any] = {**PRIMITIVES, "branch:to:agent": None, "branch:to:tools": None}
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
        yield checkpoint, metadata, new_versions


def writes_for(step: int) -> list[tuple[str, Any]]:
    reply = AIMessage(content=f"reply at step {step}: " + "lorem ipsum " * 12, id=f"r{step}")
    return [("messages", [reply]), ("turns", step)]


class Clock:
    """Wall and process CPU time per (saver, operation), summed over calls."""

    def __init__(self) -> None:
        self.wall: dict[tuple[int, str], float] = defaultdict(float)
        self.cpu: dict[tuple[int, str], float] = defaultdict(float)
        self.calls: dict[tuple[int, str], int] = defaultdict(int)

    @contextlib.contextmanager
    def __call__(self, saver: int, op: str) -> Iterator[None]:
        cpu, wall = time.process_time(), time.perf_counter()
        yield
        self.wall[saver, op] += time.perf_counter() - wall
        self.cpu[saver, op] += time.process_time() - cpu
        self.calls[saver, op] += 1

    def per_call(self, saver: int) -> dict[str, float]:
        """Mean µs per call, wall and (as ``<op> cpu``) this process's CPU, of each operation."""
        out: dict[str, float] = {}
        for (i, op), calls in self.calls.items():
            if i == saver:
                out[op] = self.wall[i, op] / calls * 1e6
                out[f"{op} cpu"] = self.cpu[i, op] / calls * 1e6
        return out


@dataclass
class Thread:
    """One saver's thread in a repetition: the puts' arguments, and the configs they return."""

    saver: Any
    root: Any
    args: list[tuple[Any, ...]]
    stored: list[Any] = field(default_factory=list)

    @classmethod
    def new(cls, saver: Any, chain: int, prefix: str) -> Thread:
        thread_id = f"{prefix}-{uuid.uuid4().hex[:12]}"
        root: Any = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
        return cls(saver, root, list(chain_args(saver, chain, thread_id)))

    @property
    def config(self) -> Any:
        return self.stored[-1] if self.stored else self.root


def run_sync(
    savers: list[Any], graphs: list[Any], chain: int, prefix: str, order: list[int]
) -> Clock:
    """One repetition of every sync operation, the savers' calls interleaved one by one."""
    clock = Clock()
    threads = [Thread.new(saver, chain, f"{prefix}-s{i}") for i, saver in enumerate(savers)]
    for step in range(chain):
        for i in order:
            t = threads[i]
            with clock(i, "put"):
                t.stored.append(t.saver.put(t.config, *t.args[step]))
    for step in range(chain):
        for i in order:
            t = threads[i]
            with clock(i, "put_writes"):
                t.saver.put_writes(t.stored[step], writes_for(step), f"task-{step}")
    for step in range(chain):
        for i in order:
            t = threads[i]
            with clock(i, "get_tuple"):
                found = t.saver.get_tuple(t.stored[step])
            if found is None:
                raise RuntimeError("checkpoint not found")
    for i in order:
        t = threads[i]
        with clock(i, "list"):
            listed = sum(1 for _ in t.saver.list(t.root))
        if listed != chain:
            raise RuntimeError(f"list found {listed} checkpoints, not {chain}")
    for step in range(max(chain // 4, 1)):
        for i in order:
            config: Any = {"configurable": {"thread_id": f"{prefix}-g{i}"}}
            with clock(i, "graph step"):
                graphs[i].invoke({"messages": [HumanMessage(content=f"question {step}")]}, config)
    return clock


async def run_async(savers: list[Any], chain: int, prefix: str, order: list[int]) -> Clock:
    """One repetition of every async operation, the savers' calls interleaved one by one."""
    clock = Clock()
    threads = [Thread.new(saver, chain, f"{prefix}-a{i}") for i, saver in enumerate(savers)]
    for step in range(chain):
        for i in order:
            t = threads[i]
            with clock(i, "aput"):
                t.stored.append(await t.saver.aput(t.config, *t.args[step]))
    for step in range(chain):
        for i in order:
            t = threads[i]
            with clock(i, "aput_writes"):
                await t.saver.aput_writes(t.stored[step], writes_for(step), f"task-{step}")
    for step in range(chain):
        for i in order:
            t = threads[i]
            with clock(i, "aget_tuple"):
                found = await t.saver.aget_tuple(t.stored[step])
            if found is None:
                raise RuntimeError("checkpoint not found")
    for i in order:
        t = threads[i]
        with clock(i, "alist"):
            listed = len([c async for c in t.saver.alist(t.root)])
        if listed != chain:
            raise RuntimeError(f"alist found {listed} checkpoints, not {chain}")
    return clock


class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    topic: str
    turns: int
    score: float
    escalated: bool


def build_graph(saver: Any) -> Any:
    def agent(state: ChatState) -> dict[str, Any]:
        turns = state.get("turns", 0) + 1
        reply = AIMessage(content=f"answer {turns}: " + "lorem ipsum " * 12)
        return {"messages": [reply], "turns": turns, "score": turns / 10, "escalated": False}

    def classify(state: ChatState) -> dict[str, Any]:
        return {"topic": f"billing question about invoice {state.get('turns', 0)}"}

    builder = StateGraph(ChatState)
    builder.add_node("classify", classify)
    builder.add_node("agent", agent)
    builder.add_edge(START, "classify")
    builder.add_edge("classify", "agent")
    builder.add_edge("agent", END)
    return builder.compile(checkpointer=saver)


@contextlib.contextmanager
def database(dsn: str | None) -> Iterator[str]:
    if dsn:
        yield dsn
        return
    from bench_rewrap import throwaway_postgres

    with throwaway_postgres() as url:
        yield url


def versions() -> str:
    names = (
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-postgres",
        "psycopg",
        "cryptography",
    )
    parts = [f"python {platform.python_version()}"]
    for name in names:
        try:
            parts.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{name} missing")
    return ", ".join(parts)


def subjects_for(serde: EncryptedSerializer, sync: bool) -> list[Subject]:
    stock, sealed = (
        (StockPostgresSaver, PostgresSaver)
        if sync
        else (StockAsyncPostgresSaver, AsyncPostgresSaver)
    )
    return [
        Subject("stock + JsonPlus", lambda c: stock(c, serde=JsonPlusSerializer())),
        Subject(BASE, lambda c: stock(c, serde=serde)),
        # SealedSaver's defaults: every metadata key sealed ("source" and "step" as tokens).
        Subject("sealed + secure_serde", lambda c: sealed(c, serde=serde)),
        Subject(
            "sealed + plaintext source/step",
            lambda c: sealed(c, serde=serde, plaintext_metadata=("source", "step")),
        ),
    ]


def rotate(items: list[int], rep: int) -> list[int]:
    shift = rep % len(items)
    return items[shift:] + items[:shift]


async def measure(url: str, reps: int, chain: int) -> tuple[list[Subject], list[Subject]]:
    serde = EncryptedSerializer(EnvKeyCipher(KEY))
    sync_subjects, async_subjects = subjects_for(serde, True), subjects_for(serde, False)
    run = uuid.uuid4().hex[:8]  # this run's threads, apart from earlier runs' rows
    opts: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with psycopg.connect(url, **opts) as conn:
        StockPostgresSaver(conn).setup()
        # The sealed savers' store identity, before any saver writes a checkpoint: a sealed
        # saver refuses to start one in a store that already holds checkpoints.
        PostgresSaver(conn, serde=serde).setup()
        aconn = await psycopg.AsyncConnection.connect(url, **opts)
        async with aconn:
            sync_savers = [s.make(conn) for s in sync_subjects]
            graphs = [build_graph(saver) for saver in sync_savers]
            async_savers = [s.make(aconn) for s in async_subjects]
            order = list(range(len(sync_subjects)))
            for rep in range(-1, reps):  # repetition -1 warms up and is not kept
                gc.collect()
                gc.disable()  # as timeit does; collected between repetitions
                try:
                    ordered = rotate(order, rep)
                    sync_clock = run_sync(sync_savers, graphs, chain, f"{run}-{rep}", ordered)
                    async_clock = await run_async(async_savers, chain, f"{run}-{rep}", ordered)
                finally:
                    gc.enable()
                if rep >= 0:
                    for subjects, clock in (
                        (sync_subjects, sync_clock),
                        (async_subjects, async_clock),
                    ):
                        for i, subject in enumerate(subjects):
                            for name, value in clock.per_call(i).items():
                                subject.samples.setdefault(name, []).append(value)
                print(f"repetition {rep + 1}/{reps}", file=sys.stderr)
    return sync_subjects, async_subjects


def ratios(subject: Subject, base: Subject, op: str) -> tuple[float, float, float]:
    """Median, ratio of medians and median paired ratio of ``subject`` against ``base``."""
    med = statistics.median(subject.samples[op])
    paired = statistics.median(map(operator.truediv, subject.samples[op], base.samples[op]))
    return med, med / statistics.median(base.samples[op]), paired


def table(subjects: list[Subject], ops: tuple[str, ...]) -> None:
    base, plain = next(s for s in subjects if s.name == BASE), subjects[0]
    print(
        "| operation | saver | wall µs | wall ratio | wall paired ratio | client CPU µs"
        " | CPU ratio | CPU paired ratio | wall to stock + JsonPlus |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for op in ops:
        for s in subjects:
            med, ratio, paired = ratios(s, base, op)
            cpu, cpu_ratio, cpu_paired = ratios(s, base, f"{op} cpu")
            _, to_plain, _ = ratios(s, plain, op)
            print(
                f"| {op} | {s.name} | {med:,.0f} | {ratio:.3f}x | {paired:.3f}x | {cpu:,.0f}"
                f" | {cpu_ratio:.3f}x | {cpu_paired:.3f}x | {to_plain:.3f}x |"
            )


def summary(sync_subjects: list[Subject], async_subjects: list[Subject]) -> None:
    print("\nSealed + secure_serde against stock + secure_serde (target ≤1.05x, wall):\n")
    print("| operation | wall ratio | wall paired ratio | CPU ratio | verdict (wall) |")
    print("|---|---:|---:|---:|---|")
    for subjects, ops in ((sync_subjects, SYNC_OPS), (async_subjects, ASYNC_OPS)):
        base = next(s for s in subjects if s.name == BASE)
        sealed = next(s for s in subjects if s.name == "sealed + secure_serde")
        for op in ops:
            _, ratio, paired = ratios(sealed, base, op)
            _, cpu_ratio, _ = ratios(sealed, base, f"{op} cpu")
            verdict = "meets" if max(ratio, paired) <= 1.05 else "MISSES"
            print(f"| {op} | {ratio:.3f}x | {paired:.3f}x | {cpu_ratio:.3f}x | {verdict} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dsn", nargs="?", help="default: a throwaway local cluster")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few repetitions")
    parser.add_argument("--reps", type=int, help="repetitions (default 21, quick 3)")
    parser.add_argument("--chain", type=int, help="checkpoints per batch (default 20, quick 4)")
    args = parser.parse_args()
    reps = args.reps or (3 if args.quick else 21)
    chain = args.chain or (4 if args.quick else 20)
    with database(args.dsn) as url:
        sync_subjects, async_subjects = asyncio.run(measure(url, reps, chain))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"Date (UTC): {datetime.now(UTC):%Y-%m-%d %H:%M}")
    print(f"Versions: {versions()}")
    print(f"Machine: {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs,", end=" ")
    print(f"load average {load:.1f} at the end")
    print(f"{reps} repetitions x {chain} checkpoints per batch\n")
    print("Sync savers:\n")
    table(sync_subjects, SYNC_OPS)
    print("\nAsync savers:\n")
    table(async_subjects, ASYNC_OPS)
    summary(sync_subjects, async_subjects)
    print(f"\nRatios are to '{BASE}' in the same run, except the last column.")


if __name__ == "__main__":
    main()
