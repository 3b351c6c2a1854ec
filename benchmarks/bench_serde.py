"""Round-trip speed and size of encrypted checkpoint serializers, side by side.

Run from the repository root::

    .venv/bin/python benchmarks/bench_serde.py            # full run, a few minutes
    .venv/bin/python benchmarks/bench_serde.py --quick    # smoke run, seconds
    .venv/bin/python benchmarks/bench_serde.py --json results.json

The workload is a LangGraph chat state ``{"messages": [...]}`` of 1, 20, 200
and 2000 generated chat messages (HumanMessage and AIMessage alternating,
seeded, no network). One round trip is ``loads_typed(dumps_typed(state))``.

For every state, each repetition runs one timed batch per serializer, in
round-robin order (the order rotates between repetitions), so all the
serializers see the same machine conditions. A batch's mean per-call time is
one sample; the tables report the median and the minimum of those samples,
and every ratio is the median of a serializer divided by the median of plain
JsonPlus from the same run. Absolute times depend on the machine and its load;
only the same-run ratios are comparable between runs.
"""

from __future__ import annotations

import argparse
import base64
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as LGEncrypted
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import EncryptedSerializer

ENV_VAR = "LANGGRAPH_AES_KEY"
# Fixed demo key, used only when LANGGRAPH_AES_KEY is unset. Not a secret.
DEMO_KEY = "bench-demo-key-not-a-secret-0032"
ENCODED_PREFIX = "base64:"

SEED = 20240611
MESSAGE_COUNTS: tuple[int, ...] = (1, 20, 200, 2000)

# Targets from the issue: the highest acceptable round-trip ratio to plain
# JsonPlus per state, and the most bytes a blob may grow by.
TARGET_RATIOS: dict[int, float] = {1: 1.15, 20: 1.05, 200: 1.03, 2000: 1.05}
TARGET_ADDED_BYTES = 34
# Issue 23: secure_serde's round trip against the bare AES-GCM floor (key commitment kept).
FLOOR_TARGETS: dict[int, float] = {1: 1.10, 20: 1.03, 200: 1.03}

PLAIN = "plain"
FLOOR = "floor"
BUILTIN = "builtin"
SECURE = "secure"
SECURE_NAMES: frozenset[str] = frozenset({SECURE})

LABELS: dict[str, str] = {
    PLAIN: "plain JsonPlusSerializer",
    FLOOR: "raw AES-GCM floor (JsonPlus + cryptography AESGCM)",
    BUILTIN: "langgraph EncryptedSerializer (AES-EAX, pycryptodome)",
    SECURE: "secure_serde (AES-256-GCM, cryptography/OpenSSL)",
}
SHORT: dict[str, str] = {
    PLAIN: "plain",
    FLOOR: "AES-GCM floor",
    BUILTIN: "langgraph EAX",
    SECURE: "secure_serde auto",
}


class Serde(Protocol):
    def dumps_typed(self, obj: Any) -> tuple[str, bytes]: ...

    def loads_typed(self, data: tuple[str, bytes]) -> Any: ...


@dataclass(frozen=True)
class Settings:
    repetitions: int
    batch_seconds: float
    warmup_seconds: float


FULL = Settings(repetitions=61, batch_seconds=0.05, warmup_seconds=0.3)
QUICK = Settings(repetitions=5, batch_seconds=0.005, warmup_seconds=0.02)


# --------------------------------------------------------------------------
# Workload


_VOCABULARY = (
    "the a an to of and in for on with that this it is be as at by from or we you they "
    "checkpoint graph node state message thread run step tool call result error retry "
    "customer order invoice refund shipping address account balance payment card policy "
    "please could would should can will need want check update confirm cancel schedule "
    "meeting report summary analysis data table query database index latency throughput "
    "encryption key rotation secret token access permission user admin team project "
    "deadline budget estimate forecast quarter revenue growth churn cohort segment metric "
    "document section paragraph draft review comment approve reject merge branch release"
)
_WORDS: tuple[str, ...] = tuple(_VOCABULARY.split())
_TOOLS = (
    ("search_knowledge_base", ("query", "top_k")),
    ("get_order_status", ("order_id", "include_history")),
    ("create_calendar_event", ("title", "start", "duration_minutes")),
    ("run_sql_query", ("sql", "timeout_s")),
)
_MODELS = ("gpt-4o-2024-08-06", "claude-3-5-sonnet-20241022")


