"""rewrap on real SQLite stores written by real graphs: rotation, migration, live use, failures."""

from __future__ import annotations

import pickle
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as BuiltinSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import (
    ConfigurationError,
    EncryptedSerializer,
    Migration,
    PickleRefusedError,
    PlaintextRefusedError,
    RewrapProgress,
    rewrap,
)
from secure_serde.ciphers import EnvKeyCipher, KeyRotationCipher
from secure_serde.stores import SqliteStore, Swap
from tests.passes.live_writer import live_writer
from tests.passes.rewrap_support import (
    A_AND_B,
    KEY_A,
    KEY_B,
    KEY_C,
    SECRET,
    KeyEnv,
    decoded,
    header_key_ids,
    histories,
    key_id,
    rotation_matrix,
    rotation_serde,
    run_cli,
    run_turns,
    sqlite_graph,
)
from tests.planted import PlantedPickle

STAGE3_ENV = KeyEnv(env_key=KEY_A, keyring={"primary": "b", "keys": {"b": KEY_B}})


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "checkpoints.sqlite"


@pytest.mark.parametrize("via", ["api", "cli"])
def test_tink_staged_rotation_on_sqlite(store_path: Path, tmp_path: Path, via: str) -> None:
    def open_graph(serde: EncryptedSerializer) -> AbstractContextManager[Any]:
        return sqlite_graph(store_path, serde)

    def rewrap_step(serde: EncryptedSerializer) -> None:
        if via == "api":
            report = rewrap(store_path, serde, batch_size=7)
            assert report.ok
            assert report.rewrapped > 0
            assert report.current > 0
            return
        # The operator's view: LANGGRAPH_AES_KEY is still A (id "env"), the keyring file
        # adds B and promotes it. Labels differ from the graph's ("a"): ids are derived.
        proc = run_cli(STAGE3_ENV, tmp_path, "rewrap", str(store_path), "--batch-size", "7")
        assert proc.returncode == 0, proc.stderr
        assert f"primary: aesgcm/{key_id(KEY_B)} (b)" in proc.stdout
        assert f"rewrapped from aesgcm/{key_id(KEY_A)} (env)" in proc.stdout

    rotation_matrix(open_graph, store_path, rewrap_step)


def _fill(path: Path, serde: Any, threads: Sequence[str], turns: int = 3) -> dict[str, Any]:
    with sqlite_graph(path, serde) as graph:
        for thread in threads:
            run_turns(graph, thread, turns)
        return histories(graph, threads)


def test_second_run_writes_nothing_and_dry_run_writes_nothing(store_path: Path) -> None:
    _fill(store_path, rotation_serde({"a": KEY_A}, "a"), ["x", "y"])
    target = rotation_serde(A_AND_B, "b")
    before = store_path.read_bytes()
    dry = rewrap(store_path, target, dry_run=True)
    assert dry.dry_run
    assert dry.ok
    assert dry.rewrapped == dry.scanned > 0
    assert dict(dry.sources) == {f"aesgcm/{key_id(KEY_A)}": dry.scanned}
    assert header_key_ids(store_path) == {key_id(KEY_A): dry.scanned}
    assert store_path.read_bytes() == before

    first = rewrap(store_path, target, batch_size=3)
    assert (first.rewrapped, first.current) == (dry.scanned, 0)
    snapshot = decoded(store_path, target)
    second = rewrap(store_path, target, batch_size=3)
    assert (second.rewrapped, second.current, second.failure_count) == (0, dry.scanned, 0)
    # Same bytes: a second run rewrites nothing, so no new nonce anywhere.
    with SqliteStore(store_path) as store:
        third_view = {(c.ref.table, c.ref.key): c.data for c in store.iter_cells()}
    rewrap(store_path, target)
    with SqliteStore(store_path) as store:
        assert {(c.ref.table, c.ref.key): c.data for c in store.iter_cells()} == third_view
    assert decoded(store_path, target) == snapshot


