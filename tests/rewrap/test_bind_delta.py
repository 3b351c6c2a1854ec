"""Binding a stock store of a ``DeltaChannel`` graph: history, replay, forks, ``update_state``.

The stock PostgreSQL saver leaves a ``true`` marker in the checkpoint JSON beside each delta
snapshot blob; the binding pass keeps it, as the sealed saver's ``put`` does, and moves the real
inline values. Afterwards the sealed savers rebuild every past state and every delta history the
stock saver served, with no migration switch.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver as StockPostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver as StockSqliteSaver
from psycopg.rows import dict_row

from secure_serde.savers import bind_postgres, bind_sqlite
from secure_serde.savers._v03_postgres import PostgresSaver
from secure_serde.savers._v03_sqlite import SqliteSaver
from tests import strategies as cs
from tests.test_delta_channel import build, describe, encrypted_serde, run_scenario


def test_a_stock_delta_channel_store_on_sqlite_binds(tmp_path: Path) -> None:
    with closing(sqlite3.connect(tmp_path / "delta.sqlite", check_same_thread=False)) as conn:
        stock = StockSqliteSaver(conn, serde=encrypted_serde(False))
        reference = run_scenario(build(stock, with_frame=False), stock, "t")
        sealed = SqliteSaver(conn, serde=encrypted_serde(False), seal_metadata=False)
        report = bind_sqlite(sealed)
        assert report.ok, report.refusals
        assert report.checkpoints_sealed == len(reference["history"])
        cs.assert_same(describe(build(sealed, with_frame=False), sealed, "t"), reference)


def test_a_stock_delta_channel_store_on_postgres_binds(postgres_url: str) -> None:
    with psycopg.Connection.connect(
        postgres_url, autocommit=True, prepare_threshold=0, row_factory=dict_row
    ) as conn:
        stock = StockPostgresSaver(conn, serde=encrypted_serde(False))
        stock.setup()
        reference = run_scenario(build(stock, with_frame=False), stock, "t")
        markers = _markers(conn)
        assert markers, "the stock saver left snapshot markers inline"

        sealed = PostgresSaver(conn, serde=encrypted_serde(False), seal_metadata=False)
        report = bind_postgres(sealed)
        assert report.ok, report.refusals
        assert report.inline_values_moved > 0
        # Every marker is still there, as the sealed saver's put writes it; nothing else is.
        assert _markers(conn) == markers
        values = conn.execute("SELECT checkpoint -> 'channel_values' AS v FROM checkpoints")
        assert all(set(row["v"].values()) <= {True} for row in values.fetchall())
        cs.assert_same(describe(build(sealed, with_frame=False), sealed, "t"), reference)
        assert bind_postgres(sealed).changed == 0


def _markers(conn: Any) -> list[tuple[str, str]]:
    rows = conn.execute(
        "SELECT checkpoint_id, key FROM checkpoints, jsonb_each(checkpoint -> 'channel_values')"
        " WHERE value = 'true'::jsonb AND key = 'log' ORDER BY 1, 2"
    ).fetchall()
    return [(row["checkpoint_id"], row["key"]) for row in rows]
