"""Compression before encryption: store size, round trip and graph step, side by side in one run.

Run from the repository root against a PostgreSQL server where you may create databases::

    .venv/bin/python benchmarks/bench_compress.py "postgresql://postgres@127.0.0.1:5432/postgres"
    .venv/bin/python benchmarks/bench_compress.py DSN --quick
    .venv/bin/python benchmarks/bench_compress.py --no-postgres   # round trips and threshold only

Four sections, all printed as Markdown:

1. **Store size.** A real chat graph (``add_messages``; each turn one HumanMessage in, one
   AIMessage out, both of about 400 characters), 100 turns on one thread, run once per stack,
   each stack in a fresh database. The size is ``pg_total_relation_size`` summed over every
   table (indexes and TOAST included) after ``VACUUM``. Three workloads: text from a
   130-word vocabulary (the most repetitive), passages of English prose (Python's own
   documentation, ``pydoc_data.topics``), and text from a 50,000-word vocabulary with Zipf
   frequencies, numbers and ids mixed in (the least repetitive).
2. **Round trip.** ``loads_typed(dumps_typed(messages))`` at about 12 KB and 120 KB (the
   states of benchmarks/bench_serde.py, 20 and 200 messages, plus the same sizes of the
   less repetitive text), plain JsonPlus against secure_serde with and without compression.
3. **Threshold.** For one value at each inner size, what zstd saves and what it costs
   against JsonPlus's own round trip of it: where ``DEFAULT_MIN_SIZE`` comes from.
4. **Graph step on PostgreSQL.** ``put`` of a checkpoint whose ``messages`` channel changed,
   then ``get_tuple`` of it, on a chain of checkpoints of a fresh thread: the stock saver with
   plain JsonPlus against the sealed saver (``secure_serde.savers.postgres``: `SealedSaver`
   around the stock one) with secure_serde, compressed or not.

Timings interleave the subjects in batches whose order rotates, and report medians of the
batch means and the ratio of medians measured in the same run. Serializer timings are CPU time
of this process (``time.process_time``), which a busy machine disturbs far less than wall-clock
time; the graph step is wall-clock time, since the server's work is part of it. Absolute times
depend on the machine; compare ratios only.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Annotated, Any

import psycopg
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver as StockPostgresSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import (
    EncryptedSerializer as LangGraphEncryptedSerializer,
)
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from psycopg import sql
from psycopg.rows import DictRow, dict_row
from typing_extensions import TypedDict

from secure_serde import CompressedSerializer, EncryptedSerializer
from secure_serde.savers.postgres import PostgresSaver as SealedPostgresSaver
from secure_serde.serde._compress import DEFAULT_MAX_SIZE, DEFAULT_MIN_SIZE, ZSTD, decompress

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serde import _VOCABULARY, make_state

KEY = b"bench-key-not-a-secret-012345678"
SEED = 20261201
MESSAGE_CHARS = 400

# --------------------------------------------------------------------------------------------
# Text


def small_vocabulary_text(rng: random.Random, chars: int) -> str:
    words = _VOCABULARY.split()
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < chars:
        out.append(rng.choice(words))
    return " ".join(out)[:chars]


_LETTERS = "etaoinshrdlcumwfgypbvkjxqz"
_LETTER_WEIGHTS = [12.7, 9.1, 8.2, 7.5, 7.0, 6.7, 6.3, 6.1, 6.0, 4.3, 4.0, 2.8, 2.8, 2.4,
                   2.4, 2.2, 2.0, 2.0, 1.9, 1.5, 1.0, 0.8, 0.2, 0.2, 0.1, 0.1]  # fmt: skip


def _lexicon(rng: random.Random, size: int) -> tuple[list[str], list[float]]:
    words = {
        "".join(rng.choices(_LETTERS, _LETTER_WEIGHTS, k=rng.randint(2, 11)))
        for _ in range(size * 2)
    }
    lexicon = sorted(words)[:size]
    rng.shuffle(lexicon)
    return lexicon, [1.0 / (rank + 1) for rank in range(len(lexicon))]


_LARGE_LEXICON = _lexicon(random.Random(SEED), 50_000)  # noqa: S311 - test data


def large_vocabulary_text(rng: random.Random, chars: int) -> str:
    """Zipf-distributed words of a 50,000-word lexicon, with numbers, ids and punctuation."""
    words, weights = _LARGE_LEXICON
    out: list[str] = []
    length = 0
    while length < chars:
        roll = rng.random()
        if roll < 0.04:
            word = str(rng.randint(0, 10 ** rng.randint(1, 7)))
        elif roll < 0.05:
            word = f"#{rng.getrandbits(40):010x}"
        else:
            word = rng.choices(words, weights)[0]
            if rng.random() < 0.08:
                word += rng.choice(".,;:?!")
        out.append(word)
        length += len(word) + 1
    return " ".join(out)[:chars]


def _prose() -> str:
    # Python's own documentation, shipped with every interpreter: real English
    # prose with code and punctuation, no larger than the repository needs.
    from pydoc_data.topics import topics

    return " ".join(" ".join(text.split()) for _, text in sorted(topics.items()))


_PROSE = _prose()


def prose_text(rng: random.Random, chars: int) -> str:
    """A passage of English prose starting at a random place."""
    start = rng.randrange(len(_PROSE) - chars)
    return _PROSE[start : start + chars]


WORKLOADS: dict[str, Callable[[random.Random, int], str]] = {
    "small vocabulary": small_vocabulary_text,
    "English prose": prose_text,
    "large vocabulary": large_vocabulary_text,
}


def chat_messages(text: Callable[[random.Random, int], str], count: int) -> list[Any]:
    rng = random.Random(SEED)  # noqa: S311 - reproducible test data, not crypto
    out: list[Any] = []
    for i in range(count):
        cls = HumanMessage if i % 2 == 0 else AIMessage
        out.append(
            cls(content=text(rng, MESSAGE_CHARS), id=str(uuid.UUID(int=rng.getrandbits(128))))
        )
    return out


# --------------------------------------------------------------------------------------------
# Serializers and stacks


def plain() -> JsonPlusSerializer:
    return JsonPlusSerializer()


def langgraph_encrypted() -> Any:
    return LangGraphEncryptedSerializer.from_pycryptodome_aes(JsonPlusSerializer(), key=KEY)


def secure() -> EncryptedSerializer:
    return EncryptedSerializer.from_pycryptodome_aes(key=KEY)


def secure_compressed() -> EncryptedSerializer:
    return EncryptedSerializer.from_pycryptodome_aes(key=KEY, compress=True)


STACKS: dict[str, Callable[[psycopg.Connection[Any]], Any]] = {
    "stock PostgresSaver + plain JsonPlus": lambda c: StockPostgresSaver(c, serde=plain()),
    "stock PostgresSaver + langgraph's encryption": lambda c: StockPostgresSaver(
        c, serde=langgraph_encrypted()
    ),
    "sealed PostgresSaver + secure_serde": lambda c: SealedPostgresSaver(c, serde=secure()),
    "sealed PostgresSaver + secure_serde, compress=True": lambda c: SealedPostgresSaver(
        c, serde=secure_compressed()
    ),
    "stock PostgresSaver + CompressedSerializer (no encryption)": lambda c: StockPostgresSaver(
        c, serde=CompressedSerializer()
    ),
}
BASE_STACK = "stock PostgresSaver + plain JsonPlus"

# --------------------------------------------------------------------------------------------
# 1. Store size


class ChatState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def build_chat_graph(checkpointer: Any, replies: Sequence[str]) -> Any:
    def reply(state: ChatState) -> dict[str, Any]:
        turn = sum(1 for m in state["messages"] if isinstance(m, HumanMessage))
        return {"messages": [AIMessage(content=replies[turn - 1])]}

    builder = StateGraph(ChatState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=checkpointer)


def fresh_database(admin_dsn: str) -> tuple[str, str]:
    """Create a uniquely named database; return (its name, a DSN for it)."""
    name = f"bench_compress_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    info = psycopg.conninfo.conninfo_to_dict(admin_dsn)
    info["dbname"] = name
    return name, psycopg.conninfo.make_conninfo("", **info)


def drop_database(admin_dsn: str, name: str) -> None:
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def store_size(
    admin_dsn: str, stack: str, text: Callable[[random.Random, int], str], turns: int
) -> int:
    rng = random.Random(SEED)  # noqa: S311 - reproducible test data, not crypto
    questions = [text(rng, MESSAGE_CHARS) for _ in range(turns)]
    replies = [text(rng, MESSAGE_CHARS) for _ in range(turns)]
    name, dsn = fresh_database(admin_dsn)
    try:
        with psycopg.connect(
            dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as conn:
            saver = STACKS[stack](conn)
            saver.setup()
            graph = build_chat_graph(saver, replies)
            config = {"configurable": {"thread_id": "bench"}}
            for question in questions:
                graph.invoke({"messages": [HumanMessage(content=question)]}, config)
            messages = graph.get_state(config).values["messages"]
            if len(messages) != 2 * turns or messages[-1].content != replies[-1]:
                raise RuntimeError(f"{stack}: the conversation did not round-trip")
            conn.execute("VACUUM")
            row = conn.execute(
                "SELECT sum(pg_total_relation_size(c.oid)) AS n FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE c.relkind = 'r' AND n.nspname = 'public'"
            ).fetchone()
            return int(row["n"]) if row else 0
    finally:
        drop_database(admin_dsn, name)


def section_storage(admin_dsn: str, turns: int) -> None:
    print(f"## 1. Store size: chat graph, {turns} turns, one thread, after VACUUM\n")
    header = "| stack | " + " | ".join(f"{w} | ratio" for w in WORKLOADS) + " |"
    print(header)
    print("|---|" + "---:|---:|" * len(WORKLOADS))
    sizes = {
        (stack, workload): store_size(admin_dsn, stack, text, turns)
        for workload, text in WORKLOADS.items()
        for stack in STACKS
    }
    for stack in STACKS:
        cells = []
        for workload in WORKLOADS:
            size, base = sizes[(stack, workload)], sizes[(BASE_STACK, workload)]
            cells.append(f"{size / 1024:,.0f} KiB | {size / base:.2f}x")
        print(f"| {stack} | " + " | ".join(cells) + " |")
    print(f"\nRatios are to '{BASE_STACK}' on the same workload, in this run.\n")


# --------------------------------------------------------------------------------------------
# Timing helpers


@dataclass
class Subject:
    name: str
    run: Callable[[], Any]
    batch: int = 1
    means: list[float] = field(default_factory=list)


def round_trip(serde: SerializerProtocol, value: Any) -> Any:
    return serde.loads_typed(serde.dumps_typed(value))


def zstd_alone(alone: CompressedSerializer, inner: bytes, packed: bytes) -> None:
    alone.compress_encoded("msgpack", inner)
    decompress(ZSTD, packed, DEFAULT_MAX_SIZE)


def calibrate(subjects: list[Subject], target_s: float) -> None:
    for subject in subjects:
        subject.run()
        start = time.perf_counter()
        subject.run()
        once = max(time.perf_counter() - start, 1e-7)
        subject.batch = max(1, int(target_s / once))


def interleave(
    subjects: list[Subject], reps: int, clock: Callable[[], float] = time.process_time
) -> None:
    for rep in range(reps):
        order = subjects[rep % len(subjects) :] + subjects[: rep % len(subjects)]
        for subject in order:
            gc.collect()
            gc.disable()
            start = clock()
            for _ in range(subject.batch):
                subject.run()
            elapsed = clock() - start
            gc.enable()
            subject.means.append(elapsed / subject.batch * 1e6)


def median(subject: Subject) -> float:
    return statistics.median(subject.means)


# --------------------------------------------------------------------------------------------
# 2. Round trip


def section_round_trip(reps: int, target_s: float) -> None:
    print("## 2. Round trip, loads_typed(dumps_typed(messages))\n")
    print(
        "| state | JsonPlus bytes | stored bytes, compressed | plain JsonPlus µs"
        " | secure_serde | secure_serde, compress=True | compressed / uncompressed"
        " | zstd alone, µs |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    states = {
        "bench_serde, 20 messages": make_state(20)["messages"],
        "bench_serde, 200 messages": make_state(200)["messages"],
        "English prose, 22 messages": chat_messages(prose_text, 22),
        "English prose, 220 messages": chat_messages(prose_text, 220),
        "large vocabulary, 22 messages": chat_messages(large_vocabulary_text, 22),
        "large vocabulary, 220 messages": chat_messages(large_vocabulary_text, 220),
    }
    for label, value in states.items():
        serdes: dict[str, SerializerProtocol] = {
            "plain": plain(),
            "secure": secure(),
            "compressed": secure_compressed(),
        }
        for serde in serdes.values():
            if serde.loads_typed(serde.dumps_typed(value)) != value:
                raise RuntimeError(f"{label}: a serializer did not round-trip")
        inner = serdes["plain"].dumps_typed(value)[1]
        stored = serdes["compressed"].dumps_typed(value)
        alone = CompressedSerializer()
        packed = alone.compress_encoded("msgpack", inner)
        subjects = [
            Subject(name, partial(round_trip, serde, value)) for name, serde in serdes.items()
        ]
        # What zstd costs by itself on the same bytes: compress, then bounded decompress.
        subjects.append(Subject("zstd alone", partial(zstd_alone, alone, inner, packed[1])))
        calibrate(subjects, target_s)
        interleave(subjects, reps)
        base = median(subjects[0])
        print(
            f"| {label} | {len(inner):,} | {len(stored[1]):,} ({stored[0]}) | {base:,.0f}"
            f" | {median(subjects[1]) / base:.3f}x | {median(subjects[2]) / base:.3f}x"
            f" | {median(subjects[2]) / median(subjects[1]):.3f}x"
            f" | {median(subjects[3]):,.0f} |"
        )
    print(
        "\nRatios are medians against plain JsonPlus in the same run; 'compressed /"
        " uncompressed' is secure_serde with compress=True against secure_serde without"
        " (issue 23's goal: at most 1.10x at 12 KB on varied text).\n"
    )


# --------------------------------------------------------------------------------------------
# 3. Threshold


def section_threshold(reps: int, target_s: float) -> None:
    print("## 3. The threshold: one value of each inner size\n")
    print(
        "| JsonPlus bytes | zstd bytes | saved | JsonPlus round trip µs"
        " | + zstd µs (compress and decompress) | added |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    rng = random.Random(SEED)  # noqa: S311 - reproducible test data, not crypto
    json_plus = plain()
    compressed = CompressedSerializer(json_plus, min_size=0)
    for chars in (32, 96, 224, 480, 992, 2016, 4064):
        value = HumanMessage(content=prose_text(rng, chars), id="m-1")
        inner = json_plus.dumps_typed(value)[1]
        packed = compressed.dumps_typed(value)
        subjects = [
            Subject("plain", partial(round_trip, json_plus, value)),
            Subject("zstd", partial(round_trip, compressed, value)),
        ]
        calibrate(subjects, target_s)
        interleave(subjects, reps)
        base, with_zstd = median(subjects[0]), median(subjects[1])
        saved = len(inner) - len(packed[1])
        print(
            f"| {len(inner):,} | {len(packed[1]):,} | {saved} ({saved / len(inner):.0%})"
            f" | {base:.1f} | {with_zstd - base:.1f} | {with_zstd / base - 1:.0%} |"
        )
    print(f"\nsecure_serde compresses values of {DEFAULT_MIN_SIZE} inner bytes and more.\n")


# --------------------------------------------------------------------------------------------
# 4. Graph step on PostgreSQL


def step_batch(saver: Any, messages: list[Any], chain: int) -> None:
    """``chain`` put + get_tuple pairs on a fresh thread; the messages channel changes each time."""
    config: dict[str, Any] = {"configurable": {"thread_id": uuid.uuid4().hex, "checkpoint_ns": ""}}
    versions: dict[str, Any] = {}
    for step in range(chain):
        values = {"messages": messages[: len(messages) - chain + step + 1], "turn": step}
        changed = ("messages", "turn")
        new_versions = {k: saver.get_next_version(versions.get(k), None) for k in changed}
        versions.update(new_versions)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = values
        checkpoint["channel_versions"] = dict(versions)
        metadata: Any = {"source": "loop", "step": step, "parents": {}}
        config = saver.put(config, checkpoint, metadata, new_versions)
        if saver.get_tuple(config) is None:
            raise RuntimeError("checkpoint not found")


def section_graph_step(admin_dsn: str, reps: int, chain: int) -> None:
    print("## 4. Graph step on PostgreSQL: put + get_tuple\n")
    stacks: dict[str, Callable[[psycopg.Connection[DictRow]], BaseCheckpointSaver[Any]]] = {
        "stock + plain JsonPlus": lambda c: StockPostgresSaver(c, serde=plain()),
        "sealed + secure_serde": lambda c: SealedPostgresSaver(c, serde=secure()),
        "sealed + secure_serde, compress=True": lambda c: SealedPostgresSaver(
            c, serde=secure_compressed()
        ),
    }
    print("| messages | " + " | ".join(stacks) + " |")
    print("|---|" + "---:|" * len(stacks))
    name, dsn = fresh_database(admin_dsn)
    try:
        with psycopg.connect(
            dsn, autocommit=True, prepare_threshold=0, row_factory=dict_row
        ) as conn:
            StockPostgresSaver(conn).setup()
            savers = {label: make(conn) for label, make in stacks.items()}
            # The sealed savers' store identity, before the stock saver writes a checkpoint:
            # a sealed saver refuses to start one in a store that already holds checkpoints.
            for saver in savers.values():
                if isinstance(saver, SealedPostgresSaver):
                    saver.setup()
            for count in (20, 200):
                messages = make_state(count + chain)["messages"]
                subjects = [
                    Subject(label, partial(step_batch, saver, messages, chain))
                    for label, saver in savers.items()
                ]
                for subject in subjects:
                    subject.run()
                interleave(subjects, reps, time.perf_counter)  # the server's time counts too
                base = median(subjects[0]) / chain
                cells = [f"{base:,.0f} µs"] + [
                    f"{median(s) / chain / base:.3f}x" for s in subjects[1:]
                ]
                print(f"| {count} | " + " | ".join(cells) + " |")
    finally:
        drop_database(admin_dsn, name)
    print(
        "\nOne put of a checkpoint whose messages changed plus one get_tuple of it; the first"
        " column is the stock saver's time per step, the others its ratio, in this run.\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("dsn", nargs="?", help="an admin DSN: databases are created and dropped")
    parser.add_argument("--quick", action="store_true", help="a smoke run: few repetitions")
    parser.add_argument("--no-postgres", action="store_true", help="skip sections 1 and 4")
    parser.add_argument("--turns", type=int, default=100)
    args = parser.parse_args()
    if not args.no_postgres and not args.dsn:
        parser.error("a DSN is needed unless --no-postgres")
    reps, target_s, chain = (5, 0.005, 3) if args.quick else (31, 0.05, 10)
    if not args.no_postgres:
        section_storage(args.dsn, 10 if args.quick else args.turns)
    section_round_trip(reps, target_s)
    section_threshold(reps, target_s)
    if not args.no_postgres:
        section_graph_step(args.dsn, reps, chain)


if __name__ == "__main__":
    main()