class _InterferingStore(SqliteStore):
    """A real SqliteStore, with an application write landing between rewrap's read and swap."""

    def __init__(self, path: Path, writer_serde: EncryptedSerializer, new_value: Any) -> None:
        super().__init__(path)
        self._writer = writer_serde
        self._new_value = new_value
        self.target: Any = None

    def compare_and_swap(self, swaps: Sequence[Swap]) -> list[bool]:
        if self.target is None and swaps:
            ref = swaps[0].cell.ref
            self.target = ref
            tag, data = self._writer.dumps_typed(self._new_value)
            spec = self.table(ref.table)
            where = " AND ".join(f"{col} = ?" for col in spec.key_columns)
            with sqlite3.connect(self.location) as other:
                other.execute(
                    f"UPDATE {spec.name} SET type = ?, {spec.data_column} = ? WHERE {where}",  # noqa: S608
                    (tag, data, *ref.key_values),
                )
        return super().compare_and_swap(swaps)


@pytest.mark.parametrize("writer_primary", ["b", "a"], ids=["writer-on-B", "lagging-writer-on-A"])
def test_a_row_changed_between_read_and_swap_is_never_clobbered(
    store_path: Path, writer_primary: str
) -> None:
    _fill(store_path, rotation_serde({"a": KEY_A}, "a"), ["x"])
    target = rotation_serde(A_AND_B, "b")
    writer = rotation_serde(A_AND_B, writer_primary)
    new_value = {"written": "concurrently", "secret": SECRET}
    store = _InterferingStore(store_path, writer, new_value)
    with store:
        report = rewrap(store, target, batch_size=4)
    assert report.ok
    assert report.conflicts == 1
    values = decoded(store_path, target)
    assert values[(store.target.table, store.target.key)] == new_value
    # The row is not left under A either, even when the concurrent writer used A.
    assert header_key_ids(store_path) == {key_id(KEY_B): report.scanned}
    if writer_primary == "b":
        assert report.rewrapped == report.scanned - 1
        assert report.current == 1
    else:
        assert report.rewrapped == report.scanned
        assert report.current == 0


def test_live_writer_keeps_running_and_loses_nothing(store_path: Path) -> None:
    base_threads = [f"base-{i}" for i in range(12)]
    _fill(store_path, rotation_serde({"a": KEY_A}, "a"), base_threads, turns=4)
    stage3 = rotation_serde(A_AND_B, "b")
    with sqlite_graph(store_path, stage3) as graph:
        original = histories(graph, base_threads)

    def pick_thread(turn: int) -> str:
        return f"live-{turn % 3}" if turn % 2 else base_threads[turn % 12]

    with live_writer(
        lambda: sqlite_graph(store_path, rotation_serde(A_AND_B, "b")), pick_thread, min_turns=6
    ) as writer:
        writer.wait_for(2)
        batches = 0

        def interleave(_: RewrapProgress) -> None:
            # For the first batches, wait for the writer to finish another turn, so that
            # writes certainly land between rewrap's batches, whatever the machine's speed.
            nonlocal batches
            batches += 1
            if batches <= 8:
                writer.wait_for(len(writer.done) + 1)

        started = writer.mark()
        report = rewrap(store_path, stage3, batch_size=2, progress=interleave)
        during = writer.since(started)
    assert report.ok, report.failures
    assert batches > 8
    assert len(during) >= 8, "the writer made no progress while rewrap ran"

    assert set(header_key_ids(store_path)) == {key_id(KEY_B)}
    with sqlite_graph(store_path, rotation_serde({"b": KEY_B}, "b")) as graph:
        now = histories(graph, base_threads)
        touched = {t for t, _ in writer.done}
        for thread in base_threads:
            old, count = original[thread], len(original[thread])
            if thread not in touched:
                assert now[thread] == old
                continue
            # The old checkpoints are all still there, below the writer's new ones. Only the
            # task list of the one that waited at the interrupt changed: it got resumed.
            assert now[thread][-count + 1 :] == old[1:]
            newest_old = now[thread][-count]
            assert (newest_old.values, newest_old.config) == (old[0].values, old[0].config)
        writer.check_turns_kept(graph, base_turns=4)


