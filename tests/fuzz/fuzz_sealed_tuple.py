"""atheris harness, target and seeds for a checkpoint tuple read back through `Sealer.open`.

`SealedSaver` trusts nothing its inner saver returns: the record cell in the
metadata, the value cells, the write cells, the parent pointer, the
plaintext and index keys. This target builds a `CheckpointTuple` from the
fuzz input, starting from real tuples of a real sealed store
(``SealedSaver(InMemorySaver())``, two threads, a parent and a child, values,
pending writes, an indexed and a plaintext metadata key), and changes what a
database writer could change:

* metadata: a key set to fuzzed JSON, nested up to 65,535 deep, a huge
  string, the record text over its 64 MiB bound, a mutated record cell,
  another checkpoint's record, a key deleted, or fuzzed JSON in place of
  the whole column;
* channel values and pending writes: real cells mutated (bit flips,
  truncation, insertion, another kind byte, another cell swapped in), values
  of other types, channels or writes dropped or added;
* the parent pointer and the config's ids.

Then `Sealer.open`, and the bookkeeping of list and history over the result:
`ListWalk.take` under a filter on an indexed, a plaintext or an unindexed
key, `unseen_parents`, `History.start`/`step`, `check_complete`,
`latest_per_namespace`, `orphans_after`, and `resealed`/`copy_of`.

The rule: only `SecureSerdeError` escapes. And an open that succeeds must
return exactly what the application wrote at that place: the same metadata,
values and writes (a wrong answer is a finding too).

Metadata that is not a JSON object (the stock `SqliteSaver` hands over
whatever ``json.loads`` returns) raises `AttributeError` in `Sealer.open`:
finding F11 (docs/fuzzing.md), replayed by
tests/sealing/test_hostile_cells.py. Until it is fixed such inputs are
skipped here, so the campaign can look for anything else.

Run (docs/fuzzing.md)::

    PYTHONPATH=. nice -n 19 python tests/fuzz/fuzz_sealed_tuple.py corpus/sealed_tuple \
        -runs=1000000 -seed=1 -max_len=4096 -timeout=1 -rss_limit_mb=2048
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final, cast

if __name__ == "__main__":
    import atheris

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    with atheris.instrument_imports(include=["secure_serde"]):
        import secure_serde.sealing  # noqa: F401 - instrumented before the imports below

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver

from secure_serde import SealedSaver, SecureSerdeError
from secure_serde.sealing import _walks
from secure_serde.sealing._codec import RECORD_KEY, Opened, Sealer
from secure_serde.sealing._identity import IDENTITY_THREAD
from secure_serde.sealing._index import canonical, matches, plan_filter
from tests.fuzz import _fixtures as fx
from tests.fuzz._input import Input

__all__ = ["sealed_tuple", "sealed_tuple_seeds"]

_INDEXED: Final = ("user_id",)
_PLAINTEXT: Final = ("tenant",)
_KEYS: Final = (RECORD_KEY, "user_id", "tenant", "parents", "source", "step", "other")
_HUGE_RECORD: Final = 64 * 1024 * 1024 + 4


@dataclass(frozen=True)
class _Store:
    sealer: Sealer
    tuples: tuple[CheckpointTuple, ...]
    cells: tuple[bytes, ...]
    written: dict[tuple[str, str, str], CheckpointTuple]


@cache
def _store() -> _Store:
    """Two threads of two checkpoints each, sealed by a real `SealedSaver`; read back raw."""
    inner = InMemorySaver()
    saver = SealedSaver(
        inner, serde=fx.env_serde(), indexed_metadata=_INDEXED, plaintext_metadata=_PLAINTEXT
    )
    written: dict[tuple[str, str, str], CheckpointTuple] = {}
    for thread, user in (("t1", "alice"), ("t2", "bob")):
        config: RunnableConfig = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        for step in range(2):
            checkpoint_id = f"1f0{step}0000-0000-6000-8000-{thread}00000000"[:36]
            checkpoint = Checkpoint(
                v=4,
                id=checkpoint_id,
                ts="2026-12-03T00:00:00+00:00",
                channel_values={"messages": [f"hello {step}"], "count": step, "flag": None},
                channel_versions={"messages": step + 1, "count": step + 1, "flag": 1},
                versions_seen={"node": {"messages": step}},
                updated_channels=["messages"],
            )
            metadata = cast(
                CheckpointMetadata,
                {"source": "loop", "step": step, "user_id": user, "tenant": f"{user}-co"},
            )
            config = saver.put(config, checkpoint, metadata, checkpoint["channel_versions"])
            saver.put_writes(config, [("messages", [f"w{step}"]), ("count", step)], "task-a", "")
            saver.put_writes(config, [("__error__", "boom")], "task-b", "~p")
            read = saver.get_tuple(config)
            if read is None:
                raise AssertionError("the sealed store lost a checkpoint")
            written[(thread, "", checkpoint_id)] = read
    tuples = tuple(
        found
        for found in inner.list(None)
        if found.config["configurable"]["thread_id"] != IDENTITY_THREAD
    )
    cells: list[bytes] = []
    for found in tuples:
        cells.extend(v for v in found.checkpoint["channel_values"].values() if isinstance(v, bytes))
        cells.extend(raw for _, _, raw in found.pending_writes or ())
        cells.append(base64.b64decode(_record(found)))
    # The big hostile values are built once, here, in the harness's warm-up call: building
    # one inside a run would count against that run's one-second limit.
    _huge_record()
    for depth in _DEPTHS:
        _deep(depth, True)
        _deep(depth, False)
    return _Store(saver._ready(), tuples, tuple(cells), written)


# -- building a hostile tuple from the input -------------------------------------------------------


def _record(found: CheckpointTuple) -> str:
    return str(cast(dict[str, Any], found.metadata)[RECORD_KEY])


@cache
def _huge_record() -> str:
    """Base64 text one unit over the record's 64 MiB bound, built once (not per input)."""
    return "A" * _HUGE_RECORD


