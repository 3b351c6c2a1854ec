"""``secure-serde audit``: real stores written by real graphs, every kind of finding, exit codes.

Each store is built by running LangGraph graphs (interrupts, several threads, a subgraph, a
DeltaChannel) through real savers, then damaged on purpose where a test needs it (a store
secure_serde 0.3's savers wrote is refused: tests/cli/test_v03_stores.py). What the audit must
report is worked out independently of the code under test: from which thread was
written how, and by reading the raw rows with sqlite3 or psycopg in Python.
"""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.postgres import PostgresSaver as StockPostgresSaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as BuiltinSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

from secure_serde import EncryptedSerializer
from secure_serde.ciphers import KmsEnvelopeCipher, cmk_id
from secure_serde.cli import main
from tests import canary_support as canary
from tests.ciphers.kms_support import REGION, new_cmk
from tests.cli.cli_support import only_env_key, run_console_script, run_main
from tests.fixtures_services import saver_connection
from tests.passes.rewrap_support import (
    KEY_A,
    KEY_C,
    SECRET,
    build_graph,
    key_id,
    rotation_serde,
    run_turns,
    sqlite_graph,
)

GOOD = ("good-1", "good-2")
SERDE_A = {"env": KEY_A}


# ---------------------------------------------------------------------------------------------
# Environment and running the CLI


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """Configure keys as an operator would; by default only LANGGRAPH_AES_KEY = KEY_A."""
    only_env_key(monkeypatch, None)

    def configure(**env: str) -> None:
        for name, value in env.items():
            monkeypatch.setenv(name, value)

    configure(LANGGRAPH_AES_KEY=KEY_A)
    return configure


def audit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    return run_main(capsys, "audit", *args)


def audit_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = audit(capsys, *args, "--json")
    document = json.loads(out)
    assert document["exit_code"] == code
    return code, document


def group(document: dict[str, Any], cipher: str, key: str | None) -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        g for g in document["ciphers"] if g["cipher"] == cipher and g["key_id"] == key
    ]
    assert len(found) == 1, document["ciphers"]
    return found[0]


FORBIDDEN = [
    KEY_A,
    KEY_C,
    base64.b64encode(KEY_A.encode()).decode(),
    SECRET,
    canary.API_KEY,
    *(p.decode() for ps in canary.state_canaries().values() for p in ps if p.isascii()),
]


def assert_no_secrets(text: str) -> None:
    leaked = [s for s in FORBIDDEN if s in text]
    assert not leaked, leaked


# ---------------------------------------------------------------------------------------------
# SQLite stores


def sqlite_rows(path: Path, thread_id: str) -> int:
    with sqlite3.connect(path) as conn:
        checkpoints = "SELECT count(*) FROM checkpoints WHERE thread_id = ?"
        writes = "SELECT count(*) FROM writes WHERE thread_id = ?"
        return sum(conn.execute(sql, (thread_id,)).fetchone()[0] for sql in (checkpoints, writes))