def test_legacy_and_plaintext_rows_become_v1(store_path: Path, tmp_path: Path) -> None:
    builtin = BuiltinSerializer.from_pycryptodome_aes(key=KEY_A.encode())
    legacy = _fill(store_path, builtin, ["legacy-0", "legacy-1"])
    plain = _fill(store_path, JsonPlusSerializer(), ["plain-0"])
    kinds = header_key_ids(store_path)
    assert kinds["aes"] > 0
    assert kinds["plain"] > 0
    assert len(kinds) == 2

    # Without the flag: legacy rows move, plaintext rows are listed and left alone.
    proc = run_cli(STAGE3_ENV, tmp_path, "rewrap", str(store_path), "--batch-size", "5")
    assert proc.returncode == 1, proc.stderr
    assert PlaintextRefusedError.__name__ in proc.stdout
    assert "thread_id='plain-0'" in proc.stdout
    assert "thread_id='legacy" not in proc.stdout
    assert header_key_ids(store_path) == {key_id(KEY_B): kinds["aes"], "plain": kinds["plain"]}

    proc = run_cli(STAGE3_ENV, tmp_path, "rewrap", str(store_path), "--allow-plaintext")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"rewrapped from plaintext: {kinds['plain']}" in proc.stdout
    assert header_key_ids(store_path) == {key_id(KEY_B): kinds["aes"] + kinds["plain"]}
    # Fully v1 now: the strict serializer, with no legacy reader and no plaintext, reads all.
    strict = rotation_serde({"b": KEY_B}, "b")
    with sqlite_graph(store_path, strict) as graph:
        assert histories(graph, ["legacy-0", "legacy-1"]) == legacy
        assert histories(graph, ["plain-0"]) == plain


def _plant(path: Path, rows: Sequence[tuple[str, str, bytes]]) -> None:
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx,"
            " channel, type, value) VALUES (?, '', 'planted-ckpt', 'task', 0, 'ch', ?, ?)",
            rows,
        )


def test_pickle_rows_with_unauthenticated_tags_are_refused(store_path: Path) -> None:
    _fill(store_path, rotation_serde({"a": KEY_A}, "a"), ["x"], turns=1)
    PlantedPickle.reset()
    payload = pickle.dumps(PlantedPickle())
    legacy_cipher = BuiltinSerializer.from_pycryptodome_aes(key=KEY_A.encode()).cipher
    _, legacy_blob = legacy_cipher.encrypt(payload)
    _plant(
        store_path,
        [("plain-pickle", "pickle", payload), ("legacy-pickle", "pickle+aes", legacy_blob)],
    )
    target = EncryptedSerializer(
        KeyRotationCipher(A_AND_B, "b", legacy_key="a"), migration=Migration(plaintext=True)
    )

    report = rewrap(store_path, target, migration=Migration(plaintext=True))
    assert {f.ref.thread_id: f.error for f in report.failures} == {
        "plain-pickle": PickleRefusedError,
        "legacy-pickle": PickleRefusedError,
    }
    assert all(f.reason.startswith("PickleRefusedError: ") for f in report.failures)
    report = rewrap(store_path, target, migration=Migration(plaintext=True, legacy_pickle=True))
    assert [f.ref.thread_id for f in report.failures] == ["plain-pickle"]
    assert report.sources == {"aes": 1}
    assert not PlantedPickle.ran, "rewrap must never unpickle anything"
    with SqliteStore(store_path) as store:
        tags = {c.ref.thread_id: c.type_tag for c in store.iter_cells()}
    assert tags["legacy-pickle"] == "pickle+aesgcm"
    assert tags["plain-pickle"] == "pickle"


