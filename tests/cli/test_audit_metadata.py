"""audit reports which metadata keys are plaintext, how many checkpoints are sealed, and which
sealed keys carry a blind index (issue 11). Real PostgreSQL, a real graph, the real CLI."""

from __future__ import annotations

from typing import Any

import pytest

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
