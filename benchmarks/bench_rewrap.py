"""How fast ``secure-serde rewrap`` moves a store to a new key, and how much memory it needs.

Run from the repository root (PostgreSQL server binaries must be installed, as for the tests;
the script starts its own throwaway cluster on 127.0.0.1 and removes it afterwards)::

    .venv/bin/python benchmarks/bench_rewrap.py                  # 10k and 100k rows, 3 runs each
    .venv/bin/python benchmarks/bench_rewrap.py --sizes 10000 --repeat 1   # smoke run
    .venv/bin/python benchmarks/bench_rewrap.py --no-postgres

Workload: the chat graph of ``tests/passes/rewrap_support.py`` (messages, a list channel and an
``interrupt()`` in every turn) is run for four threads under key A, then its threads are
cloned under new thread ids until the store holds the wanted number of serialized cells
(SQLite: checkpoints and writes; PostgreSQL: channel blobs and writes).

Each measurement runs the real console command (``secure_serde.cli.main``, as
``secure-serde rewrap STORE`` does) in a child process with the keys in its environment: wall
time from start to exit (Python start-up included), rows per second as the command itself
reports them (its scan loop only), and the peak RSS the child reads from its own
``/proc/self/status`` (``VmHWM``) at exit; with ``--workers N``, the largest of that and its
forked workers' ``ru_maxrss``. Runs alternate the target
key (A to B, then B to A, ...) so every run re-encrypts every row. A last run with the same
primary measures a no-op rerun, where every row is already current.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.passes.rewrap_support import (  # noqa: E402
    KEY_A,
    KEY_B,
    TEMPLATES,
    KeyEnv,
    build_sqlite_store,
    clone_postgres_threads,
    postgres_graph,
    rotation_serde,
    run_turns,
)

TURNS = 5
KEYS = {"a": KEY_A, "b": KEY_B}


@dataclass(frozen=True)
class Run:
    store: str
    rows: int
    workers: int
    batch: int
    label: str
    wall: float
    rate: float
    rss_mib: float


def _env(tmp: Path, primary: str) -> dict[str, str]:
    return KeyEnv(env_key=None, keyring={"primary": primary, "keys": KEYS}).environ(tmp)


# The child runs the console command's main() and then reports its own peak RSS: the kernel's
# ru_maxrss for an exec'd child also counts the parent's image it was forked from, which would
# hide the rewrap's own footprint. Forked --workers are children of the child: RUSAGE_CHILDREN.
_CHILD = """
import resource, sys
from secure_serde.cli import main
code = main(sys.argv[2:])
with open("/proc/self/status") as status:
    hwm = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
with open(sys.argv[1], "w") as out:
    out.write(f"{hwm} {workers}")
