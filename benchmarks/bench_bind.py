"""What binding a stock store in place costs, next to a plain rewrap of the same store.

Run from the repository root (PostgreSQL server binaries must be installed, as for the tests;
the script starts its own throwaway cluster on 127.0.0.1 and removes it afterwards)::

    .venv/bin/python benchmarks/bench_bind.py                      # ~1,000 checkpoints, 3 runs
    .venv/bin/python benchmarks/bench_bind.py --checkpoints 200 --repeat 1   # smoke run
    .venv/bin/python benchmarks/bench_bind.py --no-postgres

Workload: the graph of ``tests/rewrap/bind_support.py`` (messages, a list channel, a ``str``
and an ``int`` channel, an ``interrupt()`` in every turn) run through the *stock* langgraph
saver, given secure_serde's serializer under key A, over enough threads for the wanted number
of checkpoints. That is a store 0.1 (or a stock saver with ``serde=``) leaves behind: every
value unbound, and on PostgreSQL the primitives inline in the checkpoint JSON.

Each run takes two identical copies of that store (a file copy; ``CREATE DATABASE ...
TEMPLATE``) and, in this process, with key B primary and A decrypt-only:

* ``rewrap``: `secure_serde.rewrap` re-encrypts every value under B (unbound, as it finds it);
* ``bind``: `bind_sqlite` / `bind_postgres` re-encrypts every value under B *bound to its row*,
  moves the inline values into bound blobs and seals every checkpoint record.

Both re-encrypt every value once, so the ratio is what knowing and writing each row's location
costs. A last line times each pass again on its own output, where there is nothing to do.
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_rewrap import fresh_database, throwaway_postgres  # noqa: E402

from secure_serde import EncryptedSerializer, rewrap  # noqa: E402
from secure_serde.ciphers import KeyRotationCipher  # noqa: E402
from secure_serde.savers import bind_postgres, bind_sqlite  # noqa: E402
from tests.rewrap.bind_support import Db, build_graph, run_turns  # noqa: E402

KEY_A = "bench-bind-key-A-0123456789abcde"
KEY_B = "bench-bind-key-B-0123456789abcde"
TURNS = 10


def serde(primary: str) -> EncryptedSerializer:
    return EncryptedSerializer(KeyRotationCipher({"a": KEY_A, "b": KEY_B}, primary))


@dataclass(frozen=True)
class Result:
    store: str
    checkpoints: int
    rows: int
    rewrap: list[float]
    bind: list[float]
    rewrap_again: float
    bind_again: float


def build(db: Db, checkpoints: int) -> tuple[int, int]:
    """Write the stock store; return (checkpoints, value rows)."""
    with db.stock() as saver:
        saver.serde = serde("a")
        graph = build_graph(saver)
        thread = 0
        while _count(db, "checkpoints") < checkpoints:
            run_turns(graph, f"thread-{thread:04d}", TURNS)
            thread += 1
    tables = ("writes",) if db.kind == "sqlite" else ("checkpoint_writes", "checkpoint_blobs")
    return _count(db, "checkpoints"), sum(_count(db, t) for t in ("checkpoints", *tables))


def _count(db: Db, table: str) -> int:
    return int(db.execute(f"SELECT count(*) FROM {table}")[0][0])  # noqa: S608


def _timed(step: Callable[[], Any]) -> float:
    started = time.perf_counter()
    step()
    return time.perf_counter() - started


def _bind(db: Db) -> Any:
    if db.kind == "sqlite":
        from secure_serde.savers._v03_sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(db.location, serde=serde("b")) as saver:
            report = bind_sqlite(saver)
    else:
        from secure_serde.savers._v03_postgres import PostgresSaver

        with PostgresSaver.from_conn_string(
            db.location, serde=serde("b"), seal_metadata=False
        ) as saver:
            report = bind_postgres(saver)
    if not report.ok or report.raced:
        raise RuntimeError(f"bind pass failed: {report.refusals[:3]}")
    return report


def _rewrap(db: Db) -> Any:
    report = rewrap(db.location, serde("b"))
    if not report.ok:
        raise RuntimeError("rewrap failed")
    return report


def measure(copy: Callable[[], Db], repeat: int) -> tuple[list[float], list[float], list[float]]:
    """Medians' samples of each pass, and one rerun of each on its own output."""
    passes: dict[str, Callable[[Db], Any]] = {"rewrap": _rewrap, "bind": _bind}
    samples: dict[str, list[float]] = {"rewrap": [], "bind": []}
    again = {"rewrap": 0.0, "bind": 0.0}
    for run in range(repeat):
        # Alternate the order, so neither pass always runs on a warmer cache.
        order = ("rewrap", "bind") if run % 2 == 0 else ("bind", "rewrap")
        for name in order:
            db = copy()
            samples[name].append(_timed(partial(passes[name], db)))
            if run == 0:
                again[name] = _timed(partial(passes[name], db))
    return samples["rewrap"], samples["bind"], [again["rewrap"], again["bind"]]


def run_sqlite(tmp: Path, checkpoints: int, repeat: int) -> Result:
    template = Db("sqlite", str(tmp / "template.sqlite"))
    made, rows = build(template, checkpoints)
    copies = iter(range(10_000))

    def copy() -> Db:
        path = tmp / f"copy-{next(copies)}.sqlite"
        # The stock saver runs in WAL mode: copy through SQLite, not the file alone.
        with sqlite3.connect(template.location) as src, sqlite3.connect(path) as dst:
            src.backup(dst)
        return Db("sqlite", str(path))

    rewraps, binds, again = measure(copy, repeat)
    return Result("SQLite", made, rows, rewraps, binds, again[0], again[1])


def run_postgres(server_url: str, checkpoints: int, repeat: int) -> Result:
    import psycopg

    template = Db("postgres", fresh_database(server_url))
    made, rows = build(template, checkpoints)
    source = template.location.rsplit("/", 1)[1].split("?")[0]
    copies = iter(range(10_000))

    def copy() -> Db:
        name = f"{source}_c{next(copies)}"
        with psycopg.connect(server_url, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{source}"')
        return Db("postgres", template.location.replace(f"/{source}?", f"/{name}?"))

    rewraps, binds, again = measure(copy, repeat)
    return Result("PostgreSQL", made, rows, rewraps, binds, again[0], again[1])


def print_table(results: list[Result]) -> None:
    print(
        "| store | checkpoints | value rows | rewrap (s) | bind (s) | bind / rewrap"
        " | rewrap rerun (s) | bind rerun (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        rewrap_s, bind_s = statistics.median(r.rewrap), statistics.median(r.bind)
        print(
            f"| {r.store} | {r.checkpoints:,} | {r.rows:,} | {rewrap_s:.3f} | {bind_s:.3f}"
            f" | {bind_s / rewrap_s:.2f}x | {r.rewrap_again:.3f} | {r.bind_again:.3f} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoints", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="secure-serde-bench-bind-") as tmp:
        print("building and measuring the SQLite store ...", file=sys.stderr)
        results.append(run_sqlite(Path(tmp), args.checkpoints, args.repeat))
    if not args.no_postgres:
        with throwaway_postgres() as server_url:
            print("building and measuring the PostgreSQL store ...", file=sys.stderr)
            results.append(run_postgres(server_url, args.checkpoints, args.repeat))
    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() else "?"
    print(
        f"median of {args.repeat} run(s); python {platform.python_version()},"
        f" sqlite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs, load average at end {load}"
    )
    print_table(results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
