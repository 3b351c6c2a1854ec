"""``list(filter=...)`` on sealed, blind-indexed metadata against the stock saver, in one run.

Run from the repository root, against a PostgreSQL you can create databases in, or with no DSN
to let the script start (and remove) its own throwaway cluster on 127.0.0.1::

    .venv/bin/python benchmarks/bench_metadata_filter.py             # 10,000 checkpoints each
    .venv/bin/python benchmarks/bench_metadata_filter.py --quick     # 1,000, smoke run

Workload: two databases on one server, each with the same checkpoints (1,000 threads of 10 by
default), written with the same ``EncryptedSerializer``:

* ``stock``: langgraph's ``PostgresSaver``, metadata in plaintext (``tenant``, ``user_id`` among
  100 users, an ``api_key``);
* ``sealed``: secure_serde's ``PostgresSaver(indexed_metadata=["user_id"],
  plaintext_metadata=["tenant"])``: ``api_key`` and ``user_id`` sealed, ``user_id`` indexed.

Queries (each returns the same checkpoints from both, which the script checks):

* ``by user``: ``list(None, filter={"user_id": u})``, 100 rows from all threads;
* ``by user in thread``: ``list({"thread_id": t}, filter={"user_id": u})``;
* ``by tenant and user``: a plaintext and an indexed term together.

Each runs first on the stock schema, then again after ``CREATE INDEX ... USING gin (metadata
jsonb_path_ops)`` on both databases. Reported: the plan class of the ``checkpoints`` scan
(EXPLAIN) for each saver, and the median wall time per ``list`` (rows fetched and decoded,
metadata unsealed and its index verified on the sealed side), calls interleaved stock/sealed
so that machine load hits both alike, and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import psycopg  # noqa: E402
from langchain_core.runnables import RunnableConfig  # noqa: E402
from langgraph.checkpoint.base import empty_checkpoint  # noqa: E402
from langgraph.checkpoint.postgres import PostgresSaver as StockSaver  # noqa: E402
from psycopg.conninfo import conninfo_to_dict, make_conninfo  # noqa: E402
from psycopg.rows import dict_row  # noqa: E402

from secure_serde import EncryptedSerializer  # noqa: E402
from secure_serde.ciphers import EnvKeyCipher  # noqa: E402
from secure_serde.savers._v03_postgres import PostgresSaver  # noqa: E402

KEY = b"bench-metadata-filter-key-012345"
USERS = 100
OPTIONS: dict[str, Any] = {"indexed_metadata": ["user_id"], "plaintext_metadata": ["tenant"]}


@contextlib.contextmanager
def server(dsn: str | None) -> Iterator[str]:
    if dsn:
        yield dsn
        return
    from bench_rewrap import throwaway_postgres

    with throwaway_postgres() as url:
        yield url


def new_database(url: str, name: str) -> str:
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    params = conninfo_to_dict(url)
    params["dbname"] = name
    return make_conninfo("", **params)


def connect(url: str) -> psycopg.Connection[Any]:
    return psycopg.Connection.connect(
        url, autocommit=True, prepare_threshold=0, row_factory=dict_row
    )


def fill(saver: Any, threads: int, per_thread: int) -> None:
    for t in range(threads):
        for s in range(per_thread):
            n = t * per_thread + s
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"x": [n]}
            checkpoint["channel_versions"] = {"x": s + 1}
            config = {
                "configurable": {
                    "thread_id": f"thread-{t:05d}",
                    "checkpoint_ns": "",
                    "tenant": f"tenant-{t % 10}",
                    "user_id": f"user-{n % USERS:03d}",
                    "api_key": f"sk-{n:08d}",
                }
            }
            metadata = {"source": "loop", "step": s, "parents": {}}
            saver.put(config, checkpoint, metadata, {"x": s + 1})


def plan_class(saver: Any, config: Any, flt: dict[str, Any]) -> str:
    """The node types that read ``checkpoints`` in the plan of the saver's own list query."""
    where, params = saver._search_where(config, flt, None)
    query = saver.SELECT_SQL + where + " ORDER BY checkpoint_id DESC"
    with saver._cursor() as cur:
        cur.execute("EXPLAIN (FORMAT JSON) " + query, params)
        plan = cur.fetchone()["QUERY PLAN"][0]["Plan"]
    found: list[str] = []

    def walk(node: dict[str, Any]) -> None:
        if node.get("Relation Name") == "checkpoints" or "checkpoints" in str(
            node.get("Index Name", "")
        ):
            found.append(node["Node Type"])
        for child in node.get("Plans", []):
            walk(child)

    walk(plan)
    return " + ".join(dict.fromkeys(found)) or plan["Node Type"]


