"""secure_serde on PostgreSQL, set up the way a production service would be.

Run it against any PostgreSQL you can create tables in:

    .venv/bin/pip install -e '.[postgres]' langgraph
    export LANGGRAPH_AES_KEY="$(.venv/bin/secure-serde keygen)"
    .venv/bin/python examples/postgres_production.py "postgresql://user@localhost:5432/app"

No server at hand? ``examples/local_postgres.py`` starts a throwaway one and runs the example:

    .venv/bin/python examples/local_postgres.py --run \
        .venv/bin/python examples/postgres_production.py

The DSN comes from the first argument or from ``SECURE_SERDE_PG_DSN``. The key comes from
``LANGGRAPH_AES_KEY``; when it is unset the script makes a throwaway key for this run only
(what it writes is then unreadable afterwards, which is fine for a demo).

What it shows, with a deterministic "support agent" graph and no LLM:

1. a connection pool, the sealed ``PostgresSaver`` and an ``EncryptedSerializer``;
2. a run that stops at ``interrupt()`` for a human decision and is resumed;
3. that the ``checkpoints`` table holds no state value in its JSON, and that the API key passed
   in ``config["configurable"]`` is sealed instead of stored in plaintext metadata.

For a managed database (RDS, Cloud SQL, Azure, ...), change what the ``MANAGED:`` comments say.
"""

from __future__ import annotations

import os
import sys
import uuid
from typing import Any, TypedDict

try:
    import psycopg
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.state import CompiledStateGraph
    from langgraph.types import Command, interrupt
    from psycopg import Connection
    from psycopg.conninfo import conninfo_to_dict
    from psycopg.rows import DictRow, dict_row
    from psycopg_pool import ConnectionPool
except ModuleNotFoundError as missing:  # pragma: no cover - a friendlier message
    sys.exit(
        f"This example needs langgraph and the postgres extra ({missing}).\n"
        "Install them with: .venv/bin/pip install -e '.[postgres]' langgraph"
    )

from secure_serde import EncryptedSerializer, generate_encoded_key
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.savers.postgres import PostgresSaver

DSN_ENV_VAR = "SECURE_SERDE_PG_DSN"
KEY_ENV_VAR = "LANGGRAPH_AES_KEY"

# Only these metadata keys stay queryable with list(filter=...); every other value copied from
# config (the API key below, say) is sealed. langgraph's own keys always stay plaintext.
PLAINTEXT_METADATA = ("user_id",)


class Ticket(TypedDict, total=False):
    customer_email: str
    complaint: str
    refund_cents: int
    decision: str
    reply: str


def triage(state: Ticket) -> dict[str, Any]:
    return {"refund_cents": 4999 if "broken" in state["complaint"] else 0}


def approve(state: Ticket) -> dict[str, Any]:
    # Pauses the run; the value is stored (encrypted) until a human answers.
    decision = interrupt({"refund_cents": state["refund_cents"], "to": state["customer_email"]})
    return {"decision": decision}


def answer(state: Ticket) -> dict[str, Any]:
    cents = state["refund_cents"] if state["decision"] == "approve" else 0
    return {"reply": f"Dear {state['customer_email']}: refund of {cents / 100:.2f} EUR."}


