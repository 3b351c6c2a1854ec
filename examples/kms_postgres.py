"""LangGraph checkpoints under AWS KMS envelope encryption, run locally against moto.

Run it from the repository root:

    .venv/bin/pip install -e '.[kms,postgres,sqlite]' langgraph 'moto[server]'
    .venv/bin/python examples/kms_postgres.py --dsn "postgresql://user@localhost:5432/app"
    .venv/bin/python examples/kms_postgres.py          # no DSN: SQLite in a temporary folder

The DSN comes from ``--dsn`` or from ``SECURE_SERDE_PG_DSN``. With neither, the example says
so and uses a SQLite file instead; everything KMS-related is the same on both.

KMS is served by moto, started here in a thread on 127.0.0.1 and reached over HTTP with dummy
credentials; no AWS account is needed. Lines marked ``REAL AWS:`` say what to change for a
real deployment. What it shows, with a deterministic chat graph and no LLM:

1. ``warm()`` at start-up: one ``GenerateDataKey`` (plus one ``DescribeKey`` for the alias),
   after which many checkpoint writes and reads make no KMS call at all;
2. a restarted process reads the history with one ``Decrypt`` per data key;
3. the stored rows are tagged ``+kms`` and hold no plaintext.
"""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

try:
    import boto3
    from botocore.config import Config
    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.graph.state import CompiledStateGraph
    from moto.server import ThreadedMotoServer
except ModuleNotFoundError as missing:  # pragma: no cover - a friendlier message
    sys.exit(
        f"This example needs boto3, langgraph and moto's server ({missing}).\n"
        "Install them with: .venv/bin/pip install -e '.[kms,postgres,sqlite]' langgraph"
        " 'moto[server]'"
    )

from secure_serde import EncryptedSerializer
from secure_serde.ciphers import KmsEnvelopeCipher

DSN_ENV_VAR = "SECURE_SERDE_PG_DSN"
ALIAS = "alias/langgraph-checkpoints"
CODEWORD = "PURPLE-ORCHID-4471"  # appears only inside the conversation
TURNS = 20


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def reply(state: Chat) -> dict[str, Any]:
    return {"messages": [AIMessage(content=f"noted: {state['messages'][-1].content}")]}


def build_graph(
    checkpointer: BaseCheckpointSaver[Any],
) -> CompiledStateGraph[Chat, None, Chat, Chat]:
    builder = StateGraph(Chat)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=checkpointer)


@contextmanager
def local_kms() -> Iterator[str]:
    """A moto KMS on a free loopback port, with one CMK behind ``ALIAS``; yields its URL."""
    # REAL AWS: none of this. The CMK exists already (created by your infrastructure code,
    # with a key policy granting the service's role what SECURITY.md lists).
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # moto's per-request log lines
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        admin = make_client(endpoint)
        key = admin.create_key(Description="secure_serde example CMK")["KeyMetadata"]
        admin.create_alias(AliasName=ALIAS, TargetKeyId=key["KeyId"])
        yield endpoint
    finally:
        server.stop()


def make_client(endpoint: str) -> Any:
    # REAL AWS: boto3.client("kms", config=...) with no endpoint_url and no keys: region and
    # credentials come from the environment (an IAM role on EC2/ECS/EKS, or AWS_PROFILE).
    # Keep explicit, short timeouts and a bounded number of attempts: after them the cipher
    # raises KmsEncryptionError / KmsDecryptionError naming the operation and the key ARN.
    return boto3.client(
        "kms",
        region_name="us-east-1",
        endpoint_url=endpoint,
        # moto accepts any credentials; these are placeholders, not secrets.
        aws_access_key_id="example",
        aws_secret_access_key="example",  # noqa: S106
        config=Config(
            retries={"mode": "standard", "total_max_attempts": 3},
            connect_timeout=2,
            read_timeout=5,
        ),
    )


def make_cipher(client: Any, **kwargs: Any) -> KmsEnvelopeCipher:
    # REAL AWS: pass the key ARN rather than the alias: an ARN needs no DescribeKey, and the
    # blobs name the key, not an alias that may later point elsewhere. During a change of KMS key,
    # the new ARN is kms_key and the old one goes in decrypt_kms_keys=[...] until rewrap is done.
    return KmsEnvelopeCipher(
        ALIAS,
        client=client,
        # Bound into every value and required by KMS to unwrap a data key; an IAM condition
        # on kms:EncryptionContext:app can confine the role to this application.
        encryption_context={"app": "kms-example"},
        **kwargs,
    )


def count_kms_calls(client: Any) -> Counter[str]:
    calls: Counter[str] = Counter()

    def on_call(event_name: str, **_: Any) -> None:
        calls[event_name.rsplit(".", 1)[-1]] += 1

    client.meta.events.register("before-call.kms.*", on_call)
    return calls


