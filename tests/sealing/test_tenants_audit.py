"""`audit` of a tenant-keyed store: shredded rows are shredded, not corrupt; tampering still shows.

Real SQLite files and real PostgreSQL databases (the checkpoint store and the tenant key store
are never one), written by a real graph for two tenants; then one tenant (or one thread) is
shredded, and `audit_sealed` and ``secure-serde audit --tenant-keys`` must tell erased rows
from broken ones.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from secure_serde import EncryptedSerializer, SealedSaver, TenantKeys
from secure_serde.cli import main
from secure_serde.config import serializer_from_env
from secure_serde.sealing import audit_sealed
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

KEY = "tenant-audit-test-key-0123456789"
_KEY_VARS = (
    "LANGGRAPH_AES_KEY",
    "SECURE_SERDE_KEYRING_FILE",
    "SECURE_SERDE_KMS_KEY",
    "SECURE_SERDE_KMS_DECRYPT_KEYS",
    "SECURE_SERDE_KMS_KEY_ID",  # 0.3's names, still read
    "SECURE_SERDE_KMS_DECRYPT_KEY_IDS",
    "SECURE_SERDE_KMS_ENCRYPTION_CONTEXT",
)


@pytest.fixture
def serde(monkeypatch: pytest.MonkeyPatch) -> EncryptedSerializer:
    """The keys of the environment, as the CLI reads them; the store is written under them."""
    for var in _KEY_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY)
    return serializer_from_env()


@pytest.fixture(params=["sqlite", "postgres"])
def places(
    request: pytest.FixtureRequest, tmp_path: Path, serde: EncryptedSerializer
) -> Iterator[tuple[str, str]]:
    """(checkpoint store, key store), both written: acme and globex, two threads each."""
    with store_places(request.param, tmp_path, request) as (store, keys):
        write_tenants(store, keys, serde)
        yield store, keys


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    code = main(["audit", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def _rows_of(store: str, prefix: str) -> int:
    return sum(1 for t in checkpoint_threads(store) if t.startswith(prefix))


def test_a_shredded_tenant_is_reported_shredded_and_the_other_clean(
    places: tuple[str, str], serde: EncryptedSerializer, capsys: pytest.CaptureFixture[str]
) -> None:
    store, keys_at = places
    prefixes = tenant_prefixes(store, serde)
    acme_rows, globex_rows = _rows_of(store, prefixes["acme"]), _rows_of(store, prefixes["globex"])
    assert acme_rows > 0
    assert globex_rows > 0
    keys = TenantKeys.open(keys_at)
    try:
        keys.shred("acme")
        kind = "postgres" if store.startswith("postgresql://") else "sqlite"
        with inner_saver(kind, store) as inner:
            routing = SealedSaver(inner, serde=serde, tenant_keys=keys)
            report = audit_sealed(routing)
    finally:
        keys.close()
    assert report.findings == ()
    assert report.clean
    assert report.shredded == acme_rows
    assert {row.tenant_id for row in report.shredded_rows} == {"acme"}
    assert {row.status for row in report.shredded_rows} == {"shredded"}
    assert all(row.thread_id.startswith(prefixes["acme"]) for row in report.shredded_rows)
    assert report.tenant_checkpoints == globex_rows
    assert report.tenant_cells > 0
    assert report.not_under_primary == 0
    assert report.checkpoints == acme_rows + globex_rows

    # The CLI, from the table's thread ids, with the key store: exit 0, the same counts.
    code, document = _cli(capsys, store, "--tenant-keys", keys_at)
    assert code == 0, document
    assert document["shredded"] == acme_rows
    assert document["tenant_checkpoints"] == globex_rows
    assert document["findings"] == []
    assert {row["status"] for row in document["shredded_rows"]} == {"shredded"}
    assert {row["tenant_id"] for row in document["shredded_rows"]} == {"acme"}
    assert main(["audit", store, "--tenant-keys", keys_at]) == 0
    text = capsys.readouterr().out
    assert f"{acme_rows:,} checkpoints of shredded tenants or threads" in text
    assert "every checkpoint opens" in text

    # Without the key store, no tenant row can be opened: each is a finding.
    code, document = _cli(capsys, store)
    assert code == 1
    assert len(document["findings"]) == acme_rows + globex_rows
    assert {f["error"] for f in document["findings"]} == {"UnknownTenantError"}


def test_a_shredded_thread_is_shredded_and_the_tenants_other_thread_clean(
    places: tuple[str, str], serde: EncryptedSerializer, capsys: pytest.CaptureFixture[str]
) -> None:
    store, keys_at = places
    prefixes = tenant_prefixes(store, serde)
    keys = TenantKeys.open(keys_at)
    try:
        keys.shred_thread("globex", TWO_THREADS[0])
    finally:
        keys.close()
    shredded_thread = prefixes["globex"] + TWO_THREADS[0]
    expected = sum(1 for t in checkpoint_threads(store) if t == shredded_thread)
    assert expected > 0
    code, document = _cli(capsys, store, "--tenant-keys", keys_at)
    assert code == 0, document
    assert document["shredded"] == expected
    assert {row["thread_id"] for row in document["shredded_rows"]} == {shredded_thread}
    assert document["tenant_checkpoints"] == len(checkpoint_threads(store)) - expected - 1


def _tamper_a_write(store: str, prefix: str) -> None:
    """Flip the last byte of one pending write of a thread under ``prefix`` (raw SQL)."""
    if store.startswith("postgresql://"):
        with psycopg.connect(store, autocommit=True) as conn:
            row = conn.execute(
                "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, blob"
                " FROM checkpoint_writes WHERE thread_id LIKE %s ORDER BY 1, 3, 4, 5 LIMIT 1",
                (prefix + "%",),
            ).fetchone()
            assert row is not None
            blob = bytes(row[5])
            conn.execute(
                "UPDATE checkpoint_writes SET blob = %s WHERE thread_id = %s"
                " AND checkpoint_ns = %s AND checkpoint_id = %s AND task_id = %s AND idx = %s",
                (blob[:-1] + bytes([blob[-1] ^ 1]), *row[:5]),
            )
        return
    db = sqlite3.connect(store)
    try:
        found = db.execute(
            "SELECT rowid, value FROM writes WHERE thread_id LIKE ? ORDER BY rowid LIMIT 1",
            (prefix + "%",),
        ).fetchone()
        assert found is not None
        value = bytes(found[1])
        db.execute(
            "UPDATE writes SET value = ? WHERE rowid = ?",
            (value[:-1] + bytes([value[-1] ^ 1]), found[0]),
        )
        db.commit()
    finally:
        db.close()


def test_a_tampered_row_of_the_live_tenant_is_a_finding(
    places: tuple[str, str], serde: EncryptedSerializer, capsys: pytest.CaptureFixture[str]
) -> None:
    store, keys_at = places
    prefixes = tenant_prefixes(store, serde)
    keys = TenantKeys.open(keys_at)
    try:
        keys.shred("acme")
    finally:
        keys.close()
    _tamper_a_write(store, prefixes["globex"])
    code, document = _cli(capsys, store, "--tenant-keys", keys_at)
    assert code == 1, document
    assert len(document["findings"]) == 1
    finding = document["findings"][0]
    assert finding["thread_id"].startswith(prefixes["globex"])
    # The write's cell does not authenticate at its place (a DecryptionError subclass).
    assert finding["error"] in {"DecryptionError", "BindingError"}
    assert document["shredded"] == _rows_of(store, prefixes["acme"])
    assert main(["audit", store, "--tenant-keys", keys_at]) == 1
    assert "1 checkpoints do not open" in capsys.readouterr().out


def test_tenant_keys_on_a_store_not_sealed_is_refused(
    tmp_path: Path, serde: EncryptedSerializer, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain.sqlite"
    with inner_saver("sqlite", plain) as stock:
        chat_graph(stock).invoke({"said": ["x"]}, config("acme", "t1"))
    code = main(["audit", str(plain), "--tenant-keys", str(tmp_path / "keys.sqlite")])
    assert code == 2
    assert "--tenant-keys" in capsys.readouterr().err
