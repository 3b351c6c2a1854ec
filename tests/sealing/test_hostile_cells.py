"""Hostile cells through the real saver: every reader meets each with a typed error for that row.

Issue 22, item 3 (and item 1's duplicate keys). A store is written through
``SealedSaver(SqliteSaver(conn), serde=...)`` on a real SQLite file; then a
database writer rewrites raw rows: a deeply nested metadata JSON cell, a
huge one, non-UTF-8 TEXT, duplicate JSON keys, a cell of the wrong kind, a
truncated cell. `get_tuple`, `list`, ``list(filter=)`` and `audit_sealed`
must each meet the row with a `SecureSerdeError` (for ``audit``, a finding
for that row, and the pass goes on), never ``RecursionError``,
``UnicodeDecodeError``, a driver error or a wrong answer.

Some rows never reach the wrapper: the stock `SqliteSaver` parses the
metadata column itself (``json.loads``) and SQLite's ``json_extract`` runs
the filters. Those cases are documented below (what the bare saver raises), and
`SealedSaver` turns the inner saver's failure into `UnreadableRowError`
(docs/fuzzing.md, F15). The findings in secure_serde/sealing/ (F11 to F14)
are fixed, and each test here failed before its fix with the exception it
names in docs/fuzzing.md.
"""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.checkpoint.sqlite import SqliteSaver

from secure_serde import (
    BindingError,
    DecryptionError,
    MetadataDowngradeError,
    SealedSaver,
    SecureSerdeError,
    StoreIdentityError,
    UnreadableRowError,
)
from secure_serde.sealing import audit_sealed
from secure_serde.sealing._index import matches
from secure_serde.stores import store_thread_ids
from tests.serdes_support import dropin_serde, sealed_sqlite

KEY = b"hostile-cells-key-0123456789abcd"
RECORD = "__secure_serde__"
IDENTITY = "__secure_serde_store__"
USERS = {"a": "alice", "b": "bob"}
# Errors that must never escape a reader (what the stock saver and SQLite raise today).
UNTYPED = (RecursionError, UnicodeDecodeError, sqlite3.Error, AttributeError, TypeError)


@contextmanager
def sealed(db: Path) -> Iterator[SealedSaver]:
    with sealed_sqlite(
        db, dropin_serde(KEY), indexed_metadata=["user_id"], plaintext_metadata=["tenant"]
    ) as saver:
        yield saver


