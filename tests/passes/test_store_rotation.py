"""Rotation of a SealedStore's ``store`` table (secure_serde/passes/_items.py), on real databases.

Items are written under key A through `SealedStore` over langgraph's own SqliteStore (a real
file) and PostgresStore (the real PostgreSQL of tests/fixtures_services.py); the keyring then
makes B primary with A still decrypting, `secure_serde.rewrap` runs, and a SealedStore holding
only key B must read every item as it was written. Only the sealed entry of each row changes.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from langgraph.store.postgres import PostgresStore
from langgraph.store.sqlite import SqliteStore

from secure_serde import DecryptionError, EncryptedSerializer, SecureSerdeError, rewrap
from secure_serde.ciphers import KeyRotationCipher, KmsEnvelopeCipher
from secure_serde.sealing import (
    SealedStore,
    StoreAuditReport,
    audit_store_items,
)
from secure_serde.stores import SEALED_FIELD
from tests.ciphers.kms_support import new_cmk
from tests.passes.rewrap_support import KEY_A, KEY_B, KeyEnv, run_cli
from tests.passes.sealed_support import serde_a, serde_b, serde_rotated

LANES = ("sqlite", "postgres")
INDEXED = ("kind",)
SEARCHABLE = ("topic",)
ITEMS: dict[tuple[tuple[str, ...], str], dict[str, Any]] = {
    (("users", "u1"), "profile"): {"name": "Ada", "ssn": "078-05-1120", "kind": "profile"},
    (("users", "u1"), "prefs"): {"theme": "dark", "kind": "prefs", "topic": "looks"},
    (("users", "u2"), "profile"): {"name": "Bob", "kind": "profile", "n": 3, "f": 1.5},
    (("users", "u2", "facts"), "f1"): {"fact": "likes tea", "kind": "fact", "topic": "drinks"},
    (("team",), "charter"): {"text": "é ✓ unicode", "nested": {"a": [1, 2, None]}},
}
KEYS = KeyEnv(env_key=None, keyring={"primary": "b", "keys": {"a": KEY_A, "b": KEY_B}})


class Lane:
    """One database of one kind: the SealedStore over it, and its raw ``store`` rows."""

    def __init__(self, kind: str, location: str) -> None:
        self.kind = kind
        self.location = location

    @contextmanager
    def store(self, serde: EncryptedSerializer) -> Iterator[SealedStore]:
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.location, check_same_thread=False, isolation_level=None)
            try:
                inner = SqliteStore(conn)
                inner.setup()
                yield SealedStore(
                    inner, serde=serde, indexed_fields=INDEXED, searchable_fields=SEARCHABLE
                )
            finally:
                conn.close()
        else:
            with PostgresStore.from_conn_string(self.location) as pg:
                pg.setup()
                yield SealedStore(
                    pg, serde=serde, indexed_fields=INDEXED, searchable_fields=SEARCHABLE
                )

    def _sql(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.location, isolation_level=None)
            try:
                return list(conn.execute(query.replace("%s", "?"), params).fetchall())
            finally:
                conn.close()
        with psycopg.connect(self.location, autocommit=True) as pg:
            cursor = pg.execute(query.encode(), params)
            return list(cursor.fetchall()) if cursor.description else []

    def rows(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Every row of the store table: (prefix, key) -> its value as stored (decoded JSON)."""
        found = self._sql("SELECT prefix, key, value FROM store")
        return {(p, k): (v if isinstance(v, dict) else json.loads(v)) for p, k, v in found}

    def write(self, prefix: str, key: str, value: dict[str, Any]) -> None:
        text = json.dumps(value)
        if self.kind == "sqlite":
            self._sql(
                "INSERT INTO store (prefix, key, value) VALUES (%s, %s, %s)"
                " ON CONFLICT (prefix, key) DO UPDATE SET value = excluded.value",
                (prefix, key, text),
            )
        else:
            self._sql(
                "INSERT INTO store (prefix, key, value) VALUES (%s, %s, %s::jsonb)"
                " ON CONFLICT (prefix, key) DO UPDATE SET value = excluded.value",
                (prefix, key, text),
            )