def _json(source: Input) -> Any:
    chunk = source.sized()
    try:
        return json.loads(chunk)
    except (ValueError, RecursionError):
        return chunk.decode("utf-8", "replace")


_DEPTHS: Final = (300, 999, 1000, 1001, 1500, 5000, 65535)


@cache
def _deep(depth: int, as_dict: bool) -> Any:
    """A value nested ``depth`` deep, built once: building it per input costs more than a run."""
    value: Any = None
    for _ in range(depth):
        value = {"k": value} if as_dict else [value]
    return value


def _nested(source: Input) -> Any:
    depth = source.byte()
    as_dict = source.flag()
    if depth >= 0xF0:
        return _deep(_DEPTHS[depth % len(_DEPTHS)], as_dict)
    value: Any = _json(source)
    for _ in range(depth):
        value = {"k": value} if as_dict else [value]
    return value


def _mutated(source: Input, stored: Any, store: _Store) -> Any:
    raw: bytes = stored if isinstance(stored, bytes) else source.pick(store.cells)
    op = source.byte() % 12
    at = (source.byte() << 8 | source.byte()) % (len(raw) + 1)
    if op == 0:
        return raw
    if op == 1 and raw:
        flipped = bytearray(raw)
        flipped[at % len(raw)] ^= 1 << (source.byte() % 8)
        return bytes(flipped)
    if op == 2:
        return raw[:at]
    if op == 3:
        return raw[:at] + source.sized() + raw[at:]
    if op == 4 and len(raw) > 4:
        return raw[:4] + bytes([source.byte()]) + raw[5:]
    if op == 5:
        return source.pick(store.cells)
    if op == 6:
        return source.sized()
    if op == 7:
        return bytearray(raw)
    if op == 8:
        return raw.decode("latin-1")
    if op == 9:
        return _json(source)
    if op == 10 and len(raw) > 7:  # another type tag length
        return raw[:5] + bytes([source.byte(), source.byte()]) + raw[7:]
    return None


