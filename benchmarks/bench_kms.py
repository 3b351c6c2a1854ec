"""KmsEnvelopeCipher's cached path against the env-key cipher, blob sizes, and KMS calls.

Run from the repository root::

    .venv/bin/python benchmarks/bench_kms.py            # full run, a few minutes
    .venv/bin/python benchmarks/bench_kms.py --quick    # smoke run, seconds
    .venv/bin/python benchmarks/bench_kms.py --json results.json

KMS is moto's, started here in a thread on 127.0.0.1 and reached over HTTP,
so no AWS account is needed. The workload is bench_serde.py's: chat states
of 1, 20, 200 and 2000 messages from its ``make_state``, one round trip being
``loads_typed(dumps_typed(state))``.

Three serializers run side by side in round-robin batches, the order
rotating between repetitions (bench_serde.py's method): plain JsonPlus, the
env-key cipher (``EncryptedSerializer(EnvKeyCipher(key))``) and the KMS
cipher with a warm cache (``EncryptedSerializer(KmsEnvelopeCipher(arn))``
after ``warm()``). The timed loops make no KMS call, which the script
checks. Reported: the ratio of the KMS cipher's median to the env-key
cipher's, and the median of the per-repetition paired ratios; the target
is within 5%.

Then KMS calls are counted with botocore event hooks for 10,000 writes and
10,000 reads, from a cold and from a warm cache.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
from bench_serde import (
    FULL,
    MESSAGE_COUNTS,
    QUICK,
    Serde,
    Settings,
    interleaved_samples,
    make_state,
    versions,
)
from botocore.config import Config
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from moto.server import ThreadedMotoServer

from secure_serde import EncryptedSerializer
from secure_serde.ciphers import EnvKeyCipher, KmsEnvelopeCipher, _kms_format

# Fixed demo key for the env-key cipher. Not a secret.
DEMO_KEY = b"bench-kms-demo-key-not-a-secret!"
TARGET_RATIO = 1.05
TARGET_ADDED_BYTES = 250
AWS_WRAPPED_KEY_BYTES = 184  # CiphertextBlob size of an AES_256 data key from AWS KMS
OPERATIONS = 10_000

PLAIN, ENV, KMS = "plain", "env-key", "kms (warm)"


def _start_kms() -> tuple[ThreadedMotoServer, Any]:
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    client = boto3.client(
        "kms",
        region_name="us-east-1",
        endpoint_url=f"http://{host}:{port}",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",  # noqa: S106 - moto accepts anything
        config=Config(retries={"mode": "standard", "total_max_attempts": 3}),
    )
    return server, client


def _count_calls(client: Any) -> Counter[str]:
    calls: Counter[str] = Counter()

    def on_call(event_name: str, **_: Any) -> None:
        calls[event_name.rsplit(".", 1)[-1]] += 1

    client.meta.events.register("before-call.kms.*", on_call)
    return calls


# --------------------------------------------------------------------------
# Timing


@dataclass
class SpeedRow:
    messages: int
    plain_bytes: int
    medians_us: dict[str, float]
    samples_us: dict[str, list[float]]
    kms_over_env: float
    paired_kms_over_env: float
    added_bytes: dict[str, int]
    meets_ratio: bool


def bench_speed(
    count: int, serdes: dict[str, Serde], settings: Settings, progress: Callable[[str], None]
) -> SpeedRow:
    state = make_state(count)
    stored = {}
    for name, serde in serdes.items():
        stored[name] = serde.dumps_typed(state)
        if serde.loads_typed(stored[name]) != state:
            raise RuntimeError(f"{name}: round trip did not return an equal state")
    _, samples = interleaved_samples(serdes, state, settings)
    medians = {name: statistics.median(v) for name, v in samples.items()}
    paired = statistics.median(k / e for k, e in zip(samples[KMS], samples[ENV], strict=True))
    plain_bytes = len(stored[PLAIN][1])
    ratio = medians[KMS] / medians[ENV]
    progress(f"{count} messages: kms/env {ratio:.3f}x (paired {paired:.3f}x)")
    return SpeedRow(
        messages=count,
        plain_bytes=plain_bytes,
        medians_us=medians,
        samples_us=samples,
        kms_over_env=ratio,
        paired_kms_over_env=paired,
        added_bytes={name: len(blob) - plain_bytes for name, (_, blob) in stored.items()},
        meets_ratio=ratio <= TARGET_RATIO,
    )


# --------------------------------------------------------------------------
# KMS calls per 10k operations


@dataclass
class CallRow:
    scenario: str
    writes: int
    reads: int
    calls: dict[str, int]


def bench_calls(client: Any, arn: str, ops: int) -> tuple[list[CallRow], dict[str, float]]:
    calls = _count_calls(client)
    payload = make_state(1)
    rows: list[CallRow] = []

    def measure(scenario: str, writes: int, reads: int, action: Callable[[], None]) -> None:
        calls.clear()
        action()
        rows.append(CallRow(scenario, writes, reads, dict(sorted(calls.items()))))

    def writer(cipher: KmsEnvelopeCipher) -> list[tuple[str, bytes]]:
        serde = EncryptedSerializer(cipher)
        return [serde.dumps_typed(payload) for _ in range(ops)]

    def read_all(cipher: KmsEnvelopeCipher, blobs: Sequence[tuple[str, bytes]]) -> None:
        serde = EncryptedSerializer(cipher)
        for blob in blobs:
            serde.loads_typed(blob)

    cold = KmsEnvelopeCipher(arn, client=client)
    written: list[tuple[str, bytes]] = []
    measure("cold cache: writes", ops, 0, lambda: written.extend(writer(cold)))
    measure("same process: reads of its own writes", 0, ops, lambda: read_all(cold, written))
    measure(
        "cold cache, another process: reads",
        0,
        ops,
        lambda: read_all(KmsEnvelopeCipher(arn, client=client), written),
    )
    warm = KmsEnvelopeCipher(arn, client=client)
    measure("warm(), at start-up", 0, 0, warm.warm)
    measure("warm cache: writes", ops, 0, lambda: written.extend(writer(warm)))
    measure("warm cache: reads", 0, ops, lambda: read_all(warm, written[-ops:]))
    small = KmsEnvelopeCipher(arn, client=client, max_messages=1000)
    few: list[tuple[str, bytes]] = []
    measure("max_messages=1000: writes", ops, 0, lambda: few.extend(writer(small)))
    measure(
        "max_messages=1000, another process: reads",
        0,
        ops,
        lambda: read_all(KmsEnvelopeCipher(arn, client=client), few),
    )

    first_call: list[float] = []
    for _ in range(20):
        fresh = KmsEnvelopeCipher(arn, client=client)
        start = time.perf_counter()
        fresh.warm()
        first_call.append((time.perf_counter() - start) * 1e3)
    cost = {"median_ms": statistics.median(first_call), "min_ms": min(first_call)}
    return rows, cost


# --------------------------------------------------------------------------
# Report


def render(
    speed: Sequence[SpeedRow],
    calls: Sequence[CallRow],
    cost: dict[str, float],
    mode: str,
    ops: int,
) -> str:
    lines = [
        f"Date (UTC): {datetime.now(UTC).strftime('%Y-%m-%d %H:%M')}",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in versions().items()),
        f"Mode: {mode}; KMS: moto ThreadedMotoServer over HTTP on 127.0.0.1",
        "",
        "| messages | plain size | plain µs | env-key µs | kms µs | kms/env (medians) "
        "| kms/env (paired) | target | env-key added B | kms added B (moto) "
        "| kms added B (AWS, computed) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in speed:
        m = row.medians_us
        aws_added = _kms_format.FIXED_OVERHEAD + AWS_WRAPPED_KEY_BYTES
        verdict = "meets" if row.meets_ratio else "MISSES"
        lines.append(
            f"| {row.messages} | {row.plain_bytes:,} B | {m[PLAIN]:,.1f} | {m[ENV]:,.1f} "
            f"| {m[KMS]:,.1f} | {row.kms_over_env:.3f}x | {row.paired_kms_over_env:.3f}x "
            f"| ≤{TARGET_RATIO:.2f}x {verdict} | +{row.added_bytes[ENV]} "
            f"| +{row.added_bytes[KMS]} | +{aws_added} |"
        )
    lines += [
        "",
        f"KMS calls per {ops:,} operations (1-message state; default cache limits unless stated):",
        "",
        "| scenario | writes | reads | KMS calls |",
        "|---|---:|---:|---|",
    ]
    for c in calls:
        shown = ", ".join(f"{k} {v}" for k, v in c.calls.items()) or "none"
        lines.append(f"| {c.scenario} | {c.writes:,} | {c.reads:,} | {shown} |")
    lines += [
        "",
        f"First call (warm(): one GenerateDataKey to moto over HTTP): median"
        f" {cost['median_ms']:.1f} ms, min {cost['min_ms']:.1f} ms over 20 new ciphers.",
        "Absolute times vary with the machine and its load; only same-run ratios compare.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="short smoke run")
    parser.add_argument("--json", metavar="PATH", type=Path, help="also write results as JSON")
    parser.add_argument(
        "--messages", type=int, nargs="+", choices=MESSAGE_COUNTS, default=list(MESSAGE_COUNTS)
    )
    args = parser.parse_args(argv)
    settings = QUICK if args.quick else FULL
    mode = "quick" if args.quick else "full"

    def progress(msg: str) -> None:
        print(f"[bench_kms] {msg}", file=sys.stderr, flush=True)

    server, client = _start_kms()
    try:
        arn = client.create_key(Description="bench_kms")["KeyMetadata"]["Arn"]
        kms_cipher = KmsEnvelopeCipher(arn, client=client)
        kms_cipher.warm()
        timed_calls = _count_calls(client)
        serdes: dict[str, Serde] = {
            PLAIN: JsonPlusSerializer(),
            ENV: EncryptedSerializer(EnvKeyCipher(DEMO_KEY)),
            KMS: EncryptedSerializer(kms_cipher),
        }
        speed = [bench_speed(n, serdes, settings, progress) for n in sorted(args.messages)]
        if timed_calls:
            raise RuntimeError(f"the timed loops called KMS: {dict(timed_calls)}")
        ops = 1000 if args.quick else OPERATIONS
        calls, cost = bench_calls(client, arn, ops)
    finally:
        server.stop()
    print(render(speed, calls, cost, mode, ops), flush=True)
    if args.json is not None:
        payload = {
            "mode": mode,
            "versions": versions(),
            "settings": asdict(settings),
            "speed": [asdict(row) for row in speed],
            "calls": [asdict(row) for row in calls],
            "first_call": cost,
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