def timed(call: Callable[[], list[Any]]) -> tuple[float, list[Any]]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def ids(tuples: list[Any]) -> list[tuple[str, int]]:
    # Checkpoint ids differ between the databases (time-based): compare thread and step.
    return [(t.config["configurable"]["thread_id"], t.metadata["step"]) for t in tuples]


Query = Callable[[int], tuple[RunnableConfig | None, dict[str, Any]]]


def _listed(saver: Any, config: RunnableConfig | None, flt: dict[str, Any]) -> list[Any]:
    return list(saver.list(config, filter=flt))


PlanClass = Callable[[Any, Any, dict[str, Any]], str]


def measure(
    stock: Any, sealed: Any, reps: int, label: str, plan_of: PlanClass | None = None
) -> None:
    """Each query on both savers, interleaved call by call; prints one Markdown table.

    ``plan_of`` names the plan class of a saver's own query (PostgreSQL's by default).
    """
    plan_of = plan_of or plan_class
    queries: list[tuple[str, Query]] = [
        ("by user", lambda i: (None, {"user_id": f"user-{i % USERS:03d}"})),
        (
            "by user in thread",
            lambda i: (
                {"configurable": {"thread_id": f"thread-{i % 50:05d}"}},
                {"user_id": f"user-{(i % 50) * 10 % USERS:03d}"},
            ),
        ),
        (
            "by tenant and user",
            lambda i: (
                None,
                {"tenant": f"tenant-{i % USERS // 10}", "user_id": f"user-{i % USERS:03d}"},
            ),
        ),
    ]
    print(f"\n### {label}\n")
    print("| query | rows | stock plan | sealed plan | stock ms | sealed ms | ratio |")
    print("|---|---:|---|---|---:|---:|---:|")
    for name, args in queries:
        config, flt = args(0)
        plans = plan_of(stock, config, flt), plan_of(sealed, config, flt)
        times: dict[str, list[float]] = {"stock": [], "sealed": []}
        rows = 0
        gc.disable()
        try:
            for i in range(reps):
                config, flt = args(i)
                order = [("stock", stock), ("sealed", sealed)]
                if i % 2:
                    order.reverse()
                got = {}
                for who, saver in order:
                    elapsed, result = timed(partial(_listed, saver, config, flt))
                    times[who].append(elapsed)
                    got[who] = ids(result)
                if got["stock"] != got["sealed"]:
                    raise SystemExit(
                        f"{name}: the savers returned different checkpoints"
                        f" ({len(got['stock'])} and {len(got['sealed'])})"
                    )
                rows = len(got["stock"])
        finally:
            gc.enable()
        a, b = statistics.median(times["stock"]), statistics.median(times["sealed"])
        print(
            f"| {name} | {rows} | {plans[0]} | {plans[1]} | {a * 1e3:.2f} | {b * 1e3:.2f}"
            f" | {b / a:.2f}x |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("dsn", nargs="?", help="a server to create two databases on")
    parser.add_argument("--quick", action="store_true", help="1,000 checkpoints, few reps")
    args = parser.parse_args()
    threads, per_thread, reps = (100, 10, 10) if args.quick else (1000, 10, 40)
    serde = EncryptedSerializer(EnvKeyCipher(KEY))
    with server(args.dsn) as url:
        stock_url, sealed_url = new_database(url, "bench_stock"), new_database(url, "bench_sealed")
        with connect(stock_url) as stock_conn, connect(sealed_url) as sealed_conn:
            stock = StockSaver(stock_conn, serde=serde)
            sealed = PostgresSaver(sealed_conn, serde=serde, **OPTIONS)
            stock.setup()
            sealed.setup()
            start = time.perf_counter()
            fill(stock, threads, per_thread)
            fill(sealed, threads, per_thread)
            print(
                f"{threads * per_thread:,} checkpoints per database,"
                f" written in {time.perf_counter() - start:.0f} s"
            )
            for conn in (stock_conn, sealed_conn):
                conn.execute("ANALYZE checkpoints")
            measure(stock, sealed, reps, "stock schema (no index on metadata)")
            for conn in (stock_conn, sealed_conn):
                conn.execute(
                    "CREATE INDEX checkpoints_metadata_gin ON checkpoints"
                    " USING gin (metadata jsonb_path_ops)"
                )
                conn.execute("ANALYZE checkpoints")
            measure(stock, sealed, reps, "with a GIN index on metadata (jsonb_path_ops)")


if __name__ == "__main__":
    main()