def _text(rng: random.Random, words: int) -> str:
    sentences: list[str] = []
    left = words
    while left > 0:
        n = min(left, rng.randint(6, 18))
        left -= n
        sentence = " ".join(rng.choice(_WORDS) for _ in range(n))
        sentences.append(sentence[0].upper() + sentence[1:] + rng.choice(".?."))
    return " ".join(sentences)


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _tool_args(rng: random.Random, params: Sequence[str]) -> dict[str, Any]:
    args: dict[str, Any] = {}
    for param in params:
        if param in {"top_k", "duration_minutes", "timeout_s"}:
            args[param] = rng.choice((5, 10, 30, 60))
        elif param == "include_history":
            args[param] = rng.random() < 0.5
        elif param == "order_id":
            args[param] = f"ORD-{rng.randint(100000, 999999)}"
        elif param == "start":
            args[param] = f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}T1{rng.randint(0, 7)}:00"
        else:
            args[param] = _text(rng, rng.randint(4, 12))
    return args


def _human(rng: random.Random, first: bool) -> HumanMessage:
    # The first message is sized so the one-message state is about 0.6 KB.
    words = 64 if first else rng.randint(12, 80)
    return HumanMessage(content=_text(rng, words), id=_uuid(rng))


def _ai(rng: random.Random) -> AIMessage:
    input_tokens = rng.randint(200, 8000)
    output_tokens = rng.randint(20, 400)
    model = rng.choice(_MODELS)
    tool_calls: list[dict[str, Any]] = []
    if rng.random() < 0.3:
        for _ in range(rng.randint(1, 2)):
            name, params = rng.choice(_TOOLS)
            tool_calls.append(
                {
                    "name": name,
                    "args": _tool_args(rng, params),
                    "id": f"call_{rng.getrandbits(96):024x}",
                    "type": "tool_call",
                }
            )
    content = _text(rng, rng.randint(5, 25) if tool_calls else rng.randint(15, 95))
    return AIMessage(
        content=content,
        id=f"run-{_uuid(rng)}-0",
        tool_calls=tool_calls,
        response_metadata={
            "model_name": model,
            "finish_reason": "tool_calls" if tool_calls else "stop",
            "system_fingerprint": f"fp_{rng.getrandbits(40):010x}",
            "token_usage": {
                "prompt_tokens": input_tokens,
                "completion_tokens": output_tokens,
                "total_tokens": input_tokens + output_tokens,
            },
        },
        usage_metadata={
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens,
        },
    )


def make_state(count: int, seed: int = SEED) -> dict[str, list[BaseMessage]]:
    """A chat state of ``count`` messages; the same for the same seed."""
    rng = random.Random(seed)  # noqa: S311 - reproducible test data, not crypto
    messages: list[BaseMessage] = []
    for i in range(count):
        messages.append(_human(rng, first=i == 0) if i % 2 == 0 else _ai(rng))
    return {"messages": messages}


# --------------------------------------------------------------------------
# Serializers


class AesGcmFloor:
    """Plain JsonPlus plus one `cryptography` AES-GCM seal and open per blob.

    No header, no AAD, no key id: the least any AES-GCM wrapper can cost.
    The blob is ``nonce(12) | ciphertext | tag(16)``.
    """

    def __init__(self) -> None:
        self._serde = JsonPlusSerializer()
        self._aead = AESGCM(AESGCM.generate_key(bit_length=256))

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        type_tag, data = self._serde.dumps_typed(obj)
        nonce = os.urandom(12)
        return type_tag, nonce + self._aead.encrypt(nonce, data, None)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_tag, blob = data
        view = memoryview(blob)
        return self._serde.loads_typed((type_tag, self._aead.decrypt(view[:12], view[12:], None)))


def _builtin_kwargs() -> dict[str, Any]:
    # langgraph's built-in takes the env var's raw text as the key. If the
    # environment holds a secure_serde "base64:" key, hand it the decoded bytes.
    value = os.environ[ENV_VAR]
    if value.startswith(ENCODED_PREFIX):
        return {"key": base64.b64decode(value[len(ENCODED_PREFIX) :])}
    return {}


def build_serializers() -> dict[str, Serde]:
    return {
        PLAIN: JsonPlusSerializer(),
        FLOOR: AesGcmFloor(),
        BUILTIN: LGEncrypted.from_pycryptodome_aes(**_builtin_kwargs()),
        SECURE: EncryptedSerializer.from_pycryptodome_aes(),
    }


# --------------------------------------------------------------------------
# Timing


def time_batch(serde: Serde, state: Any, calls: int) -> float:
    """Mean seconds per round trip over ``calls`` calls, with gc paused."""
    dumps = serde.dumps_typed
    loads = serde.loads_typed
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        for _ in range(calls):
            loads(dumps(state))
        elapsed = time.perf_counter() - start
    finally:
        if gc_was_enabled:
            gc.enable()
    return elapsed / calls


