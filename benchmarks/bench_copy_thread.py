"""What ``copy_thread`` costs on the sealed savers, next to a raw SQL copy and a full read.

Run from the repository root (PostgreSQL server binaries must be installed, as for the tests;
the script starts its own throwaway cluster on 127.0.0.1 and removes it afterwards)::

    .venv/bin/python benchmarks/bench_copy_thread.py                     # 100 and 1,000 checkpoints
    .venv/bin/python benchmarks/bench_copy_thread.py --checkpoints 100 --repeat 1   # smoke run
    .venv/bin/python benchmarks/bench_copy_thread.py --no-postgres

Workload: one thread of a loop graph, one checkpoint per step, whose state holds a
``DeltaChannel`` list (one entry per step, snapshot every 10), a step counter and a ~1 KiB
string rewritten every step, with sealed metadata. Each run times, on fresh target ids:

* ``copy_thread``: every row authenticated at the source and re-encrypted for the target;
* ``raw SQL``: ``INSERT ... SELECT`` of the same rows under a new id, the floor for moving the
  bytes (the rows it writes do not read: the binding names the thread);
* ``list``: reading the whole source thread back through the saver (decrypt and deserialize),
  for scale.
"""

from __future__ import annotations

import argparse
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from functools import partial
from pathlib import Path
from typing import Annotated, Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_rewrap import fresh_database, throwaway_postgres  # noqa: E402
from langgraph.channels import DeltaChannel  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from typing_extensions import TypedDict  # noqa: E402

from secure_serde import EncryptedSerializer  # noqa: E402
from secure_serde.ciphers import EnvKeyCipher  # noqa: E402
from secure_serde.savers._v03_postgres import PostgresSaver  # noqa: E402
from secure_serde.savers._v03_sqlite import SqliteSaver  # noqa: E402

KEY = b"bench-copy-thread-key-0123456789"
PAYLOAD = "lorem ipsum dolor sit amet " * 40


def extend(state: list[str], writes: Sequence[list[str]]) -> list[str]:
    out = list(state)
    for write in writes:
        out.extend(write)
    return out


class State(TypedDict, total=False):
    log: Annotated[list[str], DeltaChannel(extend, snapshot_frequency=10)]
    step: int
    text: str
    limit: int


def _tick(state: Any) -> dict[str, Any]:
    step = state.get("step", 0) + 1
    return {"log": [f"entry {step}"], "step": step, "text": f"{step} {PAYLOAD}"}


def build_graph(saver: Any) -> Any:
    builder = StateGraph(State).add_node("tick", _tick)
    builder.add_edge(START, "tick")
    builder.add_conditional_edges(
        "tick", lambda s: END if s["step"] >= s["limit"] else "tick", ["tick", END]
    )
    return builder.compile(checkpointer=saver)


def fill(saver: Any, checkpoints: int) -> None:
    config = {
        "configurable": {"thread_id": "source", "tenant": "bench"},
        "recursion_limit": checkpoints + 10,
    }
    build_graph(saver).invoke({"log": [], "step": 0, "limit": checkpoints - 2}, config)


def serde() -> EncryptedSerializer:
    return EncryptedSerializer(EnvKeyCipher(KEY))


@contextmanager
def sqlite_store(directory: Path) -> Iterator[tuple[Any, Callable[[str], None]]]:
    path = directory / f"{uuid.uuid4().hex}.sqlite"
    with SqliteSaver.from_conn_string(str(path), serde=serde()) as saver:

        def raw(target: str) -> None:
            with closing(sqlite3.connect(path)) as conn, conn:
                conn.execute(
                    "INSERT INTO checkpoints SELECT ?, checkpoint_ns, checkpoint_id,"
                    " parent_checkpoint_id, type, checkpoint, metadata FROM checkpoints"
                    " WHERE thread_id = 'source'",
                    (target,),
                )
                conn.execute(
                    "INSERT INTO writes SELECT ?, checkpoint_ns, checkpoint_id, task_id,"
                    " task_path, idx, channel, type, value FROM writes WHERE thread_id = 'source'",
                    (target,),
                )

        yield saver, raw


@contextmanager
def postgres_store(server_url: str) -> Iterator[tuple[Any, Callable[[str], None]]]:
    import psycopg

    url = fresh_database(server_url)
    with PostgresSaver.from_conn_string(url, serde=serde()) as saver:
        saver.setup()

        def raw(target: str) -> None:
            with psycopg.connect(url) as conn:
                for sql in (
                    "INSERT INTO checkpoints SELECT %s, checkpoint_ns, checkpoint_id,"
                    " parent_checkpoint_id, type, checkpoint, metadata FROM checkpoints"
                    " WHERE thread_id = 'source'",
                    "INSERT INTO checkpoint_blobs SELECT %s, checkpoint_ns, channel, version,"
                    " type, blob FROM checkpoint_blobs WHERE thread_id = 'source'",
                    "INSERT INTO checkpoint_writes SELECT %s, checkpoint_ns, checkpoint_id,"
                    " task_id, idx, channel, type, blob, task_path FROM checkpoint_writes"
                    " WHERE thread_id = 'source'",
                ):
                    conn.execute(sql, (target,))

        yield saver, raw


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure(
    name: str, store: Any, checkpoints: int, repeat: int
) -> tuple[str, int, float, float, float]:
    with store as (saver, raw):
        fill(saver, checkpoints)
        stored = len(list(saver.list({"configurable": {"thread_id": "source"}})))
        copies, raws, reads = [], [], []
        for run in range(repeat):
            copies.append(_timed(partial(saver.copy_thread, "source", f"copy-{run}")))
            raws.append(_timed(partial(raw, f"raw-{run}")))
            reads.append(
                _timed(lambda: list(saver.list({"configurable": {"thread_id": "source"}})))
            )
        med = statistics.median
        return name, stored, med(copies), med(raws), med(reads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--checkpoints", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.checkpoints:
            print(f"SQLite, {n} checkpoints...", file=sys.stderr)
            results.append(measure("SQLite", sqlite_store(Path(tmp)), n, args.repeat))
    if not args.no_postgres:
        with throwaway_postgres() as server_url:
            for n in args.checkpoints:
                print(f"PostgreSQL, {n} checkpoints...", file=sys.stderr)
                results.append(measure("PostgreSQL", postgres_store(server_url), n, args.repeat))
    print(
        f"median of {args.repeat} run(s); python {platform.python_version()},"
        f" sqlite {sqlite3.sqlite_version}"
    )
    print("| store | checkpoints | copy_thread (s) | raw SQL (s) | list (s) | copy / list |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, stored, copy, raw, read in results:
        print(f"| {name} | {stored:,} | {copy:.3f} | {raw:.3f} | {read:.3f} | {copy / read:.2f}x |")


if __name__ == "__main__":
    main()