def sqlite_metadata_keys(path: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    with sqlite3.connect(path) as conn:
        for (metadata,) in conn.execute("SELECT metadata FROM checkpoints"):
            counts.update(json.loads(metadata).keys())
    return counts


def run_canary_sqlite(path: Path, serde: Any, thread_id: str) -> None:
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        saver = SqliteSaver(conn, serde=serde)
        saver.setup()
        canary.check_final_state(canary.run_sync(canary.build_canary_graph(saver), thread_id))
    finally:
        conn.close()


def build_clean(path: Path) -> Path:
    with sqlite_graph(path, rotation_serde(SERDE_A, "env")) as graph:
        run_turns(graph, GOOD[0], 2)
        run_turns(graph, GOOD[1], 3)
    return path


@pytest.fixture(scope="module")
def mixed_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Good threads and the canary graph under KEY_A, then one thread each written by
    langgraph's built-in cipher (same key), with no encryption, and under a key not configured."""
    path = build_clean(tmp_path_factory.mktemp("audit") / "mixed.sqlite")
    run_canary_sqlite(path, rotation_serde(SERDE_A, "env"), "canary")
    legacy = BuiltinSerializer.from_pycryptodome_aes(key=KEY_A.encode())
    for thread, serde in (
        ("legacy", legacy),
        ("plain", None),
        ("unknown", rotation_serde({"c": KEY_C}, "c")),
    ):
        conn = sqlite3.connect(path, check_same_thread=False)
        try:
            saver = SqliteSaver(conn) if serde is None else SqliteSaver(conn, serde=serde)
            run_turns(build_graph(saver), thread, 2)
        finally:
            conn.close()
    return path


def tamper_one_write(path: Path, thread_id: str) -> None:
    """Flip the last byte (inside the GCM tag) of one of a thread's writes."""
    with sqlite3.connect(path) as conn:
        rowid, value = conn.execute(
            "SELECT rowid, value FROM writes WHERE thread_id = ? AND type LIKE '%+aesgcm'"
            " ORDER BY rowid LIMIT 1",
            (thread_id,),
        ).fetchone()
        damaged = value[:-1] + bytes([value[-1] ^ 1])
        conn.execute("UPDATE writes SET value = ? WHERE rowid = ?", (damaged, rowid))


@pytest.fixture
def mixed(mixed_template: Path, tmp_path: Path) -> Path:
    path = tmp_path / "mixed.sqlite"
    shutil.copy(mixed_template, path)
    tamper_one_write(path, GOOD[1])
    return path


# ---------------------------------------------------------------------------------------------
# SQLite


def test_clean_store_exits_zero(
    keys: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = build_clean(tmp_path / "clean.sqlite")
    rows = sqlite_rows(store, GOOD[0]) + sqlite_rows(store, GOOD[1])
    code, out, err = audit(capsys, str(store))
    assert code == 0, out + err
    group_line = f"aesgcm key id {key_id(KEY_A)} (env) format v3"
    assert f"{group_line}: {rows:,} ({rows:,} under the primary" in out
    assert "findings: 0" in out
    code, document = audit_json(capsys, str(store))
    assert code == 0
    assert document["findings"] == []
    assert group(document, "aesgcm", key_id(KEY_A))["current"] == rows
    assert document["metadata"]["flagged"] == {}
    assert set(document["metadata"]["keys"]) == {"source", "step", "parents"}
    assert document["inline_values"] is None  # SQLite has no inline channel values


def test_mixed_store_every_finding_counted(
    keys: Any, mixed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = sum(sqlite_rows(mixed, t) for t in (*GOOD, "canary"))
    legacy, plain, unknown = (sqlite_rows(mixed, t) for t in ("legacy", "plain", "unknown"))
    code, document = audit_json(capsys, str(mixed))
    assert code == 1
    cells = document["cells"]
    assert cells["total"] == good + legacy + plain + unknown
    assert cells["empty"] == 0

    a = group(document, "aesgcm", key_id(KEY_A))
    assert (a["key_label"], a["kms_key"], a["format_version"]) == ("env", None, 3)
    assert a["legacy"] is False
    assert (a["count"], a["readable"], a["current"], a["failed"]) == (good, good - 1, good - 1, 1)
    c = group(document, "aesgcm", key_id(KEY_C))
    assert (c["key_label"], c["count"], c["readable"], c["failed"]) == (None, unknown, 0, unknown)
    builtin = group(document, "aes", None)
    assert (builtin["legacy"], builtin["format_version"]) == (True, None)
    assert (builtin["count"], builtin["readable"], builtin["failed"]) == (legacy, legacy, 0)
    # Legacy rows decrypt, but are not under the primary: rewrap would move them.
    assert document["stale"] == legacy

    assert document["plaintext"]["count"] == plain
    assert sum(document["plaintext"]["by_type"].values()) == plain
    assert {r["key"]["thread_id"] for r in document["plaintext"]["rows"]} == {"plain"}

    undecryptable = document["undecryptable"]
    assert undecryptable["count"] == unknown + 1
    assert undecryptable["by_error"] == {"UnknownKeyError": unknown, "DecryptionError": 1}
    tampered = [r for r in undecryptable["rows"] if r["reason"].startswith("DecryptionError")]
    assert [(r["table"], r["key"]["thread_id"]) for r in tampered] == [("writes", GOOD[1])]
    assert {r["key"]["thread_id"] for r in undecryptable["rows"]} == {"unknown", GOOD[1]}

    metadata = document["metadata"]
    assert metadata["keys"] == dict(sqlite_metadata_keys(mixed))
    # The canary config copies api_key and tenant from configurable; run_id is LangGraph's own.
    assert set(metadata["flagged"]) == {"api_key", "tenant"}
    assert metadata["flagged"]["api_key"] == metadata["keys"]["api_key"] > 0
    assert "run_id" in metadata["keys"]
    assert len(document["findings"]) == 4


def test_text_report_matches_json_and_prints_no_secret(
    keys: Any, mixed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = audit(capsys, str(mixed), "--max-listed", "2")
    assert code == 1
    _, document = audit_json(capsys, str(mixed))
    plain = document["plaintext"]["count"]
    failures = document["undecryptable"]["count"]
    assert f"unencrypted: {plain:,} (" in out
    assert (
        f"cannot decrypt: {failures:,} (DecryptionError 1, UnknownKeyError {failures - 1:,})" in out
    )
    assert f"... and {failures - 2:,} more" in out
    assert f"aes: langgraph built-in format (no key id or version): {document['stale']:,}" in out
    assert "  api_key: " in out
    assert "NOT LangGraph's: copied from config" in out
    assert "findings: 4" in out
    assert_no_secrets(out + err)
    assert_no_secrets(json.dumps(document))


def test_batches_do_not_change_the_result(
    keys: Any, mixed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, whole = audit_json(capsys, str(mixed))
    _, paged = audit_json(capsys, str(mixed), "--batch-size", "3")
    assert paged == whole


def test_allowed_metadata_keys_leave_a_clean_store(
    keys: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "canary.sqlite"
    run_canary_sqlite(store, rotation_serde(SERDE_A, "env"), "canary")
    code, document = audit_json(capsys, str(store))
    assert code == 1
    assert document["findings"] == [
        "plaintext metadata key(s) not written by LangGraph: ['api_key', 'tenant']"
    ]
    allowed = ["--allow-metadata-key", "tenant", "--allow-metadata-key", "api_key"]
    code, document = audit_json(capsys, str(store), *allowed)
    assert code == 0
    assert document["metadata"]["allowed"] == ["api_key", "tenant"]


def test_no_decrypt_needs_no_keys_and_still_counts(
    keys: Any, mixed: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("LANGGRAPH_AES_KEY")
    code, _, err = audit(capsys, str(mixed))
    assert code == 2
    assert "no keys configured" in err
    assert "LANGGRAPH_AES_KEY" in err
    code, document = audit_json(capsys, str(mixed), "--no-decrypt")
    assert code == 1
    assert document["decrypted"] is False
    assert document["undecryptable"] is None
    assert document["stale"] is None
    assert group(document, "aesgcm", key_id(KEY_C))["count"] == sqlite_rows(mixed, "unknown")
    # Tampering goes unnoticed without keys: only the other findings remain.
    assert len(document["findings"]) == 3
    assert "current" not in group(document, "aesgcm", key_id(KEY_A))


def test_store_and_configuration_errors_exit_two(
    keys: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = audit(capsys, str(tmp_path / "missing.sqlite"))
    assert code == 2
    assert "no SQLite file" in err
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()
    code, _, err = audit(capsys, str(empty))
    assert (code, "holds no langgraph checkpoint tables" in err) == (2, True)
    keyring = tmp_path / "keyring.json"
    keyring.write_text("{not json")
    keyring.chmod(0o600)  # keyring files must be private to their owner
    keys(SECURE_SERDE_KEYRING_FILE=str(keyring))
    code, _, err = audit(capsys, str(build_clean(tmp_path / "clean.sqlite")))
    assert (code, "is not valid JSON" in err) == (2, True)
    with pytest.raises(SystemExit) as usage:
        main(["audit"])
    assert usage.value.code == 2


def test_console_script_subprocess(mixed: Path, tmp_path: Path) -> None:
    done = run_console_script("audit", str(mixed), "--json", env={"LANGGRAPH_AES_KEY": KEY_A})
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert document["undecryptable"]["by_error"]["DecryptionError"] == 1
    assert_no_secrets(done.stdout + done.stderr)


# ---------------------------------------------------------------------------------------------
# KMS (moto over HTTP)


def test_kms_rows_by_cmk(
    keys: Any,
    kms_endpoint: str,
    kms_client: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    current, older = new_cmk(kms_client), new_cmk(kms_client)
    store = build_clean(tmp_path / "kms.sqlite")
    for thread, arn in (("kms-new", current), ("kms-old", older)):
        cipher = KmsEnvelopeCipher(arn, client=kms_client)
        with sqlite_graph(store, EncryptedSerializer(cipher)) as graph:
            run_turns(graph, thread, 2)
    new_rows, old_rows = sqlite_rows(store, "kms-new"), sqlite_rows(store, "kms-old")
    keys(
        AWS_ENDPOINT_URL_KMS=kms_endpoint,
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_DEFAULT_REGION=REGION,
        SECURE_SERDE_KMS_KEY=current,
    )
    code, document = audit_json(capsys, str(store))
    assert code == 1
    new = group(document, "kms", cmk_id(current).hex())
    assert (new["kms_key"], new["key_label"], new["format_version"]) == (current, current, 2)
    assert (new["count"], new["current"], new["failed"]) == (new_rows, new_rows, 0)
    old = group(document, "kms", cmk_id(older).hex())
    assert (old["count"], old["failed"]) == (old_rows, old_rows)
    assert document["undecryptable"]["by_error"] == {"UnknownKeyError": old_rows}
    # The AES keyring only reads once a KMS key is configured: its rows are stale.
    aes = group(document, "aesgcm", key_id(KEY_A))
    assert (aes["readable"], aes["current"]) == (aes["count"], 0)

    keys(SECURE_SERDE_KMS_DECRYPT_KEYS=f" {older} ,")
    code, document = audit_json(capsys, str(store))
    assert code == 0
    old = group(document, "kms", cmk_id(older).hex())
    assert (old["readable"], old["current"], old["failed"]) == (old_rows, 0, 0)
    assert document["stale"] == old_rows + aes["count"]
    keys(SECURE_SERDE_KMS_ENCRYPTION_CONTEXT='{"tenant": "other"}')
    code, document = audit_json(capsys, str(store))
    # A different encryption context fails every KMS value's authentication.
    assert code == 1
    assert document["undecryptable"]["count"] == new_rows + old_rows
    keys(SECURE_SERDE_KMS_ENCRYPTION_CONTEXT='["not", "an object"]')
    code, _, err = audit(capsys, str(store))
    assert (code, "must be a JSON object of strings" in err) == (2, True)


# ---------------------------------------------------------------------------------------------
# PostgreSQL


def pg_connect(url: str) -> Any:
    return saver_connection(url)


def run_canary_stock_postgres(url: str, thread_id: str) -> None:
    with pg_connect(url) as conn:
        saver = StockPostgresSaver(conn, serde=rotation_serde(SERDE_A, "env"))
        saver.setup()
        canary.check_final_state(canary.run_sync(canary.build_canary_graph(saver), thread_id))


def inline_by_channel(url: str) -> dict[str, int]:
    """The oracle: channel values in the checkpoint JSON with no non-empty blob behind them
    (of the same version, where blobs have one: the shallow saver's do not)."""
    counts: Counter[str] = Counter()
    with pg_connect(url) as conn:
        blobs = {
            (r["thread_id"], r["checkpoint_ns"], r["channel"], r.get("version"))
            for r in conn.execute("SELECT * FROM checkpoint_blobs WHERE type <> 'empty'")
        }
        versioned = any(key[3] is not None for key in blobs)
        for row in conn.execute("SELECT thread_id, checkpoint_ns, checkpoint FROM checkpoints"):
            versions = row["checkpoint"]["channel_versions"]
            for channel in row["checkpoint"].get("channel_values", {}):
                version = versions.get(channel) if versioned else None
                if (row["thread_id"], row["checkpoint_ns"], channel, version) not in blobs:
                    counts[channel] += 1
    return dict(counts)


def pg_count(url: str, sql: str) -> int:
    with pg_connect(url) as conn:
        return int(conn.execute(sql).fetchone()["count"])


def test_postgres_stock_saver_inline_values(
    keys: Any, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The canary graph as the stock saver writes it.
    run_canary_stock_postgres(postgres_url, "stock")
    expected = inline_by_channel(postgres_url)
    # Every primitive channel of the canary graph and its subgraph, and no DeltaChannel marker.
    state = {"text", canary.INT_CHANNEL, canary.FLOAT_CHANNEL, canary.BOOL_CHANNEL}
    assert state | {"approval", "sub_note", "sub_count"} <= set(expected)
    assert "deltas" not in expected
    code, document = audit_json(capsys, postgres_url)
    assert code == 1
    inline = document["inline_values"]
    assert {c["channel"]: c["checkpoints"] for c in inline["channels"]} == expected
    assert inline["count"] == sum(expected.values())
    assert {c["threads"] for c in inline["channels"]} == {1}
    types = {c["channel"]: c["json_types"] for c in inline["channels"]}
    assert types[canary.BOOL_CHANNEL] == ["boolean"]
    assert types[canary.INT_CHANNEL] == ["number"]
    assert types["text"] == ["string"]
    assert document["undecryptable"]["count"] == 0
    assert document["plaintext"]["count"] == 0
    cells = pg_count(postgres_url, "SELECT count(*) FROM checkpoint_blobs")
    cells += pg_count(postgres_url, "SELECT count(*) FROM checkpoint_writes")
    assert document["cells"]["total"] == cells
    empty = pg_count(postgres_url, "SELECT count(*) FROM checkpoint_blobs WHERE blob IS NULL")
    assert document["cells"]["empty"] == empty
    code, out, err = audit(capsys, postgres_url)
    assert f"{canary.BOOL_CHANNEL}: " in out
    assert "(a LangGraph channel)" in out  # the stock saver inlines the edges' None too
    assert_no_secrets(out + err)


def test_metadata_that_is_not_a_json_object_is_counted(
    keys: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = build_clean(tmp_path / "clean.sqlite")
    with sqlite3.connect(store) as conn:
        total = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        conn.execute(
            "UPDATE checkpoints SET metadata = ?"
            " WHERE rowid = (SELECT min(rowid) FROM checkpoints)",
            (b"not json {",),
        )
        conn.execute(
            "UPDATE checkpoints SET metadata = ?"
            " WHERE rowid = (SELECT max(rowid) FROM checkpoints)",
            (b"[1, 2]",),
        )
    code, document = audit_json(capsys, str(store))
    assert code == 0
    metadata = document["metadata"]
    assert (metadata["checkpoints"], metadata["not_objects"]) == (total, 2)
    assert metadata["keys"]["step"] == total - 2


def test_planted_names_cannot_grow_the_report(
    keys: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Type tags, cipher names and metadata keys are whatever rows say: their tallies are capped,
    and every row is still counted."""
    store = build_clean(tmp_path / "planted.sqlite")
    planted = 300
    with sqlite3.connect(store) as conn:
        rows = [("planted", "", f"c{i}", "t", i, "ch", f"tag{i}", b"x") for i in range(planted)]
        rows += [
            ("planted", "", f"c{i}", "t", -1, "ch", f"msgpack+cipher{i}", b"x")
            for i in range(planted)
        ]
        conn.executemany("INSERT INTO writes VALUES (?, ?, ?, ?, '', ?, ?, ?, ?)", rows)
        many_keys = json.dumps({f"key{i:04d}": i for i in range(1005)}).encode()
        first = "(SELECT min(rowid) FROM checkpoints)"
        conn.execute(f"UPDATE checkpoints SET metadata = ? WHERE rowid = {first}", (many_keys,))  # noqa: S608
    code, document = audit_json(capsys, str(store))
    assert code == 1
    by_type = document["plaintext"]["by_type"]
    assert len(by_type) == 257
    assert sum(by_type.values()) == document["plaintext"]["count"] == planted
    assert by_type["(other)"] == planted - 256
    groups = document["ciphers"]
    assert len(groups) == 257
    assert sum(g["count"] for g in groups) == document["cells"]["total"] - planted
    assert document["undecryptable"]["by_error"] == {"UnknownCipherError": planted}
    metadata = document["metadata"]
    assert metadata["truncated"] is True
    assert len(metadata["keys"]) == 1000


def test_postgres_shallow_saver(
    keys: Any, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from langgraph.checkpoint.postgres.shallow import ShallowPostgresSaver

    with pg_connect(postgres_url) as conn, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the saver is deprecated, not gone
        saver = ShallowPostgresSaver(conn, serde=rotation_serde(SERDE_A, "env"))
        saver.setup()
        for thread in GOOD:
            run_turns(build_graph(saver), thread, 2)
    # This saver keeps every value in blobs; plant two inline, one of them backed by a blob.
    with pg_connect(postgres_url) as conn:
        conn.execute(
            "UPDATE checkpoints SET checkpoint = jsonb_set(checkpoint, '{channel_values}',"
            """ '{"planted": "x", "messages": true}') WHERE thread_id = %s""",
            (GOOD[0],),
        )
    expected = inline_by_channel(postgres_url)
    assert expected == {"planted": 1}
    code, document = audit_json(capsys, postgres_url)
    assert code == 1
    assert {
        c["channel"]: c["checkpoints"] for c in document["inline_values"]["channels"]
    } == expected
    cells = pg_count(postgres_url, "SELECT count(*) FROM checkpoint_blobs")
    cells += pg_count(postgres_url, "SELECT count(*) FROM checkpoint_writes")
    empty = pg_count(postgres_url, "SELECT count(*) FROM checkpoint_blobs WHERE blob IS NULL")
    assert document["cells"]["total"] == cells
    assert group(document, "aesgcm", key_id(KEY_A))["current"] == cells - empty
    code, _, err = run_main(capsys, "inspect", postgres_url, "--thread", GOOD[0])
    assert code == 2
    assert "ShallowPostgresSaver's schema, which keeps no history" in err
