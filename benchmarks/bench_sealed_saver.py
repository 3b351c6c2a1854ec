"""`SealedSaver(PostgresSaver)` against the stock PostgresSaver given the same serde, in one run.

Run from the repository root (starts and removes its own throwaway PostgreSQL on 127.0.0.1)::

    .venv/bin/python benchmarks/bench_sealed_saver.py            # 30 checkpoints, 15 reps
    .venv/bin/python benchmarks/bench_sealed_saver.py --quick    # 10 checkpoints, 5 reps

Workload: a chain of checkpoints on one thread, each with a ``messages`` channel of 20 messages
(changed at every step), four primitive channels, and a ``log`` channel that holds a value only
at the first checkpoint and gets one pending write per checkpoint, and so a new version at each
step with no value stored (a DeltaChannel's shape between snapshots: every saver's history walk
goes back to the seed). The metadata carries ``counters_since_delta_snapshot``, as a graph's
does for a DeltaChannel. Operations: ``put``, ``put_writes``, ``get_tuple`` by id,
``list(limit=10)`` and ``get_delta_channel_history`` from the newest checkpoint (the stock
saver's SQL fast path against the wrapper's verified walk).

Both savers get the same `EncryptedSerializer`; the stock one stores it unbound. Each
repetition runs the whole chain on one saver, then on the other, in an order that alternates
between repetitions; the table gives the median wall time per call and the median of the
per-repetition ratios, with their range. Compare ratios only: the machine is shared and
absolute times move between runs.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from langchain_core.messages import AIMessage, HumanMessage  # noqa: E402
from langchain_core.runnables import RunnableConfig  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint  # noqa: E402
from langgraph.checkpoint.postgres import PostgresSaver  # noqa: E402

from secure_serde import EncryptedSerializer, SealedSaver  # noqa: E402
from secure_serde.ciphers import EnvKeyCipher  # noqa: E402
from tests.fixtures_services import saver_connection, throwaway_cluster  # noqa: E402

KEY = b"bench-sealed-saver-key-0123456789"[:32]


def chain(saver: BaseCheckpointSaver[Any], thread: str, steps: int) -> dict[str, list[float]]:
    """Run the workload once; the wall time of every call, per operation."""
    times: dict[str, list[float]] = {}

    def record(op: str, start: float) -> None:
        times.setdefault(op, []).append(time.perf_counter() - start)

    messages = [
        HumanMessage(content=f"question {i} " * 8) if i % 2 else AIMessage(f"answer {i} " * 8)
        for i in range(20)
    ]
    config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    ids: list[str] = []
    versions: dict[str, int] = {}
    every = ("messages", "name", "turn", "score", "done", "log")
    for step in range(steps):
        checkpoint = empty_checkpoint()
        checkpoint["v"] = 4  # what a compiled graph writes (empty_checkpoint still says 2)
        checkpoint["channel_values"] = {
            "messages": [*messages, AIMessage(content=f"step {step}")],
            "name": "customer",
            "turn": step,
            "score": 0.5,
            "done": False,
            **({"log": ["seed"]} if step == 0 else {}),
        }
        # A step's write to ``log`` gives it a new version, with no value stored (as a graph's
        # DeltaChannel does between snapshots): every saver's history then walks to the seed.
        changed = every if step == 0 else ("messages", "turn", "log")
        new_versions = {ch: step + 1 for ch in changed}
        versions = {**versions, **new_versions}
        checkpoint["channel_versions"] = dict(versions)
        metadata: Any = {"source": "loop", "step": step, "user_id": "alice"}
        if step:
            # What a graph records for a DeltaChannel: (updates, supersteps) since its snapshot.
            metadata["counters_since_delta_snapshot"] = {"log": (step, step)}
        start = time.perf_counter()
        config = saver.put(config, checkpoint, metadata, dict(new_versions))
        record("put", start)
        ids.append(config["configurable"]["checkpoint_id"])
        start = time.perf_counter()
        saver.put_writes(config, [("log", [f"e{step}"])], "task", "")
        record("put_writes", start)
    for checkpoint_id in ids:
        by_id: RunnableConfig = {
            "configurable": {
                "thread_id": thread,
                "checkpoint_ns": "",
                "checkpoint_id": checkpoint_id,
            }
        }
        start = time.perf_counter()
        saver.get_tuple(by_id)
        record("get_tuple", start)
    head: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    for _ in range(5):
        start = time.perf_counter()
        list(saver.list(head, limit=10))
        record("list(limit=10)", start)
        start = time.perf_counter()
        saver.get_delta_channel_history(config=head, channels=["log"])
        record("delta history", start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    steps, reps = (10, 5) if args.quick else (30, 15)
    serde = EncryptedSerializer(EnvKeyCipher(KEY))
    with (
        throwaway_cluster() as server,
        saver_connection(server.url()) as a,
        saver_connection(server.url()) as b,
    ):
        stock = PostgresSaver(a, serde=serde)
        stock.setup()
        sealed = SealedSaver(PostgresSaver(b), serde=serde, indexed_metadata=["user_id"])
        sealed.setup()
        savers: dict[str, BaseCheckpointSaver[Any]] = {"stock+serde": stock, "sealed": sealed}
        per_rep: dict[str, dict[str, list[float]]] = {name: {} for name in savers}
        for rep in range(reps):
            order = list(savers) if rep % 2 == 0 else list(reversed(savers))
            gc.collect()
            gc.disable()
            try:
                for name in order:
                    times = chain(savers[name], f"{name}-{rep}-{uuid.uuid4().hex[:6]}", steps)
                    for op, values in times.items():
                        per_rep[name].setdefault(op, []).append(statistics.median(values))
            finally:
                gc.enable()
    print(f"{steps} checkpoints per chain, {reps} repetitions, medians")
    print(f"{'operation':<18}{'stock+serde µs':>16}{'sealed µs':>12}{'ratio':>8}")
    for op in per_rep["stock+serde"]:
        base, mine = per_rep["stock+serde"][op], per_rep["sealed"][op]
        ratios = [m / b for m, b in zip(mine, base, strict=True)]
        print(
            f"{op:<18}{statistics.median(base) * 1e6:>16.0f}{statistics.median(mine) * 1e6:>12.0f}"
            f"{statistics.median(ratios):>7.2f}x  (range {min(ratios):.2f}-{max(ratios):.2f})"
        )


if __name__ == "__main__":
    main()