sys.exit(code)
"""


def run_rewrap(
    location: str, tmp: Path, primary: str, *, workers: int, batch: int
) -> tuple[float, float, float, str]:
    """One child process: (wall seconds, rows/s as reported, peak RSS MiB, stdout)."""
    stats = tmp / f"rss-{uuid.uuid4().hex}.txt"
    args = [sys.executable, "-c", _CHILD, str(stats), "rewrap", location, "--no-progress"]
    args += ["--batch-size", str(batch), "--workers", str(workers)]
    started = time.monotonic()
    proc = subprocess.run(  # noqa: S603 - our own console command
        args, env=_env(tmp, primary), capture_output=True, text=True, check=False
    )
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"rewrap exited {proc.returncode}: {proc.stdout}\n{proc.stderr}")
    match = re.search(r"\(([0-9,]+) rows/s\)", proc.stdout)
    if match is None:
        raise RuntimeError(f"no rate in the report: {proc.stdout}")
    rate = float(match.group(1).replace(",", ""))
    own, forked = (int(v) for v in stats.read_text().split())
    return wall, rate, max(own, forked) / 1024, proc.stdout


def baseline_rss(tmp: Path) -> float:
    """Peak RSS of the child doing nothing but importing the CLI: what rewrap adds is above it."""
    stats = tmp / "rss-baseline.txt"
    subprocess.run(  # noqa: S603 - our own console command
        [sys.executable, "-c", _CHILD, str(stats), "keygen"],
        env=_env(tmp, "a"),
        capture_output=True,
        check=True,
    )
    own, _ = (int(v) for v in stats.read_text().split())
    return own / 1024


def measure(
    store: str,
    location: str,
    rows: int,
    tmp: Path,
    *,
    current: str,
    workers: int,
    batch: int,
    repeat: int,
) -> tuple[list[Run], str]:
    """``repeat`` full rewraps, alternating the target key, then a no-op rerun.

    ``current`` is the key every row is under now; returns the runs and that key afterwards.
    """
    runs = []
    for _ in range(repeat):
        current = "a" if current == "b" else "b"
        wall, rate, rss, stdout = run_rewrap(location, tmp, current, workers=workers, batch=batch)
        if f"rewrapped {rows:,}," not in stdout:
            raise RuntimeError(f"expected every row rewrapped: {stdout}")
        runs.append(Run(store, rows, workers, batch, "rewrap", wall, rate, rss))
        print(f"  {store} {rows:,} rows, {workers} worker(s): {wall:.2f} s", file=sys.stderr)
    wall, rate, rss, stdout = run_rewrap(location, tmp, current, workers=workers, batch=batch)
    if f"rewrapped 0, already current {rows:,}" not in stdout:
        raise RuntimeError(f"expected a no-op rerun: {stdout}")
    runs.append(Run(store, rows, workers, batch, "rerun, all current", wall, rate, rss))
    return runs, current


# ---------------------------------------------------------------------------------------------
# Stores


def sqlite_store(tmp: Path, rows: int) -> tuple[str, int]:
    probe = tmp / f"probe-{uuid.uuid4().hex}.sqlite"
    per_copy = build_sqlite_store(probe, rotation_serde({"a": KEY_A}, "a"), 0, TURNS)
    path = tmp / f"store-{rows}.sqlite"
    total = build_sqlite_store(
        path, rotation_serde({"a": KEY_A}, "a"), max(-(-rows // per_copy) - 1, 0), TURNS
    )
    return str(path), total


def postgres_store(url: str, rows: int) -> tuple[str, int]:
    with postgres_graph(url, rotation_serde({"a": KEY_A}, "a")) as graph:
        for thread in TEMPLATES:
            run_turns(graph, thread, TURNS)
    per_copy = clone_postgres_threads(url, 0)
    total = clone_postgres_threads(url, max(-(-rows // per_copy) - 1, 0))
    return url, total


@contextlib.contextmanager
def throwaway_postgres() -> Iterator[str]:
    """A private cluster, started the way the tests start theirs; yields its admin URL."""
    from tests.fixtures_services import throwaway_cluster

    with throwaway_cluster(prefix="secure-serde-bench-pg-") as server:
        yield server.url("postgres")


def fresh_database(server_url: str) -> str:
    import psycopg

    name = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    return server_url.replace("/postgres?", f"/{name}?")


# ---------------------------------------------------------------------------------------------


def _versions() -> str:
    names = ["langgraph-checkpoint", "cryptography", "psycopg", "secure-serde"]
    return ", ".join(f"{n} {metadata.version(n)}" for n in names)


def print_table(runs: list[Run], baseline: float) -> None:
    print(
        "| store | rows | workers | batch | run | median wall s | median rows/s | peak RSS MiB"
        " | above imports MiB |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|")
    groups: dict[tuple[str, int, int, int, str], list[Run]] = {}
    for run in runs:
        groups.setdefault((run.store, run.rows, run.workers, run.batch, run.label), []).append(run)
    for (store, rows, workers, batch, label), group in groups.items():
        wall = statistics.median(r.wall for r in group)
        rate = statistics.median(r.rate for r in group)
        rss = max(r.rss_mib for r in group)
        print(
            f"| {store} | {rows:,} | {workers} | {batch} | {label} ({len(group)}x) |"
            f" {wall:.2f} | {rate:,.0f} | {rss:.1f} | {rss - baseline:+.1f} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()

    print(f"Date (UTC): {datetime.now(UTC):%Y-%m-%d %H:%M}")
    print(f"Versions: python {platform.python_version()}, {_versions()}")
    print(f"Machine: {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs")
    print(f"Load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    runs: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="secure-serde-bench-") as tmp_name:
        tmp = Path(tmp_name)
        baseline = baseline_rss(tmp)
        print(f"Peak RSS of the same child running `keygen` (imports only): {baseline:.1f} MiB")
        for size in args.sizes:
            print(f"building a SQLite store of {size:,} rows", file=sys.stderr)
            location, rows = sqlite_store(tmp, size)
            done, _ = measure(
                "SQLite",
                location,
                rows,
                tmp,
                current="a",
                workers=1,
                batch=args.batch_size,
                repeat=args.repeat,
            )
            runs += done
        if not args.no_postgres:
            with throwaway_postgres() as server_url:
                for size in args.sizes:
                    print(f"building a PostgreSQL store of {size:,} rows", file=sys.stderr)
                    location, rows = postgres_store(fresh_database(server_url), size)
                    current = "a"
                    for workers in args.workers:
                        done, current = measure(
                            "PostgreSQL",
                            location,
                            rows,
                            tmp,
                            current=current,
                            workers=workers,
                            batch=args.batch_size,
                            repeat=args.repeat,
                        )
                        runs += done
    print()
    print_table(runs, baseline)
    print()
    print(
        "wall: the whole child process, Python start-up included; rows/s: the command's own"
        " report (scan loop only); peak RSS: VmHWM of the rewrap process (largest worker"
        " process with --workers); above imports: minus the peak RSS of the same child running"
        " `keygen`, which loads the same modules."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