def calibrate(serde: Serde, state: Any, settings: Settings) -> int:
    """Warm up, then pick a call count that makes one batch last about batch_seconds."""
    deadline = time.perf_counter() + settings.warmup_seconds
    per_call = time_batch(serde, state, 1)
    while time.perf_counter() < deadline:
        per_call = min(per_call, time_batch(serde, state, 1))
    return max(1, round(settings.batch_seconds / per_call))


def interleaved_samples(
    serializers: dict[str, Serde], state: Any, settings: Settings
) -> tuple[dict[str, int], dict[str, list[float]]]:
    """Calls per batch, and microseconds per round trip of each batch, for each serializer.

    Every repetition runs one batch of each serializer, in an order rotated by one each time,
    so that none always runs first or right after the collection between repetitions.
    """
    calls = {name: calibrate(s, state, settings) for name, s in serializers.items()}
    names = list(serializers)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(settings.repetitions):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            samples[name].append(time_batch(serializers[name], state, calls[name]) * 1e6)
        gc.collect()
    return calls, samples


@dataclass
class Result:
    serializer: str
    label: str
    calls_per_batch: int
    samples_us: list[float]
    median_us: float
    min_us: float
    ratio_to_plain: float
    ratio_to_floor: float
    paired_ratio_to_floor: float
    stored_bytes: int
    added_bytes: int
    target_ratio: float | None
    meets_ratio: bool | None
    meets_added_bytes: bool | None


@dataclass
class StateResult:
    messages: int
    plain_bytes: int
    repetitions: int
    results: list[Result]


def _check_round_trip(name: str, serde: Serde, state: Any) -> tuple[str, bytes]:
    stored = serde.dumps_typed(state)
    if serde.loads_typed(stored) != state:
        raise RuntimeError(f"{name}: round trip did not return an equal state")
    return stored


def bench_state(
    count: int,
    serializers: dict[str, Serde],
    settings: Settings,
    progress: Callable[[str], None],
) -> StateResult:
    state = make_state(count)
    stored = {name: _check_round_trip(name, s, state) for name, s in serializers.items()}
    plain_bytes = len(stored[PLAIN][1])
    progress(f"{count} messages: plain {plain_bytes} B; calibrating")

    calls, samples = interleaved_samples(serializers, state, settings)
    names = list(serializers)
    progress(f"{count} messages: {settings.repetitions} repetitions done")

    plain_median = statistics.median(samples[PLAIN])
    floor_median = statistics.median(samples[FLOOR])
    results: list[Result] = []
    for name in names:
        median = statistics.median(samples[name])
        ratio = median / plain_median
        added = len(stored[name][1]) - plain_bytes
        secure = name in SECURE_NAMES
        target = TARGET_RATIOS.get(count) if secure else None
        results.append(
            Result(
                serializer=name,
                label=LABELS[name],
                calls_per_batch=calls[name],
                samples_us=samples[name],
                median_us=median,
                min_us=min(samples[name]),
                ratio_to_plain=ratio,
                ratio_to_floor=median / floor_median,
                paired_ratio_to_floor=statistics.median(
                    mine / floor for mine, floor in zip(samples[name], samples[FLOOR], strict=True)
                ),
                stored_bytes=len(stored[name][1]),
                added_bytes=added,
                target_ratio=target,
                meets_ratio=None if target is None else ratio <= target,
                meets_added_bytes=added <= TARGET_ADDED_BYTES if secure else None,
            )
        )
    return StateResult(count, plain_bytes, settings.repetitions, results)


# --------------------------------------------------------------------------
# Report


