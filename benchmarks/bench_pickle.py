"""Per-value pickle fallback against JsonPlus's whole-checkpoint pickle: bytes and round trips.

Run from the repository root::

    .venv/bin/python benchmarks/bench_pickle.py            # full run, about two minutes
    .venv/bin/python benchmarks/bench_pickle.py --quick    # smoke run, seconds

Workloads (seeded, no network):

* ``frame+messages``: ``{"table": <DataFrame of 1,000 rows>, "messages": <200 chat
  messages>}``. The frame has an int id, a float, a short string, a tz-aware
  timestamp, a categorical and a nullable Int64 column;
* ``messages``: the same 200 messages alone, to show that with the pickle
  fallback in place they cost what plain msgpack costs;
* ``frame``: the DataFrame alone, against a bare ``pickle.dumps``/``loads``, to
  show what the checks around each pickle cost.

The static scan's verdict is remembered per serializer, by the pickle's
SHA-256 digest: an unchanged frame, checkpointed again, or a row read back by
the process that wrote it, is scanned once. ``per-value+enc cold`` empties
that cache before every ``dumps_typed`` and every ``loads_typed``, as for a
frame that changed at every step and a row this process did not write.

One round trip is ``loads_typed(dumps_typed(state))``. Every serializer of a
workload runs one timed batch per repetition, in round-robin order that
rotates between repetitions, so they all see the same machine conditions; a
batch's mean per-call time is one sample, the tables give the median and the
minimum, and each ratio is a median divided by the baseline's median from the
same run. The pickle fallback alone reads with ``allow_unauthenticated=True``
to time the layer itself; the encrypted rows are the composition to use.
"""

from __future__ import annotations

import argparse
import gc
import pickle
import platform
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

import numpy as np
import pandas as pd
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import EncryptedSerializer, PickleFallbackSerializer
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.pickling import PANDAS

SEED = 20240611
ROWS = 1_000
MESSAGES = 200
DEMO_KEY = b"bench-demo-key-not-a-secret-0032"  # fixed, for this benchmark only


@dataclass(frozen=True)
class Settings:
    repetitions: int
    batch_seconds: float
    warmup_seconds: float


FULL = Settings(repetitions=41, batch_seconds=0.1, warmup_seconds=0.5)
QUICK = Settings(repetitions=5, batch_seconds=0.01, warmup_seconds=0.05)


# --- workload -------------------------------------------------------------------------------

_VOCABULARY = (
    "the a to of and in for on with checkpoint graph node state message thread run step tool"
    " call result order invoice refund account balance payment report summary table query"
)
_WORDS = tuple(_VOCABULARY.split(" "))


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)).capitalize() + "."


def messages(rng: random.Random) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for i in range(MESSAGES):
        if i % 2 == 0:
            out.append(
                HumanMessage(
                    content=_text(rng, rng.randint(12, 80)),
                    id=str(uuid.UUID(int=rng.getrandbits(128))),
                )
            )
        else:
            tokens = rng.randint(200, 8000)
            out.append(
                AIMessage(
                    content=_text(rng, rng.randint(15, 95)),
                    id=f"run-{uuid.UUID(int=rng.getrandbits(128))}",
                    response_metadata={"model_name": "demo-model", "finish_reason": "stop"},
                    usage_metadata={
                        "input_tokens": tokens,
                        "output_tokens": 99,
                        "total_tokens": tokens + 99,
                    },
                )
            )
    return out


def frame(rng: random.Random) -> pd.DataFrame:
    gen = np.random.default_rng(SEED)
    return pd.DataFrame(
        {
            "id": np.arange(ROWS, dtype=np.int64),
            "value": gen.normal(size=ROWS),
            "name": [f"item-{rng.randint(0, 99_999):05d}" for _ in range(ROWS)],
            "at": pd.date_range("2024-01-01", periods=ROWS, freq="min", tz="Europe/Paris"),
            "kind": pd.Categorical(gen.choice(["north", "south", "east", "west"], size=ROWS)),
            "count": pd.array([None if i % 7 == 0 else i for i in range(ROWS)], dtype="Int64"),
        }
    )


# --- serializers ----------------------------------------------------------------------------


class Serde:
    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        raise NotImplementedError

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        raise NotImplementedError


class ColdScan(Serde):
    """The encrypted per-value composition with its scan-verdict cache emptied before each call."""

    def __init__(self, serde: EncryptedSerializer) -> None:
        self._serde = serde
        fallback = serde.serde
        if not isinstance(fallback, PickleFallbackSerializer):
            raise TypeError("ColdScan wraps EncryptedSerializer(PickleFallbackSerializer(...))")
        self._verdicts = fallback._policy.verdicts

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        self._verdicts._passed.clear()
        return self._serde.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        self._verdicts._passed.clear()
        return self._serde.loads_typed(data)


