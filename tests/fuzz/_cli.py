"""``secure-serde audit`` and ``inspect`` over a SQLite store whose rows a fuzz input damaged.

The store is written once per process by real graphs through the stock
``SqliteSaver``: a thread under `EnvKeyCipher` (v1), one written by
langgraph's built-in ``EncryptedSerializer`` (legacy ``+aes`` rows), one
through `PickleFallbackSerializer` holding a DataFrame and an ndarray
(``msgpack+pickle+aesgcm``) and one in plaintext. Each input then rewrites
up to four cells of a fresh copy (type tags, cipher names, payloads,
metadata, channel names, ids: whatever the store could hold, SQL types
included) and runs the CLI's ``main`` in this process, with the key in
``LANGGRAPH_AES_KEY`` as an operator would. ``main`` prints
`SecureSerdeError` messages and returns 2; anything else escapes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sqlite3
import tempfile
from functools import cache
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd
from Crypto.Cipher import AES
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from typing_extensions import TypedDict

from secure_serde import EncryptedSerializer, SecureSerdeError
from secure_serde.cli import build_parser
from tests.fuzz import _fixtures as fx
from tests.fuzz._input import Input
from tests.fuzz._targets import INNER_TAGS
from tests.graphs_support import linear_graph
from tests.passes.rewrap_support import build_graph, run_turns

__all__ = ["THREADS", "audit", "build_store", "cli", "inspect", "mutate"]

THREADS: Final = ("v1", "legacy", "frames", "plain")
# Text a hostile store could hold where the CLI prints names.
_NASTY: Final = ("\x1b[8m", "\n", "\r", "\x00", "\u202e", "+", "++", "aesgcm+", "x" * 300)
_COLUMNS: Final = {
    "checkpoints": (
        "type",
        "checkpoint",
        "metadata",
        "checkpoint_id",
        "parent_checkpoint_id",
        "thread_id",
        "checkpoint_ns",
    ),
    "writes": ("type", "value", "channel", "task_id", "idx", "checkpoint_id", "task_path"),
}
_DATA_COLUMNS: Final = frozenset({"checkpoint", "value", "metadata"})


class FrameState(TypedDict, total=False):
    frame: Any
    array: Any
    note: str


def _frames(state: FrameState) -> dict[str, Any]:
    frame = pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", None]}, index=pd.Index([10, 20, 30]))
    return {"frame": frame, "array": np.arange(6, dtype=">i4").reshape(2, 3), "note": "frames"}


def _frame_graph(checkpointer: Any) -> Any:
    return linear_graph(FrameState, ("frames", _frames), checkpointer=checkpointer)


def _note(state: FrameState) -> dict[str, Any]:
    return {"note": f"seen {state.get('note')}"}


def _note_graph(checkpointer: Any) -> Any:
    return linear_graph(FrameState, ("note", _note), checkpointer=checkpointer)


def build_store(path: Path) -> None:
    """Write the four threads with real graphs, then leave one self-contained file.

    Small on purpose (about 25 cells): every input reads the whole store.
    """
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        saver = SqliteSaver(conn, serde=EncryptedSerializer(fx.env_cipher(), JsonPlusSerializer()))
        saver.setup()
        run_turns(build_graph(saver), "v1", 1)
        for thread, serde in (
            ("legacy", fx.builtin_serde(AES.MODE_EAX)),
            ("plain", JsonPlusSerializer()),
        ):
            saver = SqliteSaver(conn, serde=serde)
            _note_graph(saver).invoke({"note": thread}, {"configurable": {"thread_id": thread}})
        saver = SqliteSaver(conn, serde=EncryptedSerializer(fx.env_cipher(), fx.pickle_serde()))
        _frame_graph(saver).invoke({"note": "start"}, {"configurable": {"thread_id": "frames"}})
    finally:
        conn.close()
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.execute("VACUUM")
    finally:
        conn.close()


@cache
def _pristine() -> tuple[Path, bytes]:
    folder = Path(tempfile.mkdtemp(prefix="secure-serde-fuzz-store-"))
    template = folder / "template.sqlite"
    build_store(template)
    os.environ["LANGGRAPH_AES_KEY"] = fx.KEY
    for name in (
        "SECURE_SERDE_KEYRING_FILE",
        "SECURE_SERDE_KMS_KEY",
        "SECURE_SERDE_KMS_DECRYPT_KEYS",
        "SECURE_SERDE_KMS_KEY_ID",  # 0.3's names, still read
        "SECURE_SERDE_KMS_DECRYPT_KEY_IDS",
        "SECURE_SERDE_KMS_ENCRYPTION_CONTEXT",
    ):
        os.environ.pop(name, None)
    return folder / "store.sqlite", template.read_bytes()


def _value(source: Input, column: str, old: Any, others: list[Any]) -> Any:
    """A replacement for one cell: damaged, swapped, relabelled or of another SQL type."""
    kind = source.byte() % 10
    if kind == 0:
        return None
    if kind == 1:
        return int.from_bytes(source.take(2), "big")
    if kind == 2 and others:
        return source.pick(others)
    if kind == 3:
        return source.pick(_NASTY) + source.text()
    if column == "type" or column not in _DATA_COLUMNS:
        if kind < 7:
            inner = source.pick(INNER_TAGS)
            cipher = source.pick(("aesgcm", "aes", "kms", "pickle", "", source.text()))
            return f"{inner}+{cipher}" if cipher else inner
        return source.text()
    data = old if isinstance(old, bytes) else str(old or "").encode()
    at = int.from_bytes(source.take(2), "big") % (len(data) + 1)
    if kind == 4:
        return data[:at]
    if kind == 5 and data:
        flipped = bytearray(data)
        flipped[at % len(data)] ^= source.byte() or 1
        return bytes(flipped)
    if kind == 6:
        return data[:at] + source.sized() + data[at:]
    if kind == 7:
        return source.text()  # text where a BLOB belongs
    return source.rest()


def mutate(path: Path, source: Input) -> None:
    """Rewrite 1 to 4 cells of the store at ``path``, as ``source`` says."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA synchronous=OFF")  # a scratch copy: no fsync per input
        for _ in range(1 + source.byte() % 4):
            table = source.pick(("checkpoints", "writes"))
            column = source.pick(_COLUMNS[table])
            rows = conn.execute(f"SELECT rowid, {column} FROM {table}").fetchall()  # noqa: S608
            if not rows:
                continue
            rowid, old = source.pick(rows)
            new = _value(source, column, old, [r[1] for r in rows])
            with contextlib.suppress(sqlite3.IntegrityError):
                conn.execute(
                    f"UPDATE {table} SET {column} = ? WHERE rowid = ?",  # noqa: S608
                    (new, rowid),
                )
        conn.commit()
    finally:
        conn.close()