def build_graph(checkpointer: PostgresSaver) -> CompiledStateGraph[Ticket, None, Ticket, Ticket]:
    builder = StateGraph(Ticket)
    builder.add_node("triage", triage)
    builder.add_node("approve", approve)
    builder.add_node("answer", answer)
    builder.add_edge(START, "triage")
    builder.add_edge("triage", "approve")
    builder.add_edge("approve", "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=checkpointer)


def dsn_from_args() -> str:
    dsn = sys.argv[1] if len(sys.argv) > 1 else os.environ.get(DSN_ENV_VAR)
    if not dsn:
        sys.exit(f"usage: {sys.argv[0]} DSN   (or set {DSN_ENV_VAR})")
    # MANAGED: require TLS and check the server's name against its certificate, e.g.
    #   postgresql://app@db.example.internal:5432/app?sslmode=verify-full&sslrootcert=/etc/ssl/rds-ca.pem
    # and let the platform inject the password (IAM auth token, PGPASSFILE) rather than the DSN.
    return dsn


def require_server(dsn: str) -> None:
    """Fail in one line, within seconds, when no server answers (not after a pool timeout)."""
    try:
        with psycopg.connect(dsn, connect_timeout=5):
            return
    except psycopg.OperationalError as exc:
        reason = (str(exc).strip().splitlines() or ["no answer"])[-1]
    except psycopg.ProgrammingError:
        reason = "not a valid DSN"
    # Host and port only: the DSN may hold a password.
    parts = conninfo_to_dict(dsn) if reason != "not a valid DSN" else {}
    where = f"{parts.get('host', 'localhost')}:{parts.get('port', 5432)}"
    sys.exit(
        f"No PostgreSQL server answered at {where} ({reason}). For a throwaway local one:"
        " .venv/bin/python examples/local_postgres.py --run .venv/bin/python"
        " examples/postgres_production.py"
    )


def make_serde() -> EncryptedSerializer:
    # MANAGED: load the key from your secret manager (AWS Secrets Manager, Vault, GCP Secret
    # Manager) into LANGGRAPH_AES_KEY at start-up, or skip local keys altogether with
    # secure_serde.ciphers.KmsEnvelopeCipher(key_arn). To rotate, move to
    # KeyRotationCipher with a keyring file, then rewrap (see README).
    key = os.environ.get(KEY_ENV_VAR)
    if key is None:
        print(f"{KEY_ENV_VAR} is unset: using a throwaway key for this run only.")
        key = generate_encoded_key()
    return EncryptedSerializer(EnvKeyCipher(key))


def check_store(pool: ConnectionPool[Connection[DictRow]], thread_id: str, api_key: str) -> None:
    """Read the raw rows, as anyone with database access could, and say what they show."""
    with pool.connection() as conn:
        found = conn.execute(
            "SELECT checkpoint -> 'channel_values' AS inline, metadata::text AS metadata"
            " FROM checkpoints WHERE thread_id = %s",
            (thread_id,),
        ).fetchall()
        blobs = conn.execute(
            # Sealed cells (secure_serde/sealing/_cell.py) start with b"SSC1".
            "SELECT count(*) AS n,"
            " count(*) FILTER (WHERE substring(blob from 1 for 4) = 'SSC1'::bytea) AS encrypted"
            " FROM checkpoint_blobs WHERE thread_id = %s",
            (thread_id,),
        ).fetchone()
    inline = [row["inline"] for row in found if row["inline"]]
    leaked = [row for row in found if api_key in row["metadata"]]
    print(f"checkpoints: {len(found)}; with state values in their JSON: {len(inline)}")
    print(f"blobs: {blobs['n'] if blobs else 0}, encrypted: {blobs['encrypted'] if blobs else 0}")
    print(f"rows whose plaintext metadata holds the API key: {len(leaked)}")
    if inline or leaked or not blobs or blobs["n"] != blobs["encrypted"]:
        sys.exit("unexpected plaintext in the store")


def main() -> None:
    dsn = dsn_from_args()
    require_server(dsn)
    serde = make_serde()
    # MANAGED: size the pool for (workers x concurrent runs per worker), within the server's
    # max_connections minus headroom; put PgBouncer in transaction mode in front if you have
    # many workers (prepare_threshold=0, below, keeps that working). Set timeouts so a sick
    # database fails requests instead of hanging them.
    with ConnectionPool(
        dsn,
        connection_class=Connection[DictRow],
        min_size=1,
        max_size=4,
        timeout=10,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
    ) as pool:
        # MANAGED: run the migrations once per deploy, as a role allowed to create tables, and
        # give the service's own role only SELECT/INSERT/UPDATE/DELETE on the four tables.
        with pool.connection() as conn:
            PostgresSaver(conn, serde=serde).setup()  # the tables, and the store identity

        saver = PostgresSaver(pool, serde=serde, plaintext_metadata=PLAINTEXT_METADATA)
        graph = build_graph(saver)
        thread_id = f"ticket-{uuid.uuid4()}"
        api_key = f"sk-demo-{uuid.uuid4().hex}"
        config: RunnableConfig = {
            "configurable": {"thread_id": thread_id, "user_id": "u-42", "api_key": api_key}
        }

        paused = graph.invoke(
            {"customer_email": "ada@example.com", "complaint": "arrived broken"}, config
        )
        print("waiting for a human:", paused["__interrupt__"][0].value)
        done = graph.invoke(Command(resume="approve"), config)
        print("reply:", done["reply"])

        history = list(graph.get_state_history(config))
        print(f"history: {len(history)} checkpoints; metadata of the latest, decrypted:")
        # user_id and api_key are this app's keys, beyond langgraph's CheckpointMetadata type.
        metadata: dict[str, Any] = dict(history[0].metadata or {})
        print("  ", {k: metadata[k] for k in ("source", "step", "user_id", "api_key")})
        mine = list(saver.list(None, filter={"user_id": "u-42"}, limit=3))
        print(f"list(filter={{'user_id': 'u-42'}}, limit=3) -> {len(mine)} checkpoints")

        check_store(pool, thread_id, api_key)
        saver.delete_thread(thread_id)


if __name__ == "__main__":
    main()