def _metadata(source: Input, found: CheckpointTuple, store: _Store) -> Any:
    metadata: dict[str, Any] = dict(found.metadata)
    for _ in range(source.byte() % 4):
        op = source.byte() % 9
        key = source.pick(_KEYS) if source.flag() else source.text()
        if op == 1:
            metadata[key] = _json(source)
        elif op == 2:
            metadata[key] = _nested(source)
        elif op == 3:
            metadata[key] = "x" * (source.byte() << 14)
        elif op == 4:
            metadata[RECORD_KEY] = _huge_record()
        elif op == 5:
            record = base64.b64decode(_record(found))
            mutated = _mutated(source, record, store)
            metadata[RECORD_KEY] = (
                base64.b64encode(mutated).decode("ascii") if isinstance(mutated, bytes) else mutated
            )
        elif op == 6:
            other = source.pick(store.tuples)
            metadata[RECORD_KEY] = _record(other)
        elif op == 7:
            metadata.pop(key, None)
        elif op == 8:
            return _json(source)
    return metadata


def _values(source: Input, found: CheckpointTuple, store: _Store) -> dict[str, Any]:
    values = dict(found.checkpoint["channel_values"])
    for _ in range(source.byte() % 4):
        channel = source.pick(sorted(values) or ["messages"])
        op = source.byte() % 3
        if op == 0 and channel in values:
            values[channel] = _mutated(source, values[channel], store)
        elif op == 1:
            values.pop(channel, None)
        else:
            values[source.text() if source.flag() else channel] = source.pick(store.cells)
    return values


def _writes(source: Input, found: CheckpointTuple, store: _Store) -> list[tuple[str, str, Any]]:
    writes = list(found.pending_writes or ())
    for _ in range(source.byte() % 4):
        op = source.byte() % 4
        if op == 0 and writes:
            at = source.byte() % len(writes)
            task_id, channel, raw = writes[at]
            writes[at] = (task_id, channel, _mutated(source, raw, store))
        elif op == 1 and writes:
            del writes[source.byte() % len(writes)]
        elif op == 2 and writes:
            task_id, channel, raw = writes[source.byte() % len(writes)]
            writes.append((source.text() if source.flag() else task_id, channel, raw))
        else:
            writes.append((source.text(), source.text(), source.pick(store.cells)))
    return writes


def _parent(source: Input, found: CheckpointTuple, store: _Store) -> RunnableConfig | None:
    op = source.byte() % 8
    if op == 0:
        return found.parent_config
    thread = str(found.config["configurable"]["thread_id"])
    ids = {1: None, 2: source.text(), 3: source.byte()}
    if op in ids:
        checkpoint_id = ids[op]
    elif op == 4:
        checkpoint_id = str(source.pick(store.tuples).config["configurable"]["checkpoint_id"])
    elif op == 5:
        return None
    elif op == 6:
        return cast(RunnableConfig, {})
    else:
        return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return {
        "configurable": {"thread_id": thread, "checkpoint_ns": "", "checkpoint_id": checkpoint_id}
    }


def _config(source: Input, found: CheckpointTuple, store: _Store) -> RunnableConfig:
    configurable = dict(found.config["configurable"])
    op = source.byte() % 6
    if op == 1:
        configurable["checkpoint_id"] = source.pick(store.tuples).config["configurable"][
            "checkpoint_id"
        ]
    elif op == 2:
        configurable["thread_id"] = source.text()
    elif op == 3:
        configurable["checkpoint_ns"] = source.text()
    elif op == 4:
        configurable.pop("checkpoint_id", None)
    elif op == 5:
        configurable["thread_id"] = source.pick(("t1", "t2", IDENTITY_THREAD))
    return {"configurable": configurable}


# -- the target ------------------------------------------------------------------------------------


def _filter(source: Input) -> dict[str, Any] | None:
    op = source.byte() % 5
    if op == 0:
        return None
    key = ("user_id", "tenant", "source", "other")[op - 1]
    return {key: source.pick(("alice", "bob", "alice-co", "loop", 1, None))}


