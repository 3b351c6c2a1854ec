"""`audit_store_items` and ``secure-serde audit`` on a SealedStore's ``store`` table (real DBs).

Items written under key A through SealedStore over langgraph's SqliteStore (a real file) and
PostgresStore (real PostgreSQL); the audit opens each one through SealedStore at its place.
"""

from __future__ import annotations

import json
from pathlib import Path

from secure_serde import rewrap
from tests.passes.rewrap_support import KEY_A, KEY_B, KeyEnv, run_cli
from tests.passes.sealed_support import serde_a, serde_b, serde_rotated
from tests.passes.test_store_rotation import ITEMS, Lane, audit, lane, populate, tamper

__all__ = ["lane"]  # the fixture, shared with the rotation tests

KEYS = KeyEnv(env_key=None, keyring={"primary": "b", "keys": {"a": KEY_A, "b": KEY_B}})


def test_counts_under_the_primary_before_and_after_rotation(lane: Lane) -> None:
    populate(lane)
    report = audit(lane, serde_a())
    assert report.clean
    assert (report.items, report.under_primary, report.not_under_primary) == (
        len(ITEMS),
        len(ITEMS) + 1,
        0,
    )
    rotated = audit(lane, serde_rotated())
    assert not rotated.clean
    assert not rotated.findings
    assert rotated.not_under_primary == len(ITEMS) + 1
    rewrap(lane.location, serde_rotated())
    assert audit(lane, serde_b()).clean


def test_tampered_moved_and_plaintext_items_are_findings(lane: Lane) -> None:
    populate(lane)
    before = lane.rows()
    tamper(lane, "team", "charter")
    lane.write("team", "copy", before[("users.u1", "profile")])
    lane.write("team", "plain", {"name": "planted"})
    tampered = lane.rows()
    report = audit(lane, serde_a())
    assert not report.clean
    found = {(f.namespace, f.key): f.error for f in report.findings}
    assert set(found) == {(("team",), "charter"), (("team",), "copy"), (("team",), "plain")}
    assert set(found.values()) <= {"DecryptionError", "BindingError"}
    assert report.items == len(ITEMS) + 2
    assert lane.rows() == tampered  # the audit writes nothing
    for finding in report.findings:
        assert "078-05-1120" not in finding.message
        assert "planted" not in finding.message


def test_cli_audit_text_and_json(tmp_path: Path) -> None:
    lane = Lane("sqlite", str(tmp_path / "memory.sqlite"))
    populate(lane)
    pending = run_cli(KEYS, tmp_path, "audit", lane.location, "--json")
    assert pending.returncode == 1, pending.stderr
    doc = json.loads(pending.stdout)
    assert (doc["items"], doc["not_under_primary"], doc["findings"]) == (len(ITEMS), 6, [])
    assert run_cli(KEYS, tmp_path, "rewrap", lane.location, "--no-progress").returncode == 0
    clean = run_cli(KEYS, tmp_path, "audit", lane.location)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "every item opens at its location" in clean.stdout
    tamper(lane, "users.u2", "profile")
    text = run_cli(KEYS, tmp_path, "audit", lane.location)
    assert text.returncode == 1
    assert "namespace users.u2 key profile" in text.stdout
    assert "DecryptionError" in text.stdout or "BindingError" in text.stdout
    listed = json.loads(run_cli(KEYS, tmp_path, "audit", lane.location, "--json").stdout)
    assert listed["findings"][0]["namespace"] == ["users", "u2"]


def test_cli_audit_of_one_database_with_checkpoints_and_items(tmp_path: Path) -> None:
    """Both kinds of tables in one database: audit reports both, and a finding in either counts."""
    from tests.passes.sealed_support import factory
    from tests.passes.sealed_support import populate as populate_saver

    lane = Lane("sqlite", str(tmp_path / "app.sqlite"))
    populate_saver(factory(lane.location), turns=1)
    populate(lane)
    assert run_cli(KEYS, tmp_path, "rewrap", lane.location, "--no-progress").returncode == 0
    clean = run_cli(KEYS, tmp_path, "audit", lane.location, "--json")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    doc = json.loads(clean.stdout)
    assert doc["checkpoints"] > 0
    assert doc["items"]["items"] == len(ITEMS)
    text = run_cli(KEYS, tmp_path, "audit", lane.location)
    assert "every checkpoint opens" in text.stdout
    assert "every item opens at its location" in text.stdout
    tamper(lane, "users.u2", "profile")
    found = run_cli(KEYS, tmp_path, "audit", lane.location, "--json")
    assert found.returncode == 1
    assert json.loads(found.stdout)["items"]["findings"][0]["key"] == "profile"
