"""atheris harness, target and seeds for the store identity: `open_identity`, `parse_record`.

`SealedSaver` keeps its store identity (store id and index key) as one
sealed cell in the metadata of a reserved thread's checkpoint
(secure_serde/sealing/_identity.py). At start-up it reads that checkpoint
from the inner saver and opens it; a database writer controls the row.

An input's first byte picks the mode:

* 0: the identity thread's metadata as JSON text from the input (what the
  stock SQLite saver's ``json.loads`` would hand over), through `open_identity`;
* 1: the real identity cell, mutated (bit flip, truncation, insertion, its
  kind byte, its type tag length), as base64 text or as another JSON type;
* 2: a record *sealed under the right key at the identity's place* whose
  content comes from the input (``format``, ``store`` and ``index_key`` of
  any type and length, other keys), through `open_identity`: the parser
  after authentication;
* 3: the same record content through `parse_record`, and msgpack from the
  input decoded by the strict serializer, sealed, then opened.

The rule: only `SecureSerdeError` escapes, and an identity that opens has a
16-byte store id and a working index.

Run (docs/fuzzing.md)::

    PYTHONPATH=. nice -n 19 python tests/fuzz/fuzz_store_identity.py corpus/store_identity \
        -runs=1000000 -seed=1 -max_len=4096 -timeout=1 -rss_limit_mb=2048
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any, Final, cast

if __name__ == "__main__":
    import atheris

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    with atheris.instrument_imports(include=["secure_serde"]):
        import secure_serde.sealing._identity  # noqa: F401 - instrumented before the imports below

import ormsgpack
from langgraph.checkpoint.base import CheckpointMetadata, CheckpointTuple

from secure_serde import EncryptedSerializer, SecureSerdeError
from secure_serde.crypto import Location
from secure_serde.sealing import _cell
from secure_serde.sealing._identity import (
    IDENTITY_KEY,
    IDENTITY_THREAD,
    StoreIdentity,
    identity_config,
    new_identity_put,
    open_identity,
    parse_record,
)
from tests.fuzz import _fixtures as fx
from tests.fuzz._input import Input

__all__ = ["store_identity", "store_identity_seeds"]

_LOCATION: Final = Location.identity(IDENTITY_THREAD)
_FORMATS: Final = (1, 0, 2, "1", 1.0, True, None, -1, 1 << 40)


@cache
def _serde() -> EncryptedSerializer:
    return fx.env_serde()


@cache
def _real_cell() -> bytes:
    _, _, metadata = new_identity_put(_serde())
    text = cast(dict[str, str], metadata)[IDENTITY_KEY]
    return base64.b64decode(text)


def _tuple(metadata: Any) -> CheckpointTuple:
    return CheckpointTuple(identity_config(), {}, cast(CheckpointMetadata, metadata))  # type: ignore[typeddict-item]


def _field(source: Input) -> Any:
    choice = source.byte() % 8
    if choice == 0:
        return source.take(16)
    if choice == 1:
        return source.take(32)
    if choice == 2:
        return source.sized()
    if choice == 3:
        return bytearray(source.sized())
    if choice == 4:
        return source.text()
    if choice == 5:
        return source.pick(_FORMATS)
    if choice == 6:
        return [source.sized()]
    return None


def _content(source: Input) -> dict[str, Any]:
    record: dict[str, Any] = {}
    for key in ("format", "store", "index_key", "created"):
        if source.byte() % 8:
            record[key] = source.pick(_FORMATS) if key == "format" else _field(source)
    for _ in range(source.byte() % 3):
        record[source.text()] = _field(source)
    return record


def _mutated(source: Input, raw: bytes) -> bytes:
    op = source.byte() % 6
    at = source.byte() % (len(raw) + 1)
    if op == 1:
        flipped = bytearray(raw)
        flipped[at % len(raw)] ^= 1 << (source.byte() % 8)
        return bytes(flipped)
    if op == 2:
        return raw[:at]
    if op == 3:
        return raw[:at] + source.sized() + raw[at:]
    if op == 4:
        return raw[:4] + bytes([source.byte()]) + raw[5:]
    if op == 5:
        return raw[:5] + bytes([source.byte(), source.byte()]) + raw[7:]
    return raw


def _check(identity: StoreIdentity) -> None:
    if len(identity.store_id) != 16:
        raise AssertionError("an identity opened with a store id that is not 16 bytes")
    identity.index.token("user_id", "alice")
    repr(identity)


def store_identity(data: bytes) -> None:
    """One identity row, or one identity record, as a database writer could leave it."""
    source = Input(data)
    mode = source.byte() % 4
    serde = _serde()
    try:
        if mode == 0:
            try:
                metadata = json.loads(source.rest())
            except (ValueError, RecursionError):
                return  # not JSON: the store's driver would not hand it over
            if not isinstance(metadata, dict):
                return  # finding F11 (open_identity calls .get on it): test_hostile_cells.py
            _check(open_identity(_tuple(metadata), serde))
        elif mode == 1:
            mutated = _mutated(source, _real_cell())
            text: Any = base64.b64encode(mutated).decode("ascii")
            if source.byte() % 4 == 3:
                text = source.pick((None, 1, [text], {"t": text}, text.encode()))
            _check(open_identity(_tuple({IDENTITY_KEY: text, "step": -1}), serde))
        elif mode == 2:
            type_tag, ciphertext = serde.dumps_typed_at(_content(source), _LOCATION)
            text = _cell.to_text(_cell.pack(_cell.IDENTITY, type_tag, ciphertext))
            _check(open_identity(_tuple({IDENTITY_KEY: text}), serde))
        else:
            if source.flag():
                _check(parse_record(_content(source)))
                return
            try:
                record = ormsgpack.unpackb(source.rest())
            except (ValueError, TypeError, RecursionError):
                return
            type_tag, ciphertext = serde.dumps_typed_at(record, _LOCATION)
            text = _cell.to_text(_cell.pack(_cell.IDENTITY, type_tag, ciphertext))
            _check(open_identity(_tuple({IDENTITY_KEY: text}), serde))
    except SecureSerdeError:
        return


def store_identity_seeds() -> Iterator[bytes]:
    """The real identity row, one of each mutation, and well-formed and malformed records."""
    text = base64.b64encode(_real_cell()).decode("ascii")
    yield b"\x00" + json.dumps({IDENTITY_KEY: text}).encode()
    yield b"\x00" + json.dumps({IDENTITY_KEY: text, "step": -1, "parents": {}}).encode()
    for op in range(6):
        yield bytes([1, op, 20, 3, 0]) + b"xyz"
    # format 1, a 16-byte store, a 32-byte index key, a created time: a valid record
    yield bytes([2, 1, 0, 1, 0]) + bytes(16) + bytes([1, 1]) + bytes(32) + bytes([1, 4, 3]) + b"now"
    yield bytes([2, 1, 1, 1, 0]) + bytes(16) + bytes([1, 1]) + bytes(32) + bytes([0, 0])
    yield bytes([2, 1, 3, 1, 2, 15]) + bytes(15) + bytes([1, 1]) + bytes(32) + bytes(2)
    record = {"format": 1, "store": bytes(16), "index_key": bytes(32), "created": "now"}
    yield b"\x03\x00" + ormsgpack.packb(record)
    yield b"\x03\x01" + bytes([1, 0, 0]) + bytes(16) + bytes([1, 1]) + bytes(32)


if __name__ == "__main__":
    from tests.fuzz._harness import main

    main("store_identity", store_identity)