def _check_answer(opened: Opened, store: _Store) -> None:
    """A successful open returns exactly what the application wrote at that place."""
    configurable = opened.tuple.config["configurable"]
    key = (
        str(configurable["thread_id"]),
        str(configurable.get("checkpoint_ns", "")),
        str(configurable.get("checkpoint_id")),
    )
    written = store.written.get(key)
    if written is None:
        raise AssertionError(f"a checkpoint opened at {key}, where none was written")
    if opened.tuple.metadata != written.metadata:
        raise AssertionError("an opened checkpoint's metadata is not the sealed metadata")
    values = opened.tuple.checkpoint["channel_values"]
    if values != written.checkpoint["channel_values"]:
        raise AssertionError("an opened checkpoint's values are not the values written there")
    expected = list(written.pending_writes or ())
    if any(write not in expected for write in opened.tuple.pending_writes or ()):
        raise AssertionError("an opened checkpoint holds a write that was not written there")


def _bookkeeping(source: Input, store: _Store, found: CheckpointTuple, opened: Opened) -> None:
    sealer = store.sealer
    wanted = _filter(source)
    plan = plan_filter(wanted, sealer.identity.index, _INDEXED, _PLAINTEXT)
    limit = source.pick((None, 1, 2))
    walk = _walks.ListWalk(sealer, plan, None if source.flag() else found.config, limit)
    took = walk.take(found)
    # Finding F12: a plaintext key's filter is left to the inner saver and not checked
    # against the sealed metadata (tests/sealing/test_hostile_cells.py); skipped here.
    checked = {k: v for k, v in (wanted or {}).items() if k not in _PLAINTEXT}
    if took is not None and not matches(took.tuple.metadata, checked):
        raise AssertionError("a filtered list returned a row its sealed metadata does not match")
    list(walk.unseen_parents(complete=source.flag()))
    history = _walks.History(source.pick((["messages"], ["count", "messages"], ["gone"])))
    if history.start(opened) is not None:
        history.step(opened)
    history.result()
    rows = [(found, opened)]
    for other in store.tuples[: source.byte() % 4]:
        rows.append((other, sealer.open(other, channels=())))
    if source.flag():
        _walks.check_complete(rows)
    _walks.latest_per_namespace(rows)
    _walks.orphans_after(rows, {_walks.key_of(found)})
    if source.flag():
        _walks.resealed(sealer, found, opened, detached=source.flag())
    else:
        _walks.copy_of(sealer, found, opened, source.pick(("t3", "t1")))


def sealed_tuple(data: bytes) -> None:
    """A hostile checkpoint tuple, as an inner saver could return it, through `Sealer.open`."""
    store = _store()
    source = Input(data)
    base = store.tuples[source.byte() % len(store.tuples)]
    metadata = _metadata(source, base, store)
    if not isinstance(metadata, Mapping):
        return  # finding F11: AttributeError in Sealer.open (tests/sealing/test_hostile_cells.py)
    checkpoint = cast(
        Checkpoint, {**base.checkpoint, "channel_values": _values(source, base, store)}
    )
    found = CheckpointTuple(
        _config(source, base, store),
        checkpoint,
        cast(CheckpointMetadata, metadata),
        _parent(source, base, store),
        _writes(source, base, store),
    )
    channels = source.pick((None, (), ("messages",)))
    try:
        opened = store.sealer.open(found, channels=channels)
    except SecureSerdeError:
        return
    if channels is None:
        _check_answer(opened, store)
    try:
        _bookkeeping(source, store, found, opened)
    except SecureSerdeError:
        return
    # The metadata values the filters compare, canonically, as JSON gives them.
    for value in opened.tuple.metadata.values():
        canonical(value)


def sealed_tuple_seeds() -> Iterator[bytes]:
    """Each real tuple unchanged, and with one kind of change each, so coverage starts deep."""
    store = _store()
    for index in range(len(store.tuples)):
        yield bytes([index]) + bytes(16)
        yield bytes([index, 1, 5, 0, 2, 0, 0, 0]) + bytes(12)  # a record cell truncated
        yield bytes([index, 1, 6, 1, 0]) + bytes(12)  # another checkpoint's record
        yield bytes([index, 0, 1, 0, 0, 1, 0, 0, 40]) + bytes(12)  # a value cell truncated
        yield bytes([index, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0]) + bytes(8)  # a write cell kept
        yield bytes([index, 0, 0, 0, 4]) + bytes(12)  # a parent from another checkpoint


if __name__ == "__main__":
    from tests.fuzz._harness import main

    main("sealed_tuple", sealed_tuple)
