"""`rewrap` of a tenant-keyed store: tenant rows skipped, the store keys' rows rewrapped.

A real SQLite file or PostgreSQL database written by a real graph for two tenants under key A
(the tenant key store in another file or database), one tenant shredded, the primary rotated
to B: the store-wide rewrap must skip every tenant row (counted, never a failure), rewrap the
store identity, and `TenantKeys.rewrap` must move the wrapped tenant keys; then a reader with
key B alone reads the live tenant, and a second run writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from secure_serde import SealedSaver, ShreddedError, TenantKeys, rewrap
from secure_serde.sealing import IDENTITY_THREAD, audit_sealed
from tests.passes.rewrap_support import (
    A_AND_B,
    KEY_A,
    KEY_B,
    KeyEnv,
    key_id,
    rotation_serde,
    run_cli,
)
from tests.sealing.tenants_support import (
    TWO_THREADS,
    chat_graph,
    checkpoint_threads,
    config,
    inner_saver,
    store_places,
    tenant_prefixes,
    write_tenants,
)
from tests.serdes_support import thin_sqlite

SERDE_A = {"a": KEY_A}
SERDE_B = {"b": KEY_B}


@pytest.fixture(params=["sqlite", "postgres"])
def places(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    with store_places(request.param, tmp_path, request) as (store, keys):
        write_tenants(store, keys, rotation_serde(SERDE_A, "a"))
        yield store, keys


def _kind(store: str) -> str:
    return "postgres" if store.startswith("postgresql://") else "sqlite"


def _digest(store: str) -> str:
    """Every byte of every checkpoint table, read with SQL."""
    tables = (
        ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
        if _kind(store) == "postgres"
        else ("checkpoints", "writes")
    )
    digest = hashlib.sha256()
    if _kind(store) == "postgres":
        with psycopg.connect(store) as conn:
            for table in tables:
                # The table names are this function's own constants.
                rows = conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2, 3, 4").fetchall()  # noqa: S608
                digest.update(repr(rows).encode())
        return digest.hexdigest()
    db = sqlite3.connect(store)
    try:
        for table in tables:
            rows = db.execute(f"SELECT * FROM {table} ORDER BY 1, 2, 3, 4").fetchall()  # noqa: S608
            digest.update(repr(rows).encode())
    finally:
        db.close()
    return digest.hexdigest()


def _identity_key_id(store: str) -> str:
    """The key id in the header of the store identity's record cell (raw SQL)."""
    from secure_serde.sealing import cell_layout as _cell
    from secure_serde.stores import SEALED_RECORD_KEY as RECORD_KEY

    query = "SELECT metadata FROM checkpoints WHERE thread_id = "
    if _kind(store) == "postgres":
        with psycopg.connect(store) as conn:
            row = conn.execute(query + "%s", (IDENTITY_THREAD,)).fetchone()
        assert row is not None
        metadata = row[0]
    else:
        import json

        db = sqlite3.connect(store)
        try:
            found = db.execute(query + "?", (IDENTITY_THREAD,)).fetchone()
        finally:
            db.close()
        assert found is not None
        metadata = json.loads(found[0])
    from secure_serde.stores import IDENTITY_KEY

    text = metadata.get(IDENTITY_KEY) or metadata.get(RECORD_KEY)
    cell = _cell.from_text(text, _cell.IDENTITY)
    return bytes(cell.ciphertext[1:5]).hex()


