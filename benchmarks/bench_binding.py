"""What binding values to their rows costs, against format v1 and unbound savers, in one run.

Run from the repository root (PostgreSQL is optional; without a DSN only the serializer and the
SQLite savers are measured)::

    .venv/bin/python benchmarks/bench_binding.py
    .venv/bin/python benchmarks/bench_binding.py --dsn "postgresql://postgres@127.0.0.1:5432/bench"
    .venv/bin/python benchmarks/bench_binding.py --quick

Serializer round trips (``loads(dumps(state))``, the chat states of bench_serde.py):

* ``v1``: JsonPlus plus the format v1 seal and open of secure_serde 0.1 (the keyring's v1
  recipe, kept for the frozen vectors), the baseline;
* ``v2 unbound``: ``dumps_typed``/``loads_typed`` (format v2: key commitment, empty location);
* ``v2 bound``: ``dumps_typed_at``/``loads_typed_at`` at a pending-write location.

Savers (``put`` of a chain of checkpoints on a fresh thread, then ``get_tuple`` of each): the
sealed saver bound (this release) against the same saver with binding switched off, which is
what the 0.1 sealed savers did per value; for SQLite, against the stock SqliteSaver with the
same serializer. Batches rotate order between repetitions; tables give medians and same-run
ratios. Compare ratios only.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver as StockSqliteSaver

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serde import make_state

from secure_serde import EncryptedSerializer
from secure_serde._binding import Location
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.savers._v03_sqlite import SqliteSaver

KEY = b"bench-key-not-a-secret-012345678"
LOCATION = Location.write("thread-42", "", "1f0a1b2c-3d4e", "task-7", "~root", 0, "messages")


class UnboundSerializer(EncryptedSerializer):
    """The same serializer with binding off: the sealed savers then write as 0.1 did."""

    __slots__ = ()

    @property
    def binds_locations(self) -> bool:
        return False


def _median_of(run: Callable[[], None], calls: int, reps: int) -> float:
    samples = []
    for _ in range(reps):
        gc.disable()
        start = time.perf_counter()
        for _ in range(calls):
            run()
        samples.append((time.perf_counter() - start) / calls)
        gc.enable()
    return statistics.median(samples)


def bench_serializer(quick: bool) -> None:
    cipher = EnvKeyCipher(KEY)
    serde = EncryptedSerializer(cipher)
    inner, keyring = serde.serde, cipher.keyring
    print("## Serializer round trip (median per call)\n")
    print("| messages | v1 | v2 unbound | v2 bound | bound / v1 |")
    print("|---|---|---|---|---|")
    for count in (1, 20, 200):
        state = make_state(count)

        def v1(state: Any = state) -> None:
            tag, data = inner.dumps_typed(state)
            blob = keyring._seal_v1_with_nonce(data, tag, os.urandom(12))
            inner.loads_typed((tag, keyring.open(blob, tag)))

        def unbound(state: Any = state) -> None:
            serde.loads_typed(serde.dumps_typed(state))

        def bound(state: Any = state) -> None:
            serde.loads_typed_at(serde.dumps_typed_at(state, LOCATION), LOCATION)

        runs = {"v1": v1, "unbound": unbound, "bound": bound}
        calls = max(1, int(0.02 / max(1e-6, _median_of(v1, 1, 3)))) if not quick else 5
        reps = 5 if quick else 31
        results: dict[str, list[float]] = {k: [] for k in runs}
        for rep in range(reps):
            names = list(runs)
            names = names[rep % 3 :] + names[: rep % 3]
            for name in names:
                results[name].append(_median_of(runs[name], calls, 1))
        med = {k: statistics.median(v) for k, v in results.items()}
        print(
            f"| {count} | {med['v1'] * 1e6:.1f} µs | {med['unbound'] * 1e6:.1f} µs |"
            f" {med['bound'] * 1e6:.1f} µs | {med['bound'] / med['v1']:.3f} |"
        )
    print()


def _checkpoint(n: int, state: dict[str, Any]) -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {**state, "turn": n}
    checkpoint["channel_versions"] = {"messages": f"{n:032}.0", "turn": f"{n:032}.0"}
    return checkpoint


def _batch(saver: Any, state: dict[str, Any], length: int) -> tuple[float, float]:
    config: Any = {"configurable": {"thread_id": uuid.uuid4().hex, "checkpoint_ns": ""}}
    stored = []
    start = time.perf_counter()
    for n in range(1, length + 1):
        versions = {"messages": f"{n:032}.0", "turn": f"{n:032}.0"}
        config = saver.put(config, _checkpoint(n, state), {"source": "loop", "step": n}, versions)
        stored.append(config)
    put = (time.perf_counter() - start) / length
    start = time.perf_counter()
    for config in stored:
        if saver.get_tuple(config) is None:
            raise RuntimeError("a checkpoint did not read back")
    return put, (time.perf_counter() - start) / length


def _compare(savers: dict[str, Any], quick: bool, title: str, baseline: str) -> None:
    state = make_state(20)
    reps, length = (3, 5) if quick else (15, 40)
    puts: dict[str, list[float]] = {k: [] for k in savers}
    gets: dict[str, list[float]] = {k: [] for k in savers}
    for rep in range(reps):
        names = list(savers)
        names = names[rep % len(names) :] + names[: rep % len(names)]
        for name in names:
            put, get = _batch(savers[name], state, length)
            puts[name].append(put)
            gets[name].append(get)
    print(f"## {title} (20 messages; median per call)\n")
    print(f"| saver | put | get_tuple | put / {baseline} | get_tuple / {baseline} |")
    print("|---|---|---|---|---|")
    base_put, base_get = statistics.median(puts[baseline]), statistics.median(gets[baseline])
    for name in savers:
        put, get = statistics.median(puts[name]), statistics.median(gets[name])
        print(
            f"| {name} | {put * 1e6:.0f} µs | {get * 1e6:.0f} µs | {put / base_put:.3f} |"
            f" {get / base_get:.3f} |"
        )
    print()


def bench_sqlite(quick: bool) -> None:
    serde = EncryptedSerializer(EnvKeyCipher(KEY))
    with tempfile.TemporaryDirectory() as folder:
        import sqlite3

        conn = sqlite3.connect(Path(folder) / "bench.sqlite", check_same_thread=False)
        savers = {
            "stock SqliteSaver, unbound": StockSqliteSaver(conn, serde=serde),
            # Binding alone, as the stock saver keeps metadata; then with the default.
            "sealed SqliteSaver, bound": SqliteSaver(conn, serde=serde, seal_metadata=False),
            "sealed SqliteSaver, bound, metadata sealed": SqliteSaver(conn, serde=serde),
        }
        _compare(savers, quick, "SQLite savers", "stock SqliteSaver, unbound")
        conn.close()


def bench_postgres(dsn: str, quick: bool) -> None:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver as StockPostgresSaver
    from psycopg.rows import dict_row

    from secure_serde.savers._v03_postgres import PostgresSaver

    with psycopg.Connection.connect(
        dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        StockPostgresSaver(conn).setup()
        savers = {
            "sealed, unbound (0.1)": PostgresSaver(
                conn, serde=UnboundSerializer(EnvKeyCipher(KEY))
            ),
            "sealed, bound": PostgresSaver(conn, serde=EncryptedSerializer(EnvKeyCipher(KEY))),
        }
        _compare(savers, quick, "PostgreSQL sealed savers", "sealed, unbound (0.1)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", help="a PostgreSQL database to create tables in")
    parser.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    args = parser.parse_args()
    bench_serializer(args.quick)
    bench_sqlite(args.quick)
    if args.dsn:
        bench_postgres(args.dsn, args.quick)


if __name__ == "__main__":
    main()
