"""audit reports which metadata keys are plaintext, how many checkpoints are sealed, and which
sealed keys carry a blind index (issue 11). Real PostgreSQL, a real graph, the real CLI."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from secure_serde.stores import SEALED_METADATA_KEY
from tests import canary_support as canary
from tests.cli.test_audit import audit, audit_json, keys, run_canary_postgres

__all__ = ["keys"]  # the fixture, re-exported for pytest


def test_audit_reports_sealed_and_indexed_metadata(
    keys: Any, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run_canary_postgres(
        postgres_url,
        "sealed",
        sealed=True,
        plaintext_metadata=["tenant"],
        indexed_metadata=["api_key"],
    )
    code, document = audit_json(capsys, postgres_url)
    meta = document["metadata"]
    checkpoints = meta["checkpoints"]
    assert checkpoints > 5
    assert meta["sealed"] == checkpoints
    assert meta["indexed"] == {"api_key": checkpoints}
    # The key left plaintext on purpose is listed and flagged (it was copied from config).
    assert meta["keys"]["tenant"] == checkpoints
    assert set(meta["flagged"]) == {"tenant"}
    assert "api_key" not in meta["keys"]
    assert code == 1
    _, out, _ = audit(capsys, postgres_url)
    assert f"sealed metadata: {checkpoints:,} of {checkpoints:,} checkpoints" in out
    # With keys, audit opens the sealed entries and names the keys inside (never a value).
    sealed_keys = meta["sealed_keys"]
    assert sealed_keys["api_key"] == checkpoints
    # Everything not structural and not left plaintext (langgraph adds run_id, for one).
    assert "tenant" not in sealed_keys
    assert not set(sealed_keys) & {"source", "step", "parents", "__secure_serde_row__"}
    assert (
        f"api_key: sealed in {checkpoints:,}, blind-indexed in {checkpoints:,} checkpoint(s)"
        in (out)
    )
    assert canary.API_KEY not in out
    # Without them, only the blind-indexed names are known: the rest stay encrypted.
    _, blind = audit_json(capsys, postgres_url, "--no-decrypt")
    assert blind["metadata"]["sealed_keys"] is None
    assert blind["metadata"]["indexed"] == {"api_key": checkpoints}
    _, out, _ = audit(capsys, postgres_url, "--no-decrypt")
    assert "(its key names are encrypted)" in out
    assert f"api_key: blind-indexed in {checkpoints:,} checkpoint(s)" in out


def test_audit_names_no_key_from_a_moved_sealed_entry(
    keys: Any, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A writer to the database copies one checkpoint's sealed entry over another's.

    The entry is bound to its checkpoint: audit refuses it there (exit 1) and counts no key
    name from it, so its names are counted once, for the checkpoint that really holds it.
    """
    run_canary_postgres(postgres_url, "sealed", sealed=True, plaintext_metadata=["tenant"])
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