def _checkpoint(step: int) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"messages": [f"hello {step}"], "count": step}
    checkpoint["channel_versions"] = {"messages": step + 1, "count": step + 1}
    return checkpoint


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Threads ``a`` (alice) and ``b`` (bob): two checkpoints each, with values and writes."""
    path = tmp_path / "store.sqlite"
    with sealed(path) as saver:
        for thread, user in USERS.items():
            config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            for step in range(2):
                checkpoint = _checkpoint(step)
                metadata: Any = {
                    "source": "loop",
                    "step": step,
                    "user_id": user,
                    "tenant": f"{user}-co",
                    "team": f"{user}-team",  # neither indexed nor plaintext: sealed only
                }
                config = saver.put(
                    config,
                    checkpoint,
                    metadata,
                    checkpoint["channel_versions"],
                )
                saver.put_writes(config, [("messages", [f"w{step}"])], "task-1")
    return path


# -- raw rows -------------------------------------------------------------------------------------


def query(db: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute(sql, params).fetchall()


def execute(db: Path, sql: str, params: tuple[Any, ...] = ()) -> None:
    with closing(sqlite3.connect(db)) as conn, conn:
        assert conn.execute(sql, params).rowcount >= 1


def newest_id(db: Path, thread: str) -> str:
    return str(
        query(
            db,
            "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? ORDER BY checkpoint_id DESC",
            (thread,),
        )[0][0]
    )


def metadata_text(db: Path, thread: str) -> str:
    (raw,) = query(
        db, "SELECT metadata FROM checkpoints WHERE checkpoint_id = ?", (newest_id(db, thread),)
    )[0]
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def set_metadata(db: Path, thread: str, value: Any) -> None:
    execute(
        db,
        "UPDATE checkpoints SET metadata = ? WHERE checkpoint_id = ?",
        (value, newest_id(db, thread)),
    )


def set_metadata_sql(db: Path, thread: str, expression: str) -> None:
    execute(
        db,
        f"UPDATE checkpoints SET metadata = {expression} WHERE checkpoint_id = ?",  # noqa: S608
        (newest_id(db, thread),),
    )


def edit_metadata(db: Path, thread: str, edit: Callable[[dict[str, Any]], None]) -> None:
    metadata = json.loads(metadata_text(db, thread))
    edit(metadata)
    set_metadata(db, thread, json.dumps(metadata).encode())


def prepend_key(db: Path, thread: str, key: str, value: Any) -> None:
    """A duplicate key *before* the one the saver wrote: json_extract reads it, json.loads not."""
    text = metadata_text(db, thread)
    assert text.startswith("{")
    set_metadata(db, thread, f"{{{json.dumps(key)}: {json.dumps(value)}, {text[1:]}".encode())


def append_key(db: Path, thread: str, key: str, value: Any) -> None:
    """A duplicate key *after* the one the saver wrote: json.loads reads it."""
    text = metadata_text(db, thread)
    assert text.endswith("}")
    set_metadata(db, thread, f"{text[:-1]}, {json.dumps(key)}: {json.dumps(value)}}}".encode())


def record_of(db: Path, thread: str) -> str:
    return str(json.loads(metadata_text(db, thread))[RECORD])


def identity_text(db: Path) -> str:
    (raw,) = query(db, "SELECT metadata FROM checkpoints WHERE thread_id = ?", (IDENTITY,))[0]
    return str(json.loads(raw)[IDENTITY])


def write_cell(db: Path, thread: str) -> bytes:
    return bytes(query(db, "SELECT value FROM writes WHERE thread_id = ? LIMIT 1", (thread,))[0][0])


def set_writes(db: Path, thread: str, value: Any) -> None:
    execute(db, "UPDATE writes SET value = ? WHERE thread_id = ?", (value, thread))


def thread_of(found: Any) -> str:
    return str(found.config["configurable"]["thread_id"])


# -- the readers ----------------------------------------------------------------------------------


def get_b(saver: SealedSaver) -> Any:
    return saver.get_tuple({"configurable": {"thread_id": "b"}})


def list_all(saver: SealedSaver) -> Any:
    return list(saver.list(None))


def list_b(saver: SealedSaver) -> Any:
    return list(saver.list({"configurable": {"thread_id": "b"}}))


def filter_indexed(saver: SealedSaver) -> Any:
    return list(saver.list(None, filter={"user_id": "bob"}))


def filter_plaintext(saver: SealedSaver) -> Any:
    return list(saver.list(None, filter={"tenant": "bob-co"}))


def filter_unindexed(saver: SealedSaver) -> Any:
    return list(saver.list(None, filter={"team": "bob-team"}))


READERS: dict[str, Callable[[SealedSaver], Any]] = {
    "get_tuple": get_b,
    "list": list_all,
    "list(thread)": list_b,
    "list(filter=indexed)": filter_indexed,
    "list(filter=plaintext)": filter_plaintext,
    "list(filter=unindexed)": filter_unindexed,
}


def meta(found: Any) -> dict[str, Any]:
    """A tuple's metadata as a plain dict (its keys here are the application's own)."""
    return dict(found.metadata)


def assert_audit_finds_b(db: Path, error: type[Exception]) -> None:
    with sealed(db) as saver:
        report = audit_sealed(saver)
    found = {(f.thread_id, f.error) for f in report.findings}
    assert ("b", error.__name__) in found, report.findings
    assert not [f for f in report.findings if f.thread_id == "a"], report.findings
    assert report.checkpoints == 4


def assert_thread_a_reads_back(db: Path) -> None:
    with sealed(db) as saver:
        found = saver.get_tuple({"configurable": {"thread_id": "a"}})
        assert found is not None
        assert meta(found)["user_id"] == "alice"
        assert found.checkpoint["channel_values"] == {"messages": ["hello 1"], "count": 1}
        assert [thread_of(t) for t in saver.list({"configurable": {"thread_id": "a"}})] == [
            "a",
            "a",
        ]


# -- 1. cells the wrapper parses: a typed error for that row --------------------------------------


def _wrong_kind(db: Path) -> None:
    edit_metadata(db, "b", lambda m: m.__setitem__(RECORD, identity_text(db)))


def _truncated_record(db: Path) -> None:
    raw = base64.b64decode(record_of(db, "b"))
    edit_metadata(db, "b", lambda m: m.__setitem__(RECORD, base64.b64encode(raw[:9]).decode()))


def _record_not_base64(db: Path) -> None:
    append_key(db, "b", RECORD, "not base64 at all!")


def _record_not_text(db: Path) -> None:
    edit_metadata(db, "b", lambda m: m.__setitem__(RECORD, 5))


def _record_nested(db: Path) -> None:
    edit_metadata(db, "b", lambda m: m.__setitem__(RECORD, json.loads("[" * 500 + "]" * 500)))


def _record_too_long(db: Path) -> None:
    # One byte of base64 text over the parser's 64 MiB bound: refused before decoding.
    edit_metadata(db, "b", lambda m: m.__setitem__(RECORD, "A" * (64 * 1024 * 1024 + 4)))


def _no_metadata(db: Path) -> None:
    set_metadata(db, "b", None)


def _truncated_write(db: Path) -> None:
    set_writes(db, "b", write_cell(db, "b")[:12])


def _value_cell_as_write(db: Path) -> None:
    cell = bytearray(write_cell(db, "b"))
    cell[4] = 1  # the kind byte: a channel value where a pending write belongs
    set_writes(db, "b", bytes(cell))


def _write_as_text(db: Path) -> None:
    set_writes(db, "b", base64.b64encode(write_cell(db, "b")).decode())


WRAPPER_CASES: dict[str, tuple[Callable[[Path], None], type[Exception]]] = {
    "identity cell as the record": (_wrong_kind, BindingError),
    "truncated record cell": (_truncated_record, BindingError),
    "record text not base64": (_record_not_base64, BindingError),
    "record as a number": (_record_not_text, BindingError),
    "record as nested JSON": (_record_nested, BindingError),
    "no metadata at all": (_no_metadata, BindingError),
    "truncated write cell": (_truncated_write, BindingError),
    "value cell where a write belongs": (_value_cell_as_write, BindingError),
    "write cell stored as TEXT": (_write_as_text, BindingError),
}


@pytest.mark.parametrize("case", sorted(WRAPPER_CASES))
def test_a_hostile_cell_meets_a_typed_error_in_every_reader(db: Path, case: str) -> None:
    mutate, error = WRAPPER_CASES[case]
    mutate(db)
    with sealed(db) as saver, pytest.raises(error):
        get_b(saver)
    for name, reader in READERS.items():
        if case == "no metadata at all" and name in (
            "list(filter=indexed)",
            "list(filter=plaintext)",
        ):
            continue  # nothing left in the row for the inner saver to match (checked below)
        # Only ``error`` passes: another exception escapes, and no exception fails.
        with sealed(db) as saver, pytest.raises(error):
            reader(saver)
    assert_audit_finds_b(db, error)
    assert_thread_a_reads_back(db)


def test_a_record_text_over_its_bound_is_refused_before_decoding(db: Path) -> None:
    """64 MiB and one unit of base64 text in the record entry: refused, and audit goes on."""
    _record_too_long(db)
    with sealed(db) as saver:
        with pytest.raises(BindingError, match="too long"):
            get_b(saver)
        with pytest.raises(BindingError, match="too long"):
            list_all(saver)
        assert {(f.thread_id, f.error) for f in audit_sealed(saver).findings} == {
            ("b", "BindingError")
        }


def test_a_row_without_metadata_is_not_returned_by_an_indexed_filter(db: Path) -> None:
    _no_metadata(db)
    with sealed(db) as saver:
        found = list(saver.list(None, filter={"user_id": "bob"}))
    assert [thread_of(t) for t in found] == ["b"]  # the older checkpoint of b only
    assert all(meta(t)["user_id"] == "bob" for t in found)


def test_a_huge_unsealed_metadata_entry_is_refused_or_ignored(db: Path) -> None:
    """16 MiB of extra metadata in a row: a typed refusal (F13), or the sealed metadata only."""
    edit_metadata(db, "b", lambda m: m.__setitem__("padding", "x" * (16 * 1024 * 1024)))
    with sealed(db) as saver:
        try:
            found = get_b(saver)
        except MetadataDowngradeError:
            findings = {(f.thread_id, f.error) for f in audit_sealed(saver).findings}
            assert findings == {("b", "MetadataDowngradeError")}
            return
        assert found is not None
        assert "padding" not in found.metadata
        assert meta(found)["user_id"] == "bob"
        assert {thread_of(t) for t in saver.list(None, filter={"user_id": "bob"})} == {"b"}
        assert audit_sealed(saver).findings == ()


# -- 2. rows the stock SqliteSaver (or SQLite) cannot read: it raises before the wrapper sees them


def _nested_metadata(db: Path) -> None:
    set_metadata(db, "b", b"[" * 5000 + b"]" * 5000)


def _nested_metadata_entry(db: Path) -> None:
    text = metadata_text(db, "b")
    set_metadata(db, "b", f'{text[:-1]}, "deep": {"[" * 1600}{"]" * 1600}}}'.encode())


def _non_utf8_text(db: Path) -> None:
    set_metadata_sql(db, "b", "CAST(X'7b22ff223a317d' AS TEXT)")


def _non_utf8_blob(db: Path) -> None:
    set_metadata_sql(db, "b", "X'7b22ff223a317d'")


def _non_utf8_write(db: Path) -> None:
    execute(db, "UPDATE writes SET value = CAST(X'ff00fe' AS TEXT) WHERE thread_id = 'b'")


STOCK_CASES: dict[str, tuple[Callable[[Path], None], tuple[type[BaseException], ...]]] = {
    # the stock saver's json.loads, and json_extract's depth limit (1000) under a filter
    "metadata nested 5000 deep": (_nested_metadata, (RecursionError, sqlite3.OperationalError)),
    "a metadata entry nested 1600 deep": (
        _nested_metadata_entry,
        (RecursionError, sqlite3.OperationalError),
    ),
    # the driver decodes TEXT as UTF-8 before the saver sees it
    "non-UTF-8 TEXT metadata": (_non_utf8_text, (sqlite3.OperationalError,)),
    # the stock saver's json.loads of bytes
    "non-UTF-8 BLOB metadata": (_non_utf8_blob, (UnicodeDecodeError,)),
    "non-UTF-8 TEXT write": (_non_utf8_write, (sqlite3.OperationalError,)),
}


@pytest.mark.parametrize("case", sorted(STOCK_CASES))
def test_the_stock_sqlite_saver_raises_before_the_wrapper_sees_the_row(db: Path, case: str) -> None:
    """What the bare saver does with the row: the wrapper gets no row to check (reported, F15)."""
    mutate, raised = STOCK_CASES[case]
    mutate(db)
    with closing(sqlite3.connect(db, check_same_thread=False)) as conn:
        bare = SqliteSaver(conn)
        with pytest.raises(raised):
            bare.get_tuple({"configurable": {"thread_id": "b"}})
        with pytest.raises(raised):
            list(bare.list(None))


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("case", sorted(STOCK_CASES))
def test_a_row_the_stock_saver_cannot_read_meets_a_typed_error(
    db: Path, case: str, reader: str
) -> None:
    STOCK_CASES[case][0](db)
    with sealed(db) as saver:
        try:
            READERS[reader](saver)
        except SecureSerdeError:
            return
    # A filter the row does not match never reads it; the row itself must still be refused
    # with a typed error when it is read.
    with sealed(db) as saver, pytest.raises(SecureSerdeError):
        get_b(saver)


@pytest.mark.parametrize("case", sorted(STOCK_CASES))
def test_audit_reports_a_row_the_stock_saver_cannot_read_and_goes_on(db: Path, case: str) -> None:
    STOCK_CASES[case][0](db)
    with sealed(db) as saver:
        # Thread by thread (the CLI reads the ids from the table): one unreadable thread is a
        # finding. In one list(None), the stock saver's failure ends the listing, typed.
        report = audit_sealed(saver, thread_ids=store_thread_ids(db))
        with pytest.raises(UnreadableRowError):
            audit_sealed(saver)
    assert [f.thread_id for f in report.findings] == ["b"]


# -- 3. finding F11: metadata that is not a JSON object -------------------------------------------


@pytest.mark.parametrize("reader", ["get_tuple", "list", "list(thread)", "audit"])
def test_metadata_that_is_not_an_object_is_a_typed_refusal(db: Path, reader: str) -> None:
    set_metadata(db, "b", b"[1, 2]")
    if reader == "audit":
        assert_audit_finds_b(db, BindingError)
        return
    with sealed(db) as saver, pytest.raises(BindingError):
        READERS[reader](saver)


def test_identity_metadata_that_is_not_an_object_is_a_typed_refusal(db: Path) -> None:
    execute(db, "UPDATE checkpoints SET metadata = ? WHERE thread_id = ?", (b"[1, 2]", IDENTITY))
    with pytest.raises(StoreIdentityError), sealed(db) as saver:
        get_b(saver)


# -- 4. duplicate keys: SQLite's json_extract takes the first, json.loads the last ----------------


def assert_filter_holds(saver: SealedSaver, wanted: dict[str, Any]) -> list[str]:
    """Every row a filtered list returns satisfies it on the sealed metadata, or a typed error."""
    try:
        found = list(saver.list(None, filter=wanted))
    except SecureSerdeError:
        return []
    for row in found:
        for key, value in wanted.items():
            assert row.metadata.get(key) == value, (thread_of(row), key, row.metadata.get(key))
    return [thread_of(row) for row in found]


def test_a_duplicate_index_token_never_returns_another_users_row(db: Path) -> None:
    alice = str(json.loads(metadata_text(db, "a"))["user_id"])
    prepend_key(db, "b", "user_id", alice)  # json_extract: alice's token; json.loads: bob's
    with sealed(db) as saver:
        assert "b" not in assert_filter_holds(saver, {"user_id": "alice"})
        # The row is hidden from bob's filter: hiding, like deleting, is left (SECURITY.md).
        assert set(assert_filter_holds(saver, {"user_id": "bob"})) <= {"b"}
        found = get_b(saver)
        assert found is not None
        assert meta(found)["user_id"] == "bob"


def test_a_duplicate_plaintext_key_never_returns_another_tenants_row(db: Path) -> None:
    prepend_key(db, "b", "tenant", "alice-co")  # json_extract: alice-co; json.loads: bob-co
    with sealed(db) as saver:
        assert "b" not in assert_filter_holds(saver, {"tenant": "alice-co"})


def test_two_record_entries_the_last_of_which_is_the_rows_own_read_as_written(db: Path) -> None:
    prepend_key(db, "b", RECORD, record_of(db, "a"))
    with sealed(db) as saver:
        found = get_b(saver)
        assert found is not None
        assert meta(found)["user_id"] == "bob"
        assert assert_filter_holds(saver, {"user_id": "bob"}) == ["b", "b"]
        assert audit_sealed(saver).findings == ()


def test_two_record_entries_the_last_of_which_is_another_rows_are_refused(db: Path) -> None:
    append_key(db, "b", RECORD, record_of(db, "a"))
    with sealed(db) as saver:
        with pytest.raises((BindingError, DecryptionError)):
            get_b(saver)
        with pytest.raises((BindingError, DecryptionError)):
            list(saver.list(None))
        assert assert_filter_holds(saver, {"user_id": "alice"}) == ["a", "a"]
        assert {(f.thread_id, f.error) for f in audit_sealed(saver).findings} <= {
            ("b", "BindingError"),
            ("b", "DecryptionError"),
        }


# -- 5. finding F13: a stored encoding the saver did not write is read, not refused ---------------


def _moved_token(db: Path) -> None:
    alice = str(json.loads(metadata_text(db, "a"))["user_id"])
    edit_metadata(db, "b", lambda m: m.__setitem__("user_id", alice))


def _extra_key(db: Path) -> None:
    edit_metadata(db, "b", lambda m: m.__setitem__("user_email", "mallory@example.com"))


@pytest.mark.parametrize("mutate", [_moved_token, _extra_key], ids=["moved token", "extra key"])
def test_a_non_canonical_metadata_encoding_is_refused(
    db: Path, mutate: Callable[[Path], None]
) -> None:
    mutate(db)
    with sealed(db) as saver, pytest.raises(SecureSerdeError):
        get_b(saver)


# -- 6. finding F14: canonical() is unbounded in depth --------------------------------------------


def test_matches_on_deeply_nested_metadata_is_bounded() -> None:
    deep = json.loads("[" * 600 + "]" * 600)  # what the stock saver's json.loads accepts
    with suppress(SecureSerdeError):
        assert matches({"k": deep}, {"k": 1}) is False


def test_every_reader_is_checked(db: Path) -> None:
    """The matrix above covers the issue's readers; a reader dropped from it fails here."""
    assert set(READERS) >= {"get_tuple", "list", "list(filter=indexed)"}
    with sealed(db) as saver:
        for name, reader in READERS.items():
            got = reader(saver)
            assert got, name
        assert audit_sealed(saver).clean
