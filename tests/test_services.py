"""Smoke tests proving the real-service fixtures (PostgreSQL cluster, moto KMS) work."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import psycopg
import pytest
from typing_extensions import TypedDict

from tests.fixtures_services import PostgresServer, pg_dump

_seen_databases: set[str] = set()


def test_postgres_select_version(postgres_url: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute("SELECT version()").fetchone()
    assert row is not None
    assert row[0].startswith("PostgreSQL")


def test_postgres_server_listens_on_loopback(postgres_server: PostgresServer) -> None:
    assert postgres_server.host == "127.0.0.1"
    assert (postgres_server.bindir / "pg_dump").is_file()
    with psycopg.connect(postgres_server.conninfo) as conn:
        row = conn.execute("SELECT current_setting('listen_addresses')").fetchone()
    assert row == ("127.0.0.1",)


@pytest.mark.parametrize("run", ["first", "second"])
def test_each_test_gets_a_fresh_database(postgres_url: str, run: str) -> None:
    with psycopg.connect(postgres_url) as conn:
        row = conn.execute("SELECT current_database()").fetchone()
        assert row is not None
        assert row[0] not in _seen_databases
        _seen_databases.add(row[0])
        leftover = conn.execute("SELECT to_regclass('public.marker')").fetchone()
        assert leftover == (None,)  # nothing left behind by the other run
        conn.execute("CREATE TABLE marker (run text)")
        conn.execute("INSERT INTO marker VALUES (%s)", (run,))


def test_pg_dump_contains_inserted_rows(postgres_server: PostgresServer, postgres_url: str) -> None:
    canary = "canary-7f3e9a2b-plaintext"
    with psycopg.connect(postgres_url) as conn:
        conn.execute("CREATE TABLE dump_probe (id int PRIMARY KEY, note text)")
        conn.execute("INSERT INTO dump_probe VALUES (1, %s)", (canary,))
    dump = pg_dump(postgres_server, postgres_url)
    assert b"CREATE TABLE public.dump_probe" in dump
    assert canary.encode() in dump


def test_kms_encrypt_decrypt_roundtrip(kms_client: Any, kms_endpoint: str) -> None:
    assert kms_endpoint.startswith("http://127.0.0.1:")
    key_id = kms_client.create_key(Description="fixture smoke test")["KeyMetadata"]["KeyId"]
    plaintext = b"secret data key material"
    blob = kms_client.encrypt(KeyId=key_id, Plaintext=plaintext)["CiphertextBlob"]
    assert plaintext not in blob
    decrypted = kms_client.decrypt(CiphertextBlob=blob)
    assert decrypted["Plaintext"] == plaintext
    assert decrypted["KeyId"].endswith(key_id)


class _State(TypedDict):
    items: Annotated[list[str], operator.add]


def test_stock_postgres_saver_persists_graph_state(postgres_url: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    from tests.graphs_support import linear_graph

    def step(state: _State) -> dict[str, list[str]]:
        return {"items": [f"step{len(state['items'])}"]}

    config: Any = {"configurable": {"thread_id": "thread-1"}}

    with PostgresSaver.from_conn_string(postgres_url) as saver:
        saver.setup()
        graph = linear_graph(_State, ("step", step), checkpointer=saver)
        first = graph.invoke({"items": ["a"]}, config)
        second = graph.invoke({"items": ["b"]}, config)
        assert first["items"] == ["a", "step1"]
        assert second["items"] == ["a", "step1", "b", "step3"]
        assert graph.get_state(config).values["items"] == second["items"]
        assert len(list(saver.list(config))) >= 4

    # The state is really in the server, readable through a brand-new connection.
    with PostgresSaver.from_conn_string(postgres_url) as saver:
        graph = linear_graph(_State, ("step", step), checkpointer=saver)
        assert graph.get_state(config).values["items"] == ["a", "step1", "b", "step3"]
