"""atheris harness, target and seeds for sealed cells: `_cell.unpack` of every kind, `from_text`.

A sealed cell (secure_serde/sealing/_cell.py) is what `SealedSaver` hands its
inner saver: channel values and pending writes as bytes, the checkpoint
record and the store identity as base64 text in the metadata. Nothing in a
cell is authenticated before its ciphertext opens, so the parser sees
whatever a database writer put there.

An input is ``selector | payload``. The selector's low bits pick the kind
(1 to 5, or 0 for an unknown kind byte); its next bits pick how the payload
arrives: as ``bytes``, ``bytearray``, ``memoryview``, as text through
`from_text` (UTF-8 with surrogate escapes, so any byte string reaches it),
as base64 of the payload through `from_text`, or as a value of another type.

Besides "only `SecureSerdeError` escapes", a cell that parses must pack
back to the same bytes (`pack` / `pack_write`): the parser and the writer
agree on every field, so no two byte strings read as the same cell.

Run (docs/fuzzing.md)::

    PYTHONPATH=. nice -n 19 python tests/fuzz/fuzz_sealed_cell.py corpus/sealed_cell \
        -runs=1000000 -seed=1 -max_len=4096 -timeout=1 -rss_limit_mb=2048
"""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

if __name__ == "__main__":
    import atheris

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    with atheris.instrument_imports(include=["secure_serde"]):
        import secure_serde.sealing._cell  # noqa: F401 - instrumented before the imports below

from secure_serde import SecureSerdeError
from secure_serde.sealing import _cell
from tests.fuzz._input import Input

__all__ = ["sealed_cell", "sealed_cell_seeds"]

_KINDS: Final = (_cell.VALUE, _cell.WRITE, _cell.RECORD, _cell.IDENTITY, _cell.ITEM)
_ARRIVALS: Final = ("bytes", "bytearray", "memoryview", "text", "base64", "other")


def _repacked(cell: _cell.Cell) -> bytes:
    if cell.kind == _cell.WRITE:
        return _cell.pack_write(cell.type_tag, cell.task_path, cell.idx, cell.ciphertext)
    return _cell.pack(cell.kind, cell.type_tag, cell.ciphertext)


def sealed_cell(data: bytes) -> None:
    """One stored cell, of the kind its selector picks, through the parser that reads it."""
    source = Input(data)
    selector = source.byte()
    kind = _KINDS[selector % len(_KINDS)]
    arrival = _ARRIVALS[(selector >> 3) % len(_ARRIVALS)]
    payload = source.rest()
    raw: object
    try:
        if arrival == "text":
            text = payload.decode("utf-8", "surrogateescape")
            cell = _cell.from_text(text, kind)
            raw = base64.b64decode(text)  # accepted text is ASCII base64 (non-zero pad bits too)
        elif arrival == "base64":
            cell = _cell.from_text(base64.b64encode(payload).decode("ascii"), kind)
            raw = payload
        elif arrival == "other":
            _cell.unpack(payload.decode("latin-1"), kind)
            raise AssertionError("a str was parsed as a sealed cell")
        else:
            raw = {"bytes": bytes, "bytearray": bytearray, "memoryview": memoryview}[arrival](
                payload
            )
            cell = _cell.unpack(raw, kind)
            raw = payload
    except SecureSerdeError:
        return
    if cell.kind != kind:
        raise AssertionError(f"a cell of kind {cell.kind} was read as kind {kind}")
    if _repacked(cell) != raw:
        raise AssertionError("a parsed cell does not pack back to the stored bytes")


def sealed_cell_seeds() -> Iterator[bytes]:
    """Real cells of every kind, as `SealedSaver` writes them, under every arrival."""
    cells = [
        _cell.pack(_cell.VALUE, "msgpack+aesgcm", b"\x01" * 40),
        _cell.pack_write("msgpack+aesgcm", "~__pregel_pull, node", 3, b"\x02" * 40),
        _cell.pack_write("null+aesgcm", "", -1, b""),
        _cell.pack(_cell.RECORD, "msgpack+aesgcm", b"\x03" * 60),
        _cell.pack(_cell.IDENTITY, "msgpack+kms", b"\x04" * 80),
        _cell.pack(_cell.ITEM, "json+aesgcm", b"\x05" * 16),
    ]
    for cell in cells:
        kind_index = cell[4] - 1
        for arrival in range(len(_ARRIVALS)):
            selector = kind_index + 8 * arrival
            body = _cell.to_text(cell).encode("ascii") if _ARRIVALS[arrival] == "text" else cell
            yield bytes([selector]) + body


if __name__ == "__main__":
    from tests.fuzz._harness import main

    main("sealed_cell", sealed_cell)
