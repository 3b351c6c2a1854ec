"""Seed inputs for every fuzz target, generated from real values instead of kept as binaries.

Each seed is laid out as its target reads it (`tests.fuzz._input.Input`):
the selector bytes first, then a real blob. The blobs are what the
application writes: v1 values under each cipher, langgraph's own built-in
``+aes`` rows (EAX and GCM), KMS envelopes, ``msgpack+pickle`` payloads of
real DataFrames, Series and ndarrays (and the bare pickles inside them),
sealed metadata laid out as 0.3's savers wrote it, and keyring files in the README's
format. Nonces are fixed where the API allows, so the seeds are the same
on every run.

Usage: ``python -m tests.fuzz.seeds OUT_DIR [TARGET ...]`` writes
``OUT_DIR/<target>/seed-NNN``.
"""

from __future__ import annotations

import base64
import datetime
import json
import pickle
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import numpy as np
import ormsgpack
import pandas as pd
from Crypto.Cipher import AES
from langchain_core.messages import AIMessage, HumanMessage

from secure_serde import EncryptedSerializer
from secure_serde.ciphers import KeyRotationCipher
from secure_serde.pickling import EXT_PICKLE
from secure_serde.stores import ROW_KEY, SEALED_METADATA_KEY
from tests.fuzz import _fixtures as fx
from tests.fuzz import _kms
from tests.fuzz._targets import INNER_TAGS

__all__ = ["SEEDERS", "seeds", "write_seeds"]

_NONCE: Final = bytes(range(12))
_TAGS: Final = {tag: index for index, tag in enumerate(INNER_TAGS)}
_CIPHERS: Final = {"aesgcm": 0, "aes": 1, "kms": 2, "": 3}


def _values() -> list[Any]:
    """Values a checkpoint holds, each small."""
    return [
        {"messages": [HumanMessage(content="hi", id="1"), AIMessage(content="hello", id="2")]},
        {"count": 3, "ratio": 0.5, "ok": True, "none": None, "when": datetime.date(2026, 1, 2)},
        ["a", "b", {"nested": [1, 2, 3]}],
        "a plain string",
        b"\x00\x01raw bytes",
        12345678901234567890,
    ]


def _frames() -> list[Any]:
    """Values the pickle fallback pickles: real pandas and numpy objects."""
    return [
        pd.DataFrame({"a": [1, 2, 3], "b": ["x", "y", None]}),
        pd.DataFrame({"t": pd.date_range("2026-01-01", periods=3, tz="UTC"), "c": [1.5, 2.5, 3.5]}),
        pd.Series(pd.Categorical(["p", "q", "p"]), name="cat"),
        np.arange(12, dtype=">i4").reshape(3, 4),
        np.array([(1, 2.0)], dtype=[("x", "i2"), ("y", "f8")]),
        np.array(["2026-01-01"], dtype="datetime64[D]"),
        {"frame": pd.DataFrame({"k": [1]}), "array": np.zeros(3), "note": "mixed"},
        pd.Index([1, 5, 9], name="idx"),
        np.float32(1.5),
    ]


def _tag_bytes(inner: str, cipher: str = "aesgcm") -> bytes:
    return bytes([_TAGS[inner], _CIPHERS[cipher]])


def _v1_rows(serde: EncryptedSerializer) -> Iterator[tuple[str, bytes]]:
    for value in _values():
        yield serde.dumps_typed(value)


def _legacy_rows(mode: int) -> Iterator[tuple[str, bytes]]:
    builtin = fx.builtin_serde(mode)
    for value in _values():
        yield builtin.dumps_typed(value)


def _split(type_tag: str) -> tuple[str, str]:
    inner, _, cipher = type_tag.rpartition("+")
    return inner, cipher


def v1_env() -> Iterator[bytes]:
    for flag in (0, 1):
        for type_tag, blob in (*_v1_rows(fx.env_serde()), *_legacy_rows(AES.MODE_EAX)):
            inner, cipher = _split(type_tag)
            yield bytes([flag]) + _tag_bytes(inner, cipher) + blob
    # A relabelled row: the v1 tag binding must refuse it.
    type_tag, blob = fx.env_serde().dumps_typed(b"bytes that are msgpack: \x81\xa1a\x01")
    yield b"\x00" + _tag_bytes("msgpack") + blob