def versions() -> dict[str, str]:
    found: dict[str, str] = {"python": platform.python_version()}
    for dist in (
        "langgraph-checkpoint",
        "langchain-core",
        "cryptography",
        "pycryptodome",
        "secure-serde",
    ):
        try:
            found[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            found[dist] = "not installed"
    return found


def _fmt_us(us: float) -> str:
    return f"{us:,.1f}" if us < 1000 else f"{us:,.0f}"


def _fmt_delta(us: float) -> str:
    return f"{us:+,.1f}" if abs(us) < 1000 else f"{us:+,.0f}"


def _verdict(ok: bool | None) -> str:
    if ok is None:
        return ""
    return "meets" if ok else "MISSES"


def render(states: Sequence[StateResult], mode: str, env_note: str) -> str:
    lines: list[str] = []
    ver = versions()
    lines.append(f"Date (UTC): {datetime.now(UTC).strftime('%Y-%m-%d %H:%M')}")
    lines.append("Versions: " + ", ".join(f"{k} {v}" for k, v in ver.items()))
    lines.append(
        f"Machine: {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs; "
        f"mode: {mode}; key: {env_note}"
    )
    lines.append("")
    lines.append("Serializers:")
    for name, label in LABELS.items():
        lines.append(f"- {SHORT[name]}: {label}")
    lines.append("")
    lines.append(
        "| messages | plain size | serializer | median µs/round trip | min µs | µs over plain "
        "| ratio to plain | target | added bytes | verdict |"
    )
    lines.append("|---:|---:|---|---:|---:|---:|---:|---:|---:|---|")
    for st in states:
        plain_median = next(r.median_us for r in st.results if r.serializer == PLAIN)
        for r in st.results:
            target = f"≤{r.target_ratio:.2f}x" if r.target_ratio is not None else ""
            verdicts = [
                v
                for v in (
                    f"ratio {_verdict(r.meets_ratio)}" if r.meets_ratio is not None else "",
                    f"bytes {_verdict(r.meets_added_bytes)}"
                    if r.meets_added_bytes is not None
                    else "",
                )
                if v
            ]
            lines.append(
                f"| {st.messages} | {st.plain_bytes:,} B | {SHORT[r.serializer]} "
                f"| {_fmt_us(r.median_us)} | {_fmt_us(r.min_us)} "
                f"| {_fmt_delta(r.median_us - plain_median)} | {r.ratio_to_plain:.3f}x "
                f"| {target} | {r.added_bytes:+d} | {', '.join(verdicts)} |"
            )
    lines.append("")
    lines.append("Ratio to plain (same-run medians):")
    lines.append("")
    others = [name for name in LABELS if name != PLAIN]
    header = ["messages", "plain size", *(SHORT[name] for name in others)]
    lines.append("| " + " | ".join(header) + " | target (secure_serde) |")
    lines.append("|" + "---:|" * (len(header) + 1))
    for st in states:
        cells = [str(st.messages), f"{st.plain_bytes:,} B"]
        ratios = {r.serializer: r.ratio_to_plain for r in st.results}
        cells += [f"{ratios[name]:.3f}x" for name in others]
        cells.append(f"≤{TARGET_RATIOS[st.messages]:.2f}x")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("secure_serde against the AES-GCM floor (same-run medians):")
    lines.append("")
    lines.append("| messages | plain size | secure_serde / floor | paired | target (issue 23) |")
    lines.append("|---:|---:|---:|---:|---:|")
    for st in states:
        secure = next(r for r in st.results if r.serializer == SECURE)
        floor_target = FLOOR_TARGETS.get(st.messages)
        shown = f"≤{floor_target:.2f}x" if floor_target is not None else ""
        lines.append(
            f"| {st.messages} | {st.plain_bytes:,} B | {secure.ratio_to_floor:.3f}x"
            f" | {secure.paired_ratio_to_floor:.3f}x | {shown} |"
        )
    lines.append("")
    lines.append(
        "'secure_serde / floor' divides the two medians; 'paired' is the median, over the"
        " repetitions, of each repetition's secure_serde batch divided by its floor batch"
        " (adjacent in time, so less disturbed by load on a shared machine)."
    )
    lines.append("")
    lines.append(
        f"Targets from the issue: ratio ≤1.15x (1 msg), ≤1.05x (20), ≤1.03x (200), "
        f"≤1.05x (2000); ≤{TARGET_ADDED_BYTES} added bytes per blob. They apply to "
        "the secure_serde rows."
    )
    lines.append(
        "Absolute times vary with the machine and its load (shared machine); only the "
        "same-run ratios are comparable."
    )
    return "\n".join(lines)


def to_json(states: Sequence[StateResult], settings: Settings, mode: str) -> dict[str, Any]:
    return {
        "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "versions": versions(),
        "machine": {
            "system": platform.system(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
        },
        "mode": mode,
        "settings": asdict(settings),
        "targets": {
            "ratio_by_messages": {str(k): v for k, v in TARGET_RATIOS.items()},
            "max_added_bytes": TARGET_ADDED_BYTES,
        },
        "states": [asdict(st) for st in states],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="short smoke run")
    parser.add_argument("--json", metavar="PATH", type=Path, help="also write results as JSON")
    parser.add_argument(
        "--messages",
        type=int,
        nargs="+",
        choices=MESSAGE_COUNTS,
        default=list(MESSAGE_COUNTS),
        help="states to run (default: all)",
    )
    args = parser.parse_args(argv)

    if os.environ.get(ENV_VAR):
        env_note = f"{ENV_VAR} from the environment"
    else:
        os.environ[ENV_VAR] = DEMO_KEY
        env_note = f"{ENV_VAR} unset, fixed 32-char demo key"

    settings = QUICK if args.quick else FULL
    mode = "quick" if args.quick else "full"

    def progress(msg: str) -> None:
        print(f"[bench] {msg}", file=sys.stderr, flush=True)

    serializers = build_serializers()
    states = [bench_state(n, serializers, settings, progress) for n in sorted(args.messages)]
    print(render(states, mode, env_note), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(to_json(states, settings, mode), indent=2) + "\n")
        progress(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
