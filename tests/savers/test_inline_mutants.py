"""A blob row of type ``empty`` does not make a planted inline value look blob-loaded.

The stock loader skips blob rows whose *type* is ``empty`` and then takes the
channel's value from the checkpoint JSON. A guard that looked at the wrong
column of the blob row (a surviving mutant, docs/mutation.md) would count such
a channel as loaded from a blob and let the planted plaintext value through.
Real PostgreSQL, real graph, rows changed with SQL as an attacker would.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from secure_serde import EncryptedSerializer, PlaintextRefusedError
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.savers._v03_postgres import PostgresSaver
from tests import canary_support as canary

KEY = b"inline-mutant-key-0123456789abcd"


def _serde() -> EncryptedSerializer:
    return EncryptedSerializer(EnvKeyCipher(KEY))


@contextmanager
def _connect(url: str) -> Iterator[psycopg.Connection[Any]]:
    kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
    with psycopg.Connection.connect(url, **kwargs) as conn:
        yield conn


def test_an_empty_blob_beside_a_planted_inline_value_is_refused(postgres_url: str) -> None:
    with _connect(postgres_url) as conn:
        ours = PostgresSaver(conn, serde=_serde())
        ours.setup()
        canary.run_sync(canary.build_canary_graph(ours), "t")
        config = canary.canary_config("t")
        assert ours.get_tuple(config) is not None
        conn.execute(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint,"
            " '{channel_values,text}', '\"approved\"') WHERE thread_id = 't'"
        )
        planted = conn.execute(
            "UPDATE checkpoint_blobs SET type = 'empty', blob = ''::bytea"
            " WHERE thread_id = 't' AND channel = 'text'"
        )
        assert planted.rowcount > 0
        # The stock reader cannot read bound rows at all (issue 10); ours refuses the
        # planted value by name, before it even checks the record's seal.
        with pytest.raises(PlaintextRefusedError, match=r"\['text'\]"):
            ours.get_tuple(config)