def v1_rotation() -> Iterator[bytes]:
    for key in (fx.KEY_NEW, fx.KEY_OLD, fx.KEY_GONE, fx.KEY):
        serde = EncryptedSerializer(KeyRotationCipher({"k": key}, "k"), fx.strict_jsonplus())
        for type_tag, blob in _v1_rows(serde):
            inner, cipher = _split(type_tag)
            yield _tag_bytes(inner, cipher) + blob
    for type_tag, blob in _legacy_rows(AES.MODE_EAX):
        inner, cipher = _split(type_tag)
        yield _tag_bytes(inner, cipher) + blob


def _kms_blobs() -> Iterator[tuple[int, bytes]]:
    """(context index, blob) under ARN_A, whose data key the target caches."""
    primary = _kms.primary_cipher()
    for index, context in enumerate(("msgpack", "json", "bytes")):
        for plaintext in (b"", b"\x81\xa1a\x01", bytes(300)):
            yield (
                index,
                primary._seal_with_nonce(
                    plaintext,
                    context,
                    data_key=_kms.DATA_KEY,
                    wrapped_key=_kms.WRAPPED_A,
                    nonce=_NONCE,
                ),
            )


def kms_header() -> Iterator[bytes]:
    for _, blob in _kms_blobs():
        yield b"\x01" + blob
    for context in ({"tenant": "acme"}, {"a": "1", "b": ""}, {}, ["x"], {"purpose": "x"}):
        yield b"\x00" + json.dumps(context).encode()


def kms_blob() -> Iterator[bytes]:
    for index, blob in _kms_blobs():
        yield bytes([0, index]) + blob  # cached data key: no KMS answer needed
        yield bytes([1, 0, index]) + blob  # a KMS error queued, unused
    # Under the decrypt-only CMK: KMS must answer, for the right key or another one.
    other = _kms.decrypt_only_cipher()
    wrapped = bytes(range(10, 106))
    blob = other._seal_with_nonce(
        b"\x81\xa1a\x01", "msgpack", data_key=_kms.DATA_KEY, wrapped_key=wrapped, nonce=_NONCE
    )
    for key_choice in range(4):
        yield bytes([2, key_choice, 1, 0]) + blob
    yield bytes([2, 1, 0, 32]) + bytes(range(32)) + bytes([0]) + blob
    yield bytes([0, 0]) + blob


def legacy_aes() -> Iterator[bytes]:
    for mode_flag, mode in ((0, AES.MODE_EAX), (1, AES.MODE_GCM)):
        for type_tag, blob in _legacy_rows(mode):
            inner, _ = _split(type_tag)
            for pickle_flag in (0, 1):
                yield bytes([mode_flag, pickle_flag, 0, _TAGS[inner]]) + blob
        # Plaintexts the target seals with langgraph's cipher, under relabelled tags.
        jsonplus = fx.strict_jsonplus()
        for value in _values():
            _, plaintext = jsonplus.dumps_typed(value)
            for inner in ("msgpack", "json", "bytes", "pickle", "msgpack+pickle"):
                yield bytes([mode_flag, 0, 1, _TAGS[inner]]) + plaintext
        for payload in _pickle_payloads():
            yield bytes([mode_flag, 1, 1, _TAGS["msgpack+pickle"]]) + payload


def _pickle_payloads() -> Iterator[bytes]:
    serde = fx.pickle_serde()
    for value in _frames():
        yield serde.dumps_typed(value)[1]