@pytest.fixture(params=LANES)
def lane(request: pytest.FixtureRequest, tmp_path: Path) -> Lane:
    if request.param == "sqlite":
        return Lane("sqlite", str(tmp_path / "memory.sqlite"))
    url: str = request.getfixturevalue("postgres_url")
    return Lane("postgres", url)


def populate(lane: Lane) -> None:
    with lane.store(serde_a()) as store:
        for (namespace, key), value in ITEMS.items():
            store.put(namespace, key, value)


def read_all(lane: Lane, serde: EncryptedSerializer) -> dict[tuple[tuple[str, ...], str], Any]:
    with lane.store(serde) as store:
        found = {}
        for namespace, key in ITEMS:
            item = store.get(namespace, key)
            found[(namespace, key)] = None if item is None else item.value
        return found


def audit(lane: Lane, serde: EncryptedSerializer) -> StoreAuditReport:
    with lane.store(serde) as store:
        return audit_store_items(store)


def tamper(lane: Lane, prefix: str, key: str) -> None:
    value = lane.rows()[(prefix, key)]
    raw = bytearray(base64.b64decode(value[SEALED_FIELD]))
    raw[-1] ^= 0x01
    value[SEALED_FIELD] = base64.b64encode(bytes(raw)).decode("ascii")
    lane.write(prefix, key, value)


def test_rotation_then_key_b_alone_reads_every_item(lane: Lane) -> None:
    populate(lane)
    before = lane.rows()
    assert audit(lane, serde_rotated()).not_under_primary == len(ITEMS) + 1

    report = rewrap(lane.location, serde_rotated())

    assert report.ok, report.failures
    assert report.rewrapped == len(ITEMS) + 1  # every item and the store identity
    assert report.scanned == len(ITEMS) + 1
    after = lane.rows()
    assert after.keys() == before.keys()
    for where, value in after.items():
        # Only the sealed entry changed: tokens and searchable fields are as written.
        assert value[SEALED_FIELD] != before[where][SEALED_FIELD]
        rest = {k: v for k, v in value.items() if k != SEALED_FIELD}
        assert rest == {k: v for k, v in before[where].items() if k != SEALED_FIELD}
    assert read_all(lane, serde_b()) == ITEMS
    with lane.store(serde_b()) as store:
        found = store.search(("users",), filter={"kind": "profile"})
        assert sorted(i.key for i in found) == ["profile", "profile"]
    with pytest.raises(SecureSerdeError):
        read_all(lane, serde_a())  # A alone no longer opens the identity
    clean = audit(lane, serde_b())
    assert clean.clean
    assert (clean.items, clean.under_primary, clean.not_under_primary) == (
        len(ITEMS),
        len(ITEMS) + 1,
        0,
    )

    again = rewrap(lane.location, serde_rotated())
    assert (again.rewrapped, again.current, again.failure_count) == (0, len(ITEMS) + 1, 0)
    assert lane.rows() == after


def test_dry_run_writes_nothing(lane: Lane) -> None:
    populate(lane)
    before = lane.rows()
    report = rewrap(lane.location, serde_rotated(), dry_run=True)
    assert report.dry_run
    assert report.ok
    assert report.rewrapped == len(ITEMS) + 1
    assert lane.rows() == before
    assert read_all(lane, serde_a()) == ITEMS


