"""``list(filter=...)`` on the sealed SQLite saver's blind-indexed metadata against the stock
``SqliteSaver``, side by side in one run.

Run from the repository root (no server needed)::

    .venv/bin/python benchmarks/bench_metadata_filter_sqlite.py            # 10,000 checkpoints each
    .venv/bin/python benchmarks/bench_metadata_filter_sqlite.py --quick    # 1,000, smoke run

The workload and the queries are those of ``bench_metadata_filter.py`` (PostgreSQL), on two
SQLite files in one temporary directory, written with the same ``EncryptedSerializer``:

* ``stock``: langgraph's ``SqliteSaver``, metadata in plaintext (``tenant``, ``user_id`` among
  100 users, an ``api_key``);
* ``sealed``: secure_serde's ``SqliteSaver(indexed_metadata=["user_id"],
  plaintext_metadata=["tenant"])``: ``api_key`` and ``user_id`` sealed, ``user_id`` indexed.

Each query runs first on the stock schema, then after an expression index on the ``user_id``
term each saver's filter uses (``json_extract(CAST(metadata AS TEXT), '$.user_id')`` on the
stock file, ``'$.__secure_serde_index__.user_id'`` on the sealed one). Reported: the plan class
(``EXPLAIN QUERY PLAN`` of each saver's own ``list`` query, the ``checkpoints`` access), the
median wall time per ``list`` (rows fetched and decoded; on the sealed side the blob
authenticated at its row, the metadata unsealed and its index verified), stock and sealed
interleaved call by call, and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_metadata_filter import KEY, OPTIONS, fill, measure  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver as StockSaver  # noqa: E402
from langgraph.checkpoint.sqlite.utils import search_where  # noqa: E402

from secure_serde import EncryptedSerializer  # noqa: E402
from secure_serde.ciphers import EnvKeyCipher  # noqa: E402
from secure_serde.savers._sqlite_bound import SELECT_LIST_SQL  # noqa: E402
from secure_serde.savers._v03_sqlite import SqliteSaver  # noqa: E402

_INDEXES = {
    "stock": "json_extract(CAST(metadata AS TEXT), '$.user_id')",
    "sealed": "json_extract(CAST(metadata AS TEXT), '$.__secure_serde_index__.user_id')",
}


def plan_class(saver: Any, config: Any, flt: dict[str, Any]) -> str:
    """What ``EXPLAIN QUERY PLAN`` says about ``checkpoints`` for the saver's own query."""
    if isinstance(saver, SqliteSaver):
        where, params = saver.rows.search_where(config, flt, None)
    else:
        where, stock_params = search_where(config, flt, None)
        params = list(stock_params)
    query = SELECT_LIST_SQL.format(where=where)
    rows = saver.conn.execute("EXPLAIN QUERY PLAN " + query, list(params)).fetchall()
    found = [str(r[3]) for r in rows if "checkpoints" in str(r[3])]
    return "; ".join(found) or "; ".join(str(r[3]) for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 checkpoints, few reps")
    args = parser.parse_args()
    threads, per_thread, reps = (100, 10, 10) if args.quick else (1000, 10, 40)
    serde = EncryptedSerializer(EnvKeyCipher(KEY))
    with tempfile.TemporaryDirectory(prefix="bench-sqlite-filter-") as tmp:
        stock_conn = sqlite3.connect(Path(tmp) / "stock.sqlite", check_same_thread=False)
        sealed_conn = sqlite3.connect(Path(tmp) / "sealed.sqlite", check_same_thread=False)
        with closing(stock_conn), closing(sealed_conn):
            stock = StockSaver(stock_conn, serde=serde)
            sealed = SqliteSaver(sealed_conn, serde=serde, **OPTIONS)
            start = time.perf_counter()
            fill(stock, threads, per_thread)
            fill(sealed, threads, per_thread)
            print(
                f"{threads * per_thread:,} checkpoints per file,"
                f" written in {time.perf_counter() - start:.0f} s;"
                f" SQLite {sqlite3.sqlite_version}"
            )
            for conn in (stock_conn, sealed_conn):
                conn.execute("ANALYZE")
            measure(stock, sealed, reps, "stock schema (no index on metadata)", plan_class)
            for conn, who in ((stock_conn, "stock"), (sealed_conn, "sealed")):
                conn.execute(f"CREATE INDEX checkpoints_user_id ON checkpoints ({_INDEXES[who]})")
                conn.execute("ANALYZE")
            measure(
                stock,
                sealed,
                reps,
                "with an expression index on each saver's user_id term",
                plan_class,
            )


if __name__ == "__main__":
    main()