def _embedded_pickles() -> Iterator[bytes]:
    """The bare pickles inside the fallback's payloads, plus numpy's and pandas' own."""
    found: list[bytes] = []

    def hook(code: int, data: bytes) -> Any:
        if code == EXT_PICKLE:
            found.append(data)
        return None

    for payload in _pickle_payloads():
        ormsgpack.unpackb(payload, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
    yield from found
    for value in _frames():
        yield pickle.dumps(value, protocol=5)


def pickle_fallback() -> Iterator[bytes]:
    for payload in _pickle_payloads():
        yield b"\x00" + payload
        yield b"\x06" + payload
    for pickled in _embedded_pickles():
        yield b"\x01" + pickled
        yield b"\x03" + pickled


def metadata_envelope() -> Iterator[bytes]:
    """Metadata columns as 0.3's sealed savers wrote them (plaintext_metadata=["user"]): the
    structural and plaintext keys, and the others sealed with the row they belong to."""
    serde = fx.env_serde()
    for extra in ({"api_key": "sk-test", "user": "u"}, {"n": 1, "f": 0.5}, {}):
        metadata: dict[str, Any] = {"source": "loop", "step": 2, "parents": {}}
        sealed = {k: v for k, v in extra.items() if k != "user"}
        metadata.update({k: v for k, v in extra.items() if k == "user"})
        type_tag, data = serde.dumps_typed({**sealed, ROW_KEY: ["t", "", "checkpoint-1"]})
        metadata[SEALED_METADATA_KEY] = {"type": type_tag, "data": base64.b64encode(data).decode()}
        yield b"\x00" + json.dumps(metadata).encode()
    for type_tag, blob in _v1_rows(serde):
        inner, cipher = _split(type_tag)
        yield b"\x01" + _tag_bytes(inner, cipher) + blob


def _encoded(seed: int) -> str:
    return "base64:" + base64.b64encode(bytes([seed]) * 32).decode("ascii")


def keyring_json() -> Iterator[bytes]:
    files: list[dict[str, Any]] = [
        {"primary": "2025-06", "keys": {"2025-06": _encoded(1), "2024-01": _encoded(2)}},
        {
            "primary": "2025-06",
            "keys": {"2025-06": _encoded(1), "2024-01": fx.KEY_OLD},
            "retired": ["env"],
            "legacy_key": "env",
            "legacy_mode": "eax",
        },
        {"keys": {"a": _encoded(3)}, "legacy_key": None, "legacy_mode": "gcm"},
        {"primary": "env", "retired": []},
        {"primary": "x", "keys": {"x": "sixteen-char-key"}},
    ]
    for index, document in enumerate(files):
        text = json.dumps(document, indent=index % 2 or None).encode()
        yield b"\x00" + text
        yield b"\x02" + text
    yield b"\x01" + bytes([len(fx.KEY)]) + fx.KEY.encode() + json.dumps(files[3]).encode()


def cli() -> Iterator[bytes]:
    # audit/inspect, options, (inspect: thread), mutation count, then per mutation:
    # table, column, row, kind and its bytes. Coverage guidance grows from these.
    yield bytes([0, 0, 0, 0, 0, 0, 8])
    yield bytes([0, 1, 0, 0, 0, 3, 6]) + b"relabelled"
    yield bytes([1, 0, 0, 0, 0, 0, 1, 5, 0, 3, 7])
    yield bytes([1, 2, 2, 1, 1, 1, 4, 4, 0, 9])
    yield bytes([1, 3, 1, 0, 0, 2, 3, 0, 5]) + b"x"
    yield bytes([0, 5, 3, 1, 2, 1, 3, 1]) + b"\x1b[8m"
    for thread in range(4):
        yield bytes([1, 1, thread, 0, 0, 0, 0, 9])


def _sealing_seeders() -> dict[str, Callable[[], Iterator[bytes]]]:
    """Seeds of the SealedSaver parsers' targets, kept beside their harnesses."""
    from tests.fuzz.fuzz_sealed_cell import sealed_cell_seeds
    from tests.fuzz.fuzz_sealed_tuple import sealed_tuple_seeds
    from tests.fuzz.fuzz_store_identity import store_identity_seeds

    return {
        "sealed_cell": sealed_cell_seeds,
        "sealed_tuple": sealed_tuple_seeds,
        "store_identity": store_identity_seeds,
    }


SEEDERS: Final[dict[str, Callable[[], Iterator[bytes]]]] = {
    "v1_env": v1_env,
    "v1_rotation": v1_rotation,
    "kms_header": kms_header,
    "kms_blob": kms_blob,
    "legacy_aes": legacy_aes,
    "pickle_fallback": pickle_fallback,
    "metadata_envelope": metadata_envelope,
    "keyring_json": keyring_json,
    "cli": cli,
    **_sealing_seeders(),
}


def seeds(name: str) -> list[bytes]:
    return list(SEEDERS[name]())


def write_seeds(name: str, directory: Path) -> int:
    directory.mkdir(parents=True, exist_ok=True)
    found = seeds(name)
    for index, seed in enumerate(found):
        (directory / f"seed-{index:03d}").write_bytes(seed)
    return len(found)


if __name__ == "__main__":
    out = Path(sys.argv[1])
    for target in sys.argv[2:] or SEEDERS:
        print(target, write_seeds(target, out / target))