@contextmanager
def open_saver(
    dsn: str | None, serde: EncryptedSerializer, folder: Path
) -> Iterator[BaseCheckpointSaver[Any]]:
    if dsn is None:
        with closing(sqlite3.connect(folder / "kms-example.sqlite", check_same_thread=False)) as c:
            yield SqliteSaver(c, serde=serde)
        return
    from secure_serde.savers.postgres import PostgresSaver

    # secure_serde's PostgresSaver sends every channel value, primitives included, through the
    # serde; the stock saver would keep str/int/float/bool values as plaintext JSON.
    with PostgresSaver.from_conn_string(dsn, serde=serde) as saver:
        saver.setup()
        yield saver


def raw_rows(dsn: str | None, folder: Path, thread_id: str) -> list[tuple[str, bytes]]:
    """Type tags and bytes as stored, read the way anyone with database access could."""
    if dsn is None:
        with closing(sqlite3.connect(folder / "kms-example.sqlite")) as conn:
            rows = conn.execute(
                "SELECT type, checkpoint FROM checkpoints WHERE thread_id = ?"
                " UNION ALL SELECT type, value FROM writes WHERE thread_id = ?",
                (thread_id, thread_id),
            ).fetchall()
        return [(t, bytes(b)) for t, b in rows]
    import psycopg

    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT type, blob FROM checkpoint_blobs WHERE thread_id = %s AND blob IS NOT NULL"
            " UNION ALL SELECT type, blob FROM checkpoint_writes WHERE thread_id = %s",
            (thread_id, thread_id),
        ).fetchall()
    return [(t, bytes(b)) for t, b in rows]


def stored_cipher(type_tag: str, blob: bytes) -> str:
    """The cipher a stored value names: in its type tag, or inside a sealed cell.

    On PostgreSQL the sealed saver stores each value as a cell (its layout is in
    secure_serde/sealing/_cell.py): b"SSC1", a kind byte, the length of the serializer's
    type tag (2 bytes) and that tag, which ends with the cipher's name.
    """
    if type_tag == "bytes" and blob[:4] == b"SSC1" and len(blob) >= 7:
        size = int.from_bytes(blob[5:7], "big")
        if len(blob) >= 7 + size:
            return blob[7 : 7 + size].decode("ascii", "replace").rsplit("+", 1)[-1]
    return type_tag.rsplit("+", 1)[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="KMS envelope encryption for checkpoints")
    parser.add_argument("--dsn", default=os.environ.get(DSN_ENV_VAR), help="PostgreSQL URL")
    args = parser.parse_args(argv)
    dsn: str | None = args.dsn or None
    if dsn is None:
        print(f"No --dsn and no {DSN_ENV_VAR}: using SQLite in a temporary folder instead.")
    else:
        print("Using PostgreSQL from --dsn / " + DSN_ENV_VAR)

    thread_id = f"kms-example-{os.getpid()}-{time.time_ns()}"
    config: RunnableConfig = {"configurable": {"thread_id": thread_id}}
    with local_kms() as endpoint, tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        client = make_client(endpoint)
        calls = count_kms_calls(client)
        cipher = make_cipher(client)

        # Warm at start-up, before serving: async savers run the serializer on the event loop
        # (use `await cipher.awarm()` there), and the first write would otherwise pay these
        # calls. REAL AWS: a few ms in-region; also call awarm(refresh_before=150) every couple
        # of minutes to renew the data key off the request path.
        started = time.perf_counter()
        cipher.warm()
        print(
            f"warm(): {dict(calls)} in {(time.perf_counter() - started) * 1e3:.1f} ms;"
            f" key ARN {cipher.key_arn}"
        )
        calls.clear()

        with open_saver(dsn, EncryptedSerializer(cipher), folder) as saver:
            graph = build_graph(saver)
            for turn in range(TURNS):
                graph.invoke({"messages": [HumanMessage(content=f"{CODEWORD} #{turn}")]}, config)
            history = list(graph.get_state_history(config))
            print(
                f"{TURNS} turns, {len(history)} checkpoints written and read back;"
                f" KMS calls meanwhile: {dict(calls) or 'none'}"
            )

        # A restarted process: a new cipher unwraps the one data key once, then reads from cache.
        calls.clear()
        restarted = make_cipher(client)
        with open_saver(dsn, EncryptedSerializer(restarted), folder) as saver:
            graph = build_graph(saver)
            history = list(graph.get_state_history(config))
            last = history[0].values["messages"]
        print(
            f"after a restart: {len(history)} checkpoints read, {len(last)} messages in the"
            f" latest; KMS calls: {dict(calls)}"
        )

        rows = raw_rows(dsn, folder, thread_id)
        tags = Counter(stored_cipher(tag, blob) for tag, blob in rows)
        leaked = sum(CODEWORD.encode() in blob for _, blob in rows)
        print(f"stored values by cipher: {dict(tags)}; values with the codeword in clear: {leaked}")
        if leaked or set(tags) != {"kms"}:
            print("unexpected plaintext in the store", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