def test_tampered_and_moved_items_are_listed_and_left(lane: Lane) -> None:
    populate(lane)
    tamper(lane, "users.u1", "prefs")
    moved = lane.rows()[("users.u2", "profile")]
    lane.write("users.u2", "stolen", moved)
    plain = {"name": "planted", "kind": "profile"}
    lane.write("users.u2", "planted", plain)
    bad = {("users.u1", "prefs"), ("users.u2", "stolen"), ("users.u2", "planted")}
    kept = {where: value for where, value in lane.rows().items() if where in bad}

    report = rewrap(lane.location, serde_rotated())

    failed = {(f.ref.get("prefix"), f.ref.get("key")): f for f in report.failures}
    assert set(failed) == bad
    for failure in failed.values():
        assert failure.error is not None
        assert issubclass(failure.error, DecryptionError)
    assert report.failure_count == 3
    assert report.rewrapped == len(ITEMS) + 1 - 1  # the tampered one stays
    rows = lane.rows()
    assert {where: rows[where] for where in bad} == kept  # left exactly as they were
    for text in map(str, report.failures):
        assert "078-05-1120" not in text
        assert "planted" not in text.split(":", 1)[1]

    findings = audit(lane, serde_rotated()).findings
    assert {(f.namespace, f.key) for f in findings} == {
        (("users", "u1"), "prefs"),
        (("users", "u2"), "stolen"),
        (("users", "u2"), "planted"),
    }
    assert {f.error for f in findings} <= {"DecryptionError", "BindingError"}


def test_cli_rewrap_store_table(tmp_path: Path) -> None:
    lane = Lane("sqlite", str(tmp_path / "memory.sqlite"))
    populate(lane)
    tamper(lane, "team", "charter")
    result = run_cli(KEYS, tmp_path, "rewrap", lane.location, "--json", "--no-progress")
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report["rewrapped"] == len(ITEMS)
    assert [f["key"] for f in report["failures"]] == [{"prefix": "team", "key": "charter"}]
    assert report["failures"][0]["error"] in ("DecryptionError", "BindingError")
    text = run_cli(KEYS, tmp_path, "rewrap", lane.location, "--no-progress")
    assert text.returncode == 1
    assert "store prefix='team' key='charter'" in text.stdout
    assert KEY_A not in text.stdout + text.stderr
    assert KEY_B not in text.stdout + text.stderr


def test_one_database_with_checkpoints_and_items_rotates_both(lane: Lane) -> None:
    from tests.passes.sealed_support import audit as audit_saver
    from tests.passes.sealed_support import factory
    from tests.passes.sealed_support import observe as observe_saver
    from tests.passes.sealed_support import populate as populate_saver

    open_saver = factory(lane.location)
    populate_saver(open_saver, turns=1)
    populate(lane)
    seen = observe_saver(open_saver, serde_a())

    report = rewrap(lane.location, serde_rotated())

    assert report.ok, report.failures
    assert {f.ref.table for f in report.failures} == set()
    assert report.rewrapped > len(ITEMS) + 1  # the checkpoint rows, then every item
    assert read_all(lane, serde_b()) == ITEMS
    assert observe_saver(open_saver, serde_b()) == seen
    assert audit_saver(open_saver, serde_b()).clean
    assert audit(lane, serde_b()).clean
    assert rewrap(lane.location, serde_rotated()).rewrapped == 0


def test_decrypt_only_given_as_a_generator_reads_for_checkpoints_and_items(
    lane: Lane, kms_client: Any
) -> None:
    """Moving to a KMS key with the env key's cipher in ``decrypt_only``: the checkpoints' pass
    and the items' pass both read it, so a one-shot iterator must serve both."""
    from tests.passes.sealed_support import factory
    from tests.passes.sealed_support import observe as observe_saver
    from tests.passes.sealed_support import populate as populate_saver

    open_saver = factory(lane.location)
    populate_saver(open_saver, turns=1)
    populate(lane)
    seen = observe_saver(open_saver, serde_a())
    kms = KmsEnvelopeCipher(new_cmk(kms_client), client=kms_client)

    old_keys = (c for c in [KeyRotationCipher({"a": KEY_A}, "a")])
    report = rewrap(lane.location, kms, decrypt_only=old_keys)

    assert report.ok, report.failures
    assert read_all(lane, EncryptedSerializer(kms)) == ITEMS
    assert observe_saver(open_saver, EncryptedSerializer(kms)) == seen