class BarePickle(Serde):
    """``pickle.dumps``/``loads`` and nothing else: the floor for one pickled value."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        return "pickle", pickle.dumps(obj, protocol=5)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return pickle.loads(data[1])


def serializers() -> dict[str, tuple[str, Any]]:
    cipher = EnvKeyCipher(DEMO_KEY)
    return {
        "jsonplus": (
            "JsonPlusSerializer() (msgpack; cannot take a DataFrame)",
            JsonPlusSerializer(),
        ),
        "whole-pickle": (
            "JsonPlusSerializer(pickle_fallback=True): pickles the whole checkpoint",
            JsonPlusSerializer(pickle_fallback=True),
        ),
        "whole-pickle+enc": (
            "EncryptedSerializer over JsonPlusSerializer(pickle_fallback=True)",
            EncryptedSerializer(cipher, JsonPlusSerializer(pickle_fallback=True)),
        ),
        "per-value": (
            "PickleFallbackSerializer(allowed=[PANDAS]) alone",
            PickleFallbackSerializer(allowed=[PANDAS], allow_unauthenticated=True),
        ),
        "per-value+enc": (
            "EncryptedSerializer over PickleFallbackSerializer(allowed=[PANDAS])",
            EncryptedSerializer(cipher, PickleFallbackSerializer(allowed=[PANDAS])),
        ),
        "per-value+enc cold": (
            "the same, scanning every pickle (verdict cache emptied before each call)",
            ColdScan(EncryptedSerializer(cipher, PickleFallbackSerializer(allowed=[PANDAS]))),
        ),
        "bare-pickle": ("pickle.dumps/loads of the value, nothing else", BarePickle()),
    }


WORKLOADS: dict[str, tuple[str, list[str]]] = {
    "frame+messages": (
        "whole-pickle",
        ["whole-pickle", "whole-pickle+enc", "per-value", "per-value+enc", "per-value+enc cold"],
    ),
    "messages": ("jsonplus", ["jsonplus", "whole-pickle", "per-value", "per-value+enc"]),
    "frame": (
        "bare-pickle",
        ["bare-pickle", "whole-pickle", "per-value", "per-value+enc", "per-value+enc cold"],
    ),
}


# --- timing ---------------------------------------------------------------------------------


def roundtrip(serde: Any, state: Any) -> Callable[[], Any]:
    return lambda: serde.loads_typed(serde.dumps_typed(state))


def calibrate(call: Callable[[], Any], settings: Settings) -> int:
    deadline = time.perf_counter() + settings.warmup_seconds
    calls = 0
    while time.perf_counter() < deadline or calls == 0:
        call()
        calls += 1
    per_call = settings.warmup_seconds / calls
    return max(1, int(settings.batch_seconds / per_call))


def batch(call: Callable[[], Any], count: int) -> float:
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(count):
            call()
        return (time.perf_counter() - start) / count
    finally:
        gc.enable()


def measure(calls: dict[str, Callable[[], Any]], settings: Settings) -> dict[str, list[float]]:
    counts = {name: calibrate(call, settings) for name, call in calls.items()}
    names = list(calls)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(settings.repetitions):
        order = names[rep % len(names) :] + names[: rep % len(names)]
        for name in order:
            samples[name].append(batch(calls[name], counts[name]))
        gc.collect()
    return samples


def check_roundtrip(serde: Any, state: Any) -> None:
    out = serde.loads_typed(serde.dumps_typed(state))
    if isinstance(state, dict):
        for key, value in state.items():
            if isinstance(value, pd.DataFrame):
                pd.testing.assert_frame_equal(out[key], value)
            elif out[key] != value:
                raise AssertionError(f"{key} did not round-trip")
    else:
        pd.testing.assert_frame_equal(out, state)


# --- report ---------------------------------------------------------------------------------


def fmt_us(seconds: float) -> str:
    us = seconds * 1e6
    return f"{us:,.0f}" if us >= 1000 else f"{us:.1f}"


def version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds, for a smoke test")
    args = parser.parse_args()
    settings = QUICK if args.quick else FULL

    rng = random.Random(SEED)  # noqa: S311  (a reproducible workload, not a secret)
    msgs = messages(rng)
    table = frame(rng)
    states: dict[str, Any] = {
        "frame+messages": {"table": table, "messages": msgs},
        "messages": {"messages": msgs},
        "frame": table,
    }
    serdes = serializers()
    versions = ", ".join(
        f"{name} {version(name)}"
        for name in ("langgraph-checkpoint", "pandas", "numpy", "ormsgpack", "secure-serde")
    )
    print(f"Date (UTC): {datetime.now(UTC):%Y-%m-%d %H:%M}")
    print(f"Versions: python {platform.python_version()}, {versions}")
    mode = "quick" if args.quick else "full"
    print(f"Machine: {platform.system()} {platform.machine()}, mode: {mode}")
    print(
        f"State: DataFrame of {ROWS:,} rows x {len(table.columns)} columns, {MESSAGES} messages\n"
    )
    print("Serializers:")
    for name, (label, _) in serdes.items():
        print(f"- {name}: {label}")
    print()
    print(
        "| workload | serializer | stored bytes | tag | median µs/round trip | min µs | ratio"
        " | paired |"
    )
    print("|---|---|---:|---|---:|---:|---:|---:|")
    for workload, (baseline, names) in WORKLOADS.items():
        state = states[workload]
        for name in names:
            check_roundtrip(serdes[name][1], state)
        print(f"measuring {workload}...", file=sys.stderr)
        samples = measure({name: roundtrip(serdes[name][1], state) for name in names}, settings)
        base = statistics.median(samples[baseline])
        for name in names:
            tag, data = serdes[name][1].dumps_typed(state)
            median = statistics.median(samples[name])
            paired = statistics.median(
                mine / theirs for mine, theirs in zip(samples[name], samples[baseline], strict=True)
            )
            print(
                f"| {workload} | {name} | {len(data):,} | {tag} | {fmt_us(median)} |"
                f" {fmt_us(min(samples[name]))} | {median / base:.3f}x | {paired:.3f}x |"
            )
    print(
        "\nRatios: each workload's median over its first serializer's median, same run"
        " (frame+messages: whole-pickle; messages: jsonplus; frame: bare-pickle). 'paired'"
        " is the median over the repetitions of each repetition's batch over the baseline's"
        " batch of the same repetition, which a busy machine disturbs less."
    )


if __name__ == "__main__":
    main()