def test_undecryptable_rows_are_listed_by_id_never_by_content(
    store_path: Path, tmp_path: Path
) -> None:
    _fill(store_path, rotation_serde({"a": KEY_A}, "a"), ["good-0", "good-1"])
    foreign = rotation_serde({"c": KEY_C}, "c")
    tag, blob = foreign.dumps_typed({"secret": SECRET})
    good_tag, good_blob = rotation_serde({"a": KEY_A}, "a").dumps_typed({"secret": SECRET})
    tampered = bytearray(good_blob)
    tampered[-1] ^= 1
    planted = [
        ("bad-unknown-key", tag, blob),
        ("bad-tampered", good_tag, bytes(tampered)),
        ("bad-truncated", good_tag, good_blob[:20]),
        ("bad-cipher", "msgpack+rot13", good_blob),
    ]
    _plant(store_path, planted)
    with SqliteStore(store_path) as store:
        before = {c.ref.thread_id: c.data for c in store.iter_cells() if "bad" in c.ref.thread_id}

    proc = run_cli(STAGE3_ENV, tmp_path, "rewrap", str(store_path), "--batch-size", "4")
    assert proc.returncode == 1, proc.stderr
    listed = [line for line in proc.stdout.splitlines() if "bad-" in line]
    assert len(listed) == 4
    for line in listed:
        assert line.strip().startswith("writes thread_id='bad-")
        assert "checkpoint_id='planted-ckpt'" in line
        assert "task_id='task'" in line
    assert f"UnknownKeyError: no configured key has key id {key_id(KEY_C)}" in proc.stdout
    assert "UnknownCipherError" in proc.stdout
    assert "4 row(s) could not be rewrapped" in proc.stderr
    output = proc.stdout + proc.stderr
    for secret in (SECRET, KEY_A, KEY_B, KEY_C, "078-05"):
        assert secret not in output
    # The failed rows are left exactly as they were; every other row moved to B.
    with SqliteStore(store_path) as store:
        after = {c.ref.thread_id: c.data for c in store.iter_cells() if "bad" in c.ref.thread_id}
    assert after == before
    counts = header_key_ids(store_path)
    assert counts[key_id(KEY_A)] == 2  # tampered and truncated still carry A's header
    assert counts[key_id(KEY_C)] == 1

    # --verify also catches a damaged row that already carries the primary's header.
    under_b = rotation_serde({"b": KEY_B}, "b").dumps_typed({"v": 1})
    # Flip a bit of the tag: overwriting the last byte would be no change once in 256 runs.
    damaged = under_b[1][:-1] + bytes([under_b[1][-1] ^ 1])
    _plant(store_path, [("bad-under-b", under_b[0], damaged)])
    plain = run_cli(STAGE3_ENV, tmp_path, "rewrap", str(store_path))
    verified = run_cli(STAGE3_ENV, tmp_path, "rewrap", str(store_path), "--verify")
    assert "bad-under-b" not in plain.stdout
    assert "writes thread_id='bad-under-b'" in verified.stdout


def test_rewrap_takes_a_cipher_or_a_serializer(store_path: Path) -> None:
    _fill(store_path, EncryptedSerializer(EnvKeyCipher(KEY_A)), ["x"], turns=2)
    # Two ciphers reading the same cipher name cannot both be asked: say so, write nothing.
    with pytest.raises(ConfigurationError, match="one KeyRotationCipher"):
        rewrap(store_path, KeyRotationCipher({"b": KEY_B}, "b"), decrypt_only=[EnvKeyCipher(KEY_A)])
    assert set(header_key_ids(store_path)) == {key_id(KEY_A)}
    # A bare cipher holding both keys, then a serializer: both targets work.
    report = rewrap(store_path, KeyRotationCipher(A_AND_B, "b"), batch_size=3)
    assert report.ok
    assert report.rewrapped == report.scanned > 0
    assert report.primary == f"aesgcm/{key_id(KEY_B)}"
    report = rewrap(store_path, rotation_serde({"a": KEY_A, "b": KEY_B}, "a"))
    assert report.ok
    assert report.rewrapped == report.scanned
    assert set(header_key_ids(store_path)) == {key_id(KEY_A)}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"batch_size": 0}, "batch_size"), ({"workers": 2}, "PostgreSQL stores only")],
)
def test_bad_arguments_are_configuration_errors(
    store_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    _fill(store_path, rotation_serde({"a": KEY_A}, "a"), ["x"], turns=1)
    with pytest.raises(ConfigurationError, match=message):
        rewrap(store_path, rotation_serde(A_AND_B, "b"), **kwargs)
    assert set(header_key_ids(store_path)) == {key_id(KEY_A)}
