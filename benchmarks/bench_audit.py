"""How fast ``secure-serde audit`` reads a store, next to ``rewrap --dry-run --verify``.

Run from the repository root::

    .venv/bin/python benchmarks/bench_audit.py                       # 6k and 90k rows, 5 reps
    .venv/bin/python benchmarks/bench_audit.py --copies 25 --repeat 1  # smoke run

Workload: the chat graph of ``tests/passes/rewrap_support.py`` run for its template threads under
one key, then cloned (``build_sqlite_store``) into SQLite stores of about 5.8k rows per 25 copies.

Both commands do the same cryptographic work on every row (decrypt and authenticate it under
its inner type tag, never deserialize it), so rewrap's verify pass is the baseline: what audit
adds is sorting rows by cipher, key id and format version, and its queries on the metadata JSON.
Each repetition runs one audit and one dry-run verify on the same store, in an order that
alternates between repetitions; the table reports medians and the ratio of the medians from the
same run. Audit's memory is the peak of Python allocations (``tracemalloc``) during one audit,
which should not grow with the store.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from secure_serde import rewrap  # noqa: E402
from secure_serde.config import ConfiguredCiphers, require_ciphers  # noqa: E402
from secure_serde.passes import audit_store  # noqa: E402
from secure_serde.stores import open_store  # noqa: E402
from tests.passes.rewrap_support import KEY_A, build_sqlite_store, rotation_serde  # noqa: E402


def run_audit(path: Path, ciphers: ConfiguredCiphers) -> int:
    with open_store(str(path)) as store:
        return audit_store(store, ciphers, batch_size=500).cells


def run_verify(path: Path, ciphers: ConfiguredCiphers) -> int:
    return rewrap(str(path), ciphers.primary, dry_run=True, verify=True).scanned


def measure(path: Path, ciphers: ConfiguredCiphers, repeat: int) -> dict[str, float]:
    times: dict[str, list[float]] = {"audit": [], "verify": []}
    order = [("audit", run_audit), ("verify", run_verify)]
    for rep in range(repeat):
        for name, run in order if rep % 2 == 0 else order[::-1]:
            started = time.perf_counter()
            run(path, ciphers)
            times[name].append(time.perf_counter() - started)
    tracemalloc.start()
    rows = run_audit(path, ciphers)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    audit, verify = statistics.median(times["audit"]), statistics.median(times["verify"])
    return {
        "rows": rows,
        "audit": audit,
        "verify": verify,
        "ratio": audit / verify,
        "rate": rows / audit,
        "peak": peak / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, nargs="+", default=[25, 400])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    os.environ["LANGGRAPH_AES_KEY"] = KEY_A
    ciphers = require_ciphers()
    print(
        "| rows | audit (median s) | rewrap --dry-run --verify (median s) | ratio | audit rows/s"
        " | audit peak (MiB) |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for copies in args.copies:
            path = Path(tmp) / f"audit-{copies}.sqlite"
            build_sqlite_store(path, rotation_serde({"env": KEY_A}, "env"), copies=copies)
            r = measure(path, ciphers, args.repeat)
            print(
                f"| {r['rows']:,.0f} | {r['audit']:.3f} | {r['verify']:.3f} | {r['ratio']:.2f}"
                f" | {r['rate']:,.0f} | {r['peak']:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