def test_rewrap_skips_tenant_rows_rewraps_the_identity_and_tenant_keys_move(
    places: tuple[str, str],
) -> None:
    store, keys_at = places
    rotated = rotation_serde(A_AND_B, "b")
    prefixes = tenant_prefixes(store, rotation_serde(SERDE_A, "a"))
    threads = checkpoint_threads(store)
    acme = sum(1 for t in threads if t.startswith(prefixes["acme"]))
    globex = sum(1 for t in threads if t.startswith(prefixes["globex"]))
    assert acme > 0
    assert globex > 0
    assert _identity_key_id(store) == key_id(KEY_A)
    keys = TenantKeys.open(keys_at)
    try:
        keys.shred("acme")
        # Without the key store every tenant row is skipped as tenant-keyed: nothing fails.
        blind = rewrap(store, rotated, dry_run=True)
        assert blind.failure_count == 0, blind.failures
        assert blind.shredded_skipped == 0
        tenant_cells = blind.tenant_skipped
        assert tenant_cells >= acme + globex

        report = rewrap(store, rotated, tenant_keys=keys)
        assert report.failure_count == 0, report.failures
        assert report.shredded_skipped >= acme
        assert report.tenant_skipped >= globex
        assert report.shredded_skipped + report.tenant_skipped == tenant_cells
        assert report.rewrapped >= 1
        assert _identity_key_id(store) == key_id(KEY_B)

        moved = keys.rewrap(rotated)
        assert (moved.rewrapped, moved.shredded, moved.failed) == (1, 1, ())
        status = keys.status("globex")
        assert status is not None
        assert status.cipher_name
    finally:
        keys.close()

    # Key B alone: the identity and globex's keys open, acme stays shredded.
    fresh = TenantKeys.open(keys_at)
    try:
        with inner_saver(_kind(store), store) as inner:
            saver = SealedSaver(inner, serde=rotation_serde(SERDE_B, "b"), tenant_keys=fresh)
            graph = chat_graph(saver)
            for thread in TWO_THREADS:
                said = graph.get_state(config("globex", thread)).values["said"]
                assert said[0] == "globex 0"
            with pytest.raises(ShreddedError):
                graph.get_state(config("acme", TWO_THREADS[0]))
            audited = audit_sealed(saver)
        assert audited.clean, audited.findings
        assert audited.shredded == acme
        assert audited.tenant_checkpoints == globex

        # A second run writes nothing, and the tenant keys are current.
        before = _digest(store)
        again = rewrap(store, rotated, tenant_keys=fresh)
        assert (again.rewrapped, again.failure_count) == (0, 0)
        tenant_kinds = ("tenant-keyed", "shredded")
        assert [again.skipped.get(k) for k in tenant_kinds] == [
            report.skipped.get(k) for k in tenant_kinds
        ]
        assert _digest(store) == before
        second = fresh.rewrap(rotated)
        assert (second.rewrapped, second.current, second.shredded) == (0, 1, 1)
    finally:
        fresh.close()


def test_an_application_thread_shaped_like_a_tenants_is_rewrapped(tmp_path: Path) -> None:
    """A plain store's thread named ``sst1:<22 chars>:t`` is the store keys' row: rewrapped."""
    path = tmp_path / "plain-sealed.sqlite"
    lookalike = "sst1:" + "A" * 22 + ":t"
    with thin_sqlite(path, rotation_serde(SERDE_A, "a")) as saver:
        chat_graph(saver).invoke({"said": ["x"]}, {"configurable": {"thread_id": lookalike}})
    keys = TenantKeys.open(tmp_path / "keys.sqlite")
    try:
        for given in (None, keys):
            report = rewrap(path, rotation_serde(A_AND_B, "b"), dry_run=True, tenant_keys=given)
            assert report.failure_count == 0, report.failures
            assert report.tenant_skipped == 0
            assert report.rewrapped > 1
    finally:
        keys.close()


def test_the_rewrap_command_takes_the_tenant_key_store(
    places: tuple[str, str], tmp_path: Path
) -> None:
    """``secure-serde rewrap --tenant-keys``: shredded and live tenant rows counted apart."""
    store, keys_at = places
    keys = TenantKeys.open(keys_at)
    try:
        keys.shred("acme")
    finally:
        keys.close()
    rotated = KeyEnv(env_key=None, keyring={"primary": "b", "keys": {"a": KEY_A, "b": KEY_B}})
    done = run_cli(rotated, tmp_path, "rewrap", store, "--json", "--tenant-keys", keys_at)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["failure_count"] == 0
    assert report["skipped"]["shredded"] > 0
    assert report["skipped"]["tenant-keyed"] > 0
    assert _identity_key_id(store) == key_id(KEY_B)
    # Without the key store, the same rows are all skipped as tenant-keyed.
    blind = run_cli(rotated, tmp_path, "rewrap", store, "--json", "--dry-run")
    assert blind.returncode == 0, blind.stderr
    assert "shredded" not in json.loads(blind.stdout)["skipped"]
