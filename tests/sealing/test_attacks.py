"""The 0.3.0 review's attacks on binding, each run as an attacker who can write the database.

Every test here broke 0.3.0 (the review reproduced each one): a forgery sealed by routine
maintenance, a history silently cut, a thread transplanted between stores under one key, a
misconfigured saver that wrote plaintext, and a chosen-plaintext compression attack on a secret.
With `SealedSaver`, each is refused with a typed error, and nothing is sealed or returned.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from operator import add
from pathlib import Path
from typing import Annotated, Any

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from typing_extensions import TypedDict

from secure_serde import (
    BindingError,
    BlindIndexError,
    ConfigurationError,
    HistoryError,
    SealedSaver,
    StoreIdentityError,
    rewrap,
)
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.stores import StoreError, open_store
from tests.graphs_support import linear_graph
from tests.serdes_support import dropin_serde, sealed_sqlite

KEY = b"sealing-attacks-key-0123456789ab"
STORE_THREAD = "__secure_serde_store__"


def _extend(state: list[str], writes: Any) -> list[str]:
    out = list(state)
    for batch in writes:
        out.extend(batch)
    return out


class LogState(TypedDict):
    log: Annotated[list[str], DeltaChannel(_extend, snapshot_frequency=3)]
    notes: Annotated[list[str], add]


def _step(state: LogState) -> dict[str, Any]:
    n = len(state["log"])
    return {"log": [f"entry-{n}"], "notes": [f"note-{n}"]}


@contextmanager
def sqlite_saver(path: Path, **options: Any) -> Iterator[SealedSaver]:
    with sealed_sqlite(path, dropin_serde(KEY), **options) as saver:
        yield saver


def run_log_graph(saver: SealedSaver, thread: str, turns: int) -> dict[str, Any]:
    graph = linear_graph(LogState, ("step", _step), checkpointer=saver)
    config: RunnableConfig = {"configurable": {"thread_id": thread, "user_id": "alice"}}
    result: dict[str, Any] = {}
    for _ in range(turns):
        result = graph.invoke({"log": [], "notes": []}, config)
    return result


def rows(path: Path, query: str, params: tuple[Any, ...] = ()) -> list[Any]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(query, params).fetchall()


def execute(path: Path, query: str, params: tuple[Any, ...] = ()) -> int:
    with closing(sqlite3.connect(path)) as conn, conn:
        return conn.execute(query, params).rowcount


def checkpoint_ids(path: Path, thread: str) -> list[str]:
    found = rows(
        path,
        "SELECT checkpoint_id FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ''"
        " ORDER BY checkpoint_id",
        (thread,),
    )
    return [r[0] for r in found]


# -- 1. strip the record, forge another, and wait for a pass ---------------------------------


def test_a_stripped_record_seal_is_refused_by_every_reader_and_pass(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite"
    with sqlite_saver(db) as saver:
        run_log_graph(saver, "t", 3)
    newest = checkpoint_ids(db, "t")[-1]
    (metadata,) = rows(db, "SELECT metadata FROM checkpoints WHERE checkpoint_id = ?", (newest,))[0]
    forged = json.loads(metadata)
    assert "__secure_serde__" in forged
    del forged["__secure_serde__"]
    forged["user_id"] = "mallory"  # a plaintext key added, as the review did
    assert execute(
        db,
        "UPDATE checkpoints SET metadata = ? WHERE checkpoint_id = ?",
        (json.dumps(forged), newest),
    )

    with sqlite_saver(db) as saver:
        config: RunnableConfig = {"configurable": {"thread_id": "t"}}
        with pytest.raises(BindingError, match="not sealed text"):
            saver.get_tuple(config)
        with pytest.raises(BindingError):
            list(saver.list(config))
        # The passes that rewrite rows refuse before writing anything.
        with pytest.raises(BindingError):
            saver.copy_thread("t", "copy")
        assert saver.get_tuple({"configurable": {"thread_id": "copy"}}) is None
    # Rotation lists the forged row and leaves it; it never seals it. The 0.3 passes over the
    # table layout refuse a sealed store outright.
    report = rewrap(db, EnvKeyCipher(KEY))
    assert report.failure_count >= 1
    assert any(newest in str(failure) for failure in report.failures)
    with pytest.raises(StoreError, match="SealedSaver"):
        open_store(db)
    # Nothing above put a seal back on the forged row.
    (after,) = rows(db, "SELECT metadata FROM checkpoints WHERE checkpoint_id = ?", (newest,))[0]
    assert "__secure_serde__" not in json.loads(after)


def test_an_older_seal_put_back_over_a_newer_record_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite"
    with sqlite_saver(db) as saver:
        run_log_graph(saver, "t", 3)
    ids = checkpoint_ids(db, "t")
    (old_metadata,) = rows(
        db, "SELECT metadata FROM checkpoints WHERE checkpoint_id = ?", (ids[1],)
    )[0]
    execute(
        db, "UPDATE checkpoints SET metadata = ? WHERE checkpoint_id = ?", (old_metadata, ids[-1])
    )
    with sqlite_saver(db) as saver, pytest.raises(BindingError):
        saver.get_tuple({"configurable": {"thread_id": "t"}})


def test_a_channel_re_pointed_at_an_older_value_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite"
    with sqlite_saver(db) as saver:
        run_log_graph(saver, "t", 3)
    ids = checkpoint_ids(db, "t")
    plain = JsonPlusSerializer()
    (type_old, blob_old) = rows(
        db, "SELECT type, checkpoint FROM checkpoints WHERE checkpoint_id = ?", (ids[2],)
    )[0]
    (type_new, blob_new) = rows(
        db, "SELECT type, checkpoint FROM checkpoints WHERE checkpoint_id = ?", (ids[-1],)
    )[0]
    older = plain.loads_typed((type_old, blob_old))
    newer = plain.loads_typed((type_new, blob_new))
    assert older["channel_values"]["notes"] != newer["channel_values"]["notes"]
    newer["channel_values"]["notes"] = older["channel_values"]["notes"]
    newer["channel_versions"]["notes"] = older["channel_versions"]["notes"]
    execute(
        db,
        "UPDATE checkpoints SET checkpoint = ? WHERE checkpoint_id = ?",
        (plain.dumps_typed(newer)[1], ids[-1]),
    )
    with sqlite_saver(db) as saver, pytest.raises(BindingError):
        saver.get_tuple({"configurable": {"thread_id": "t"}})


# -- 2. silent history truncation --------------------------------------------------------------


def test_a_cut_parent_pointer_raises_instead_of_a_shorter_history(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite"
    with sqlite_saver(db) as saver:
        run_log_graph(saver, "t", 3)
    ids = checkpoint_ids(db, "t")
    execute(
        db, "UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE checkpoint_id = ?", (ids[3],)
    )
    with sqlite_saver(db) as saver:
        with pytest.raises(HistoryError):
            list(saver.list({"configurable": {"thread_id": "t"}}))
        with pytest.raises(HistoryError):
            saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_id": ids[3]}})


def test_a_deleted_ancestor_breaks_delta_history_loudly(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite"
    with sqlite_saver(db) as saver:
        before = run_log_graph(saver, "t", 4)
        # Intact, the DeltaChannel rebuilds its whole log through the sealed walk.
        assert before["log"] == [f"entry-{n}" for n in range(4)]
        graph = linear_graph(LogState, ("step", _step), checkpointer=saver)
        config: RunnableConfig = {"configurable": {"thread_id": "t"}}
        assert graph.get_state(config).values["log"] == before["log"]
    ids = checkpoint_ids(db, "t")
    assert execute(db, "DELETE FROM checkpoints WHERE checkpoint_id = ?", (ids[-3],)) == 1
    with sqlite_saver(db) as saver:
        graph = linear_graph(LogState, ("step", _step), checkpointer=saver)
        with pytest.raises(HistoryError):
            graph.get_state(config)
        with pytest.raises(HistoryError):
            list(graph.get_state_history(config))


def test_prune_and_delete_for_runs_are_not_available_where_the_inner_saver_has_none() -> None:
    # SqliteSaver and InMemorySaver have neither; the wrapper never pretends to.
    saver = SealedSaver(InMemorySaver(), serde=dropin_serde(KEY))
    assert type(saver).prune is InMemorySaver.prune
    assert type(saver).delete_for_runs is InMemorySaver.delete_for_runs
    assert isinstance(saver, SealedSaver)


# -- 3. a thread transplanted between two stores under the same key ----------------------------


def test_rows_copied_from_another_store_under_the_same_key_are_refused(tmp_path: Path) -> None:
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    with sqlite_saver(a) as saver:
        run_log_graph(saver, "t", 2)
    with sqlite_saver(b) as saver:
        run_log_graph(saver, "other", 1)
    with closing(sqlite3.connect(b)) as conn, conn:
        conn.execute("ATTACH DATABASE ? AS a", (str(a),))
        conn.execute("INSERT INTO checkpoints SELECT * FROM a.checkpoints WHERE thread_id = 't'")
        conn.execute("INSERT INTO writes SELECT * FROM a.writes WHERE thread_id = 't'")
    with sqlite_saver(b) as saver:
        with pytest.raises(BindingError):
            saver.get_tuple({"configurable": {"thread_id": "t"}})
        # B's own thread still reads: the refusal is about where the rows came from.
        assert saver.get_tuple({"configurable": {"thread_id": "other"}}) is not None

    # Copying A's identity over B's makes B's own rows fail instead; never a silent read.
    (identity,) = rows(a, "SELECT metadata FROM checkpoints WHERE thread_id = ?", (STORE_THREAD,))[
        0
    ]
    execute(b, "UPDATE checkpoints SET metadata = ? WHERE thread_id = ?", (identity, STORE_THREAD))
    with sqlite_saver(b) as saver, pytest.raises(BindingError):
        saver.get_tuple({"configurable": {"thread_id": "other"}})


def test_a_store_whose_identity_was_deleted_is_refused_not_given_a_new_one(
    tmp_path: Path,
) -> None:
    db = tmp_path / "store.sqlite"
    with sqlite_saver(db) as saver:
        run_log_graph(saver, "t", 1)
    assert execute(db, "DELETE FROM checkpoints WHERE thread_id = ?", (STORE_THREAD,)) == 1
    with pytest.raises(StoreIdentityError, match="restore"), sqlite_saver(db):
        pass
    assert rows(db, "SELECT count(*) FROM checkpoints WHERE thread_id = ?", (STORE_THREAD,)) == [
        (0,)
    ]


def test_a_forged_identity_record_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite"
    with sqlite_saver(db) as saver:
        run_log_graph(saver, "t", 1)
    forged = json.dumps({"__secure_serde_store__": "U1NDMQQACG1zZ3BhY2srYWVzZ2NtAAAA"})
    execute(db, "UPDATE checkpoints SET metadata = ? WHERE thread_id = ?", (forged, STORE_THREAD))
    with pytest.raises(StoreIdentityError), sqlite_saver(db):
        pass


@pytest.mark.parametrize(
    ("value", "detail"),
    [
        (None, "not sealed text"),
        (5, "not sealed text"),
        ("", "too short"),
        ("!!!!", "not valid sealed text"),
        ("U1NDMQQACG1zZ3Bh", "truncated"),
    ],
    ids=["none", "int", "empty", "not-base64", "truncated"],
)
def test_a_damaged_identity_cell_is_refused_saying_what_is_wrong(
    tmp_path: Path, value: object, detail: str
) -> None:
    # A damaged cell is refused as the store identity, but naming the damage: "sealed under
    # other keys" would send an operator to check keys that are fine.
    db = tmp_path / "store.sqlite"
    with sqlite_saver(db) as saver:
        run_log_graph(saver, "t", 1)
    damaged = json.dumps({"__secure_serde_store__": value})
    execute(db, "UPDATE checkpoints SET metadata = ? WHERE thread_id = ?", (damaged, STORE_THREAD))
    with pytest.raises(StoreIdentityError, match=f"malformed: .*{detail}"), sqlite_saver(db):
        pass


# -- 4. refuse before writing ------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [None, JsonPlusSerializer(), "serde"],
    ids=["none", "plain-jsonplus", "not-a-serde"],
)
def test_a_sealed_saver_that_cannot_encrypt_fails_at_construction(bad: Any) -> None:
    inner = InMemorySaver()
    with pytest.raises(ConfigurationError, match="EncryptedSerializer"):
        SealedSaver(inner, serde=bad)
    assert not inner.storage
    assert not inner.blobs


def test_no_option_stores_metadata_in_plaintext_unnamed() -> None:
    with pytest.raises(TypeError):
        SealedSaver(InMemorySaver(), serde=dropin_serde(KEY), seal_metadata=False)  # type: ignore[call-arg]
    with pytest.raises(ConfigurationError, match="list of key names"):
        SealedSaver(InMemorySaver(), serde=dropin_serde(KEY), plaintext_metadata="user_id")
    with pytest.raises(ConfigurationError, match="reserved"):
        SealedSaver(InMemorySaver(), serde=dropin_serde(KEY), indexed_metadata=["__secure_serde__"])


# -- 5. index tokens are checked against the sealed metadata ------------------------------------


def test_a_moved_index_token_is_refused_by_the_filter(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite"
    with sqlite_saver(db, indexed_metadata=["user_id"]) as saver:
        run_log_graph(saver, "t", 1)
        graph = linear_graph(LogState, ("step", _step), checkpointer=saver)
        graph.invoke(
            {"log": [], "notes": []}, {"configurable": {"thread_id": "u", "user_id": "bob"}}
        )
        assert {
            t.config["configurable"]["thread_id"]
            for t in saver.list(None, filter={"user_id": "alice"})
        } == {"t"}
    alice = json.loads(
        rows(db, "SELECT metadata FROM checkpoints WHERE thread_id = 't' LIMIT 1")[0][0]
    )["user_id"]
    assert alice.startswith("ssix2:")
    (bob_id, bob_md) = rows(
        db, "SELECT checkpoint_id, metadata FROM checkpoints WHERE thread_id = 'u' LIMIT 1"
    )[0]
    moved = json.loads(bob_md)
    moved["user_id"] = alice
    execute(
        db,
        "UPDATE checkpoints SET metadata = ? WHERE checkpoint_id = ?",
        (json.dumps(moved), bob_id),
    )
    with sqlite_saver(db, indexed_metadata=["user_id"]) as saver, pytest.raises(BlindIndexError):
        list(saver.list(None, filter={"user_id": "alice"}))


# -- 6. chosen-plaintext compression: a secret in its own channel gains no signal -----------------


class SecretState(TypedDict):
    secret: str
    notes: Annotated[list[str], add]


def _note(state: SecretState) -> dict[str, Any]:
    return {}


def _stored_lengths(inner: InMemorySaver) -> dict[str, int]:
    """Length of every stored cell of channel ``notes`` and ``secret``, summed per channel."""
    sizes: dict[str, int] = {"notes": 0, "secret": 0}
    for (_, _, channel, _), (_, blob) in inner.blobs.items():
        if channel in sizes:
            sizes[channel] += len(blob)
    return sizes


@pytest.mark.parametrize("guess_matches", [True, False])
def test_attacker_chosen_notes_compress_apart_from_the_secret(guess_matches: bool) -> None:
    secret = "tok-7Hq2ZpX9vL4mB8cR"
    guess = secret if guess_matches else "tok-aaaaaaaaaaaaaaaa"
    inner = InMemorySaver()
    saver = SealedSaver(inner, serde=dropin_serde(KEY, compress=True))
    graph = linear_graph(SecretState, ("note", _note), checkpointer=saver)
    filler = "the quick brown fox jumps over the lazy dog " * 30
    graph.invoke(
        {"secret": secret, "notes": [filler + guess * 4]},
        {"configurable": {"thread_id": "t"}},
    )
    sizes = _stored_lengths(inner)
    # The notes channel's stored size depends on the notes alone: the same for a right and a
    # wrong guess (the two parametrizations compare against one expected figure, below).
    baseline = InMemorySaver()
    graph = linear_graph(
        SecretState,
        ("note", _note),
        checkpointer=SealedSaver(baseline, serde=dropin_serde(KEY, compress=True)),
    )
    graph.invoke(
        {"secret": "x" * len(secret), "notes": [filler + guess * 4]},
        {"configurable": {"thread_id": "t"}},
    )
    assert sizes["notes"] == _stored_lengths(baseline)["notes"]
    assert sizes["notes"] > 0