def _fresh(source: Input) -> Path:
    path, pristine = _pristine()
    path.write_bytes(pristine)
    mutate(path, source)
    return path


@cache
def _parser() -> argparse.ArgumentParser:
    return build_parser()


def _run(argv: list[str]) -> int:
    """What ``main(argv)`` does, with the parser built once (building it costs ~10 ms)."""
    args = _parser().parse_args(argv)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: int = args.func(args)
        except SecureSerdeError:
            code = 2
    if code not in (0, 1, 2):
        raise AssertionError(f"unexpected exit status {code}")
    return code


def cli(data: bytes) -> None:
    """``audit`` or ``inspect``, as the first byte says, over one damaged store."""
    if data[:1] and data[0] & 1:
        inspect(data[1:])
    else:
        audit(data[1:])


def audit(data: bytes) -> None:
    """``secure-serde audit STORE`` over a damaged store: text, ``--json`` or ``--no-decrypt``."""
    source = Input(data)
    options = source.byte()
    path = _fresh(source)
    argv = ["audit", str(path)]
    if options & 1:
        argv.append("--json")
    if options & 2:
        argv.append("--no-decrypt")
    if options & 4:
        argv += ["--batch-size", "2"]
    _run(argv)


def inspect(data: bytes) -> None:
    """``secure-serde inspect STORE --thread T`` over a damaged store, text or ``--json``."""
    source = Input(data)
    options = source.byte()
    thread = source.pick(THREADS)
    path = _fresh(source)
    argv = ["inspect", str(path), "--thread", thread]
    if options & 1:
        argv.append("--json")
    if options & 2:
        argv += ["--pickle", "pandas"]
    if options & 4:
        argv.append("--all-channels")
    _run(argv)
