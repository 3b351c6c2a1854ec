"""audit reports which metadata keys are plaintext, how many checkpoints are sealed, and which
sealed keys carry a blind index (issue 11). Real PostgreSQL, the real CLI, and the threads 0.3's
sealed PostgreSQL saver wrote (tests/vectors/v03/): ``canary`` under its default policy (every
non-structural key sealed, ``api_key``, ``tenant`` and ``run_id`` copied from the config) and
``indexed-1`` with ``tenant`` blind-indexed."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from secure_serde.stores import SEALED_METADATA_KEY
from tests import canary_support as canary
from tests import v03_fixtures as v03
from tests.cli.test_audit import audit, audit_json, keys

__all__ = ["keys"]  # the fixture, re-exported for pytest


def test_audit_reports_sealed_and_indexed_metadata(
    keys: Any, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    v03.load_postgres(postgres_url, ["canary", "indexed-1"])
    with psycopg.connect(postgres_url) as conn:
        rows = conn.execute("SELECT thread_id FROM checkpoints").fetchall()
    checkpoints = len(rows)
    indexed = sum(1 for (thread,) in rows if thread == "indexed-1")
    code, document = audit_json(capsys, postgres_url)
    meta = document["metadata"]
    assert meta["checkpoints"] == checkpoints
    assert checkpoints > 5
    assert 0 < indexed < checkpoints
    assert meta["sealed"] == checkpoints
    assert meta["indexed"] == {"tenant": indexed}
    # Nothing copied from the config is left in plaintext, so nothing is flagged.
    assert not {"api_key", "tenant", "run_id"} & set(meta["keys"])
    assert meta["flagged"] == {}
    assert code == 0
    _, out, _ = audit(capsys, postgres_url)
    assert f"sealed metadata: {checkpoints:,} of {checkpoints:,} checkpoints" in out
    # With keys, audit opens the sealed entries and names the keys inside (never a value).
    sealed_keys = meta["sealed_keys"]
    assert sealed_keys["api_key"] == checkpoints
    assert sealed_keys["tenant"] == checkpoints
    assert not set(sealed_keys) & {"source", "step", "parents", "__secure_serde_row__"}
    assert f"tenant: sealed in {checkpoints:,}, blind-indexed in {indexed:,} checkpoint(s)" in out
    assert canary.API_KEY not in out
    # Without them, only the blind-indexed names are known: the rest stay encrypted.
    _, blind = audit_json(capsys, postgres_url, "--no-decrypt")
    assert blind["metadata"]["sealed_keys"] is None
    assert blind["metadata"]["indexed"] == {"tenant": indexed}
    _, out, _ = audit(capsys, postgres_url, "--no-decrypt")
    assert "(its key names are encrypted)" in out
    assert f"tenant: blind-indexed in {indexed:,} checkpoint(s)" in out


def test_audit_names_no_key_from_a_moved_sealed_entry(
    keys: Any, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A writer to the database copies one checkpoint's sealed entry over another's.

    The entry is bound to its checkpoint: audit refuses it there (exit 1) and counts no key
    name from it, so its names are counted once, for the checkpoint that really holds it.
    """
    v03.load_postgres(postgres_url, ["canary"])
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        ids = [
            r[0]
            for r in conn.execute("SELECT checkpoint_id FROM checkpoints ORDER BY checkpoint_id")
        ]
        conn.execute(
            "UPDATE checkpoints SET metadata = jsonb_set(metadata, %s,"
            " (SELECT metadata -> %s FROM checkpoints WHERE checkpoint_id = %s))"
            " WHERE checkpoint_id = %s",
            ([SEALED_METADATA_KEY], SEALED_METADATA_KEY, ids[0], ids[-1]),
        )
    code, document = audit_json(capsys, postgres_url)
    checkpoints = document["metadata"]["checkpoints"]
    assert code == 1
    assert document["metadata"]["sealed_keys"]["api_key"] == checkpoints - 1
    assert document["binding"]["metadata_envelopes"]["bound"] == checkpoints - 1
