"""Hostile pickles: foreign globals, reduce chains, truncation. Typed errors, and nothing runs.

Every planted pickle is read twice: encrypted under the right key (the worst
case: the unpickler is the last line of defence) and by a standalone
serializer with ``allow_unauthenticated=True``. What a pickle would run is
observable: a marker list, or a file it would create.
"""

from __future__ import annotations

import builtins
import importlib
import os
import pickle
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import ormsgpack
import pandas as pd
import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import (
    DecryptionError,
    EncryptedSerializer,
    ForbiddenGlobalError,
    PickleFallbackSerializer,
    UnsafePickleError,
)
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.pickling import EXT_NESTED, EXT_PICKLE, PANDAS, TAG, _unpickler
from secure_serde.pickling._scan import Admission

KEY = b"h" * 32
RAN: list[str] = []
HERE = __name__


def mark(label: str = "ran") -> str:
    RAN.append(label)
    return label


def factory() -> Callable[[str], str]:
    """An admitted helper returning a callable: the first link of a reduce chain."""
    RAN.append("factory")
    return mark


class Target:
    """An admitted class a pickle might try to modify."""

    greeting = "hello"


ALLOWED: list[Any] = [PANDAS, (HERE, "mark"), (HERE, "factory"), (HERE, "Target")]


@pytest.fixture(autouse=True)
def _clear_marker() -> None:
    RAN.clear()


def cipher() -> EnvKeyCipher:
    return EnvKeyCipher(KEY)


def read_encrypted(pickled: bytes) -> Any:
    payload = ormsgpack.packb({"x": ormsgpack.Ext(EXT_PICKLE, pickled)})
    name, ciphertext = cipher().encrypt_with_tag(payload, TAG)
    serde = EncryptedSerializer(cipher(), PickleFallbackSerializer(allowed=ALLOWED))
    return serde.loads_typed((f"{TAG}+{name}", ciphertext))["x"]


def read_standalone(pickled: bytes) -> Any:
    payload = ormsgpack.packb([ormsgpack.Ext(EXT_PICKLE, pickled)])
    serde = PickleFallbackSerializer(allowed=ALLOWED, allow_unauthenticated=True)
    return serde.loads_typed((TAG, payload))[0]


READERS = pytest.mark.parametrize(
    "read", [read_encrypted, read_standalone], ids=["encrypted", "standalone"]
)


# --- hand-built pickles ---------------------------------------------------------------------


def text(value: str) -> bytes:
    raw = value.encode()
    return pickle.SHORT_BINUNICODE + bytes([len(raw)]) + raw


def glob(module: str, name: str) -> bytes:
    return text(module) + text(name) + pickle.STACK_GLOBAL


def call(callable_: bytes, *args: bytes) -> bytes:
    return callable_ + pickle.MARK + b"".join(args) + pickle.TUPLE + pickle.REDUCE


def framed(body: bytes) -> bytes:
    return pickle.PROTO + bytes([5]) + body + pickle.STOP


class Reduces:
    def __init__(self, target: Callable[..., Any], *args: Any) -> None:
        self.target, self.args = target, args

    def __reduce__(self) -> tuple[Any, ...]:
        return self.target, self.args


# --- foreign globals ------------------------------------------------------------------------


def _foreign(tmp: Path) -> list[tuple[bytes, str, str]]:
    touched = str(tmp / "ran")
    return [
        (pickle.dumps(Reduces(os.system, f"touch {touched}")), os.system.__module__, "system"),
        (pickle.dumps(Reduces(builtins.eval, f"open({touched!r}, 'w')")), "builtins", "eval"),
        (pickle.dumps(Reduces(builtins.exec, f"open({touched!r}, 'w')")), "builtins", "exec"),
        (pickle.dumps(Reduces(subprocess.Popen, ["touch", touched])), "subprocess", "Popen"),
        (pickle.dumps(Reduces(builtins.open, touched, "w")), builtins.open.__module__, "open"),
        (framed(call(glob("builtins", "open"), text(touched), text("w"))), "builtins", "open"),
        (pickle.dumps(Reduces(importlib.import_module, "os")), "importlib", "import_module"),
        (pickle.dumps(Reduces(pickle.loads, pickle.dumps(Reduces(mark)))), "_pickle", "loads"),
        (framed(b"cposix\nsystem\n" + text(f"touch {touched}") + b"\x85R"), "posix", "system"),
        (framed(call(glob(HERE, "RAN.append"), text("x"))), HERE, "RAN.append"),
        (
            framed(call(glob("tests.pickling.test_fallback_auth", "mark"))),
            "tests.pickling.test_fallback_auth",
            "mark",
        ),
    ]


@READERS
def test_foreign_globals_are_refused_and_nothing_runs(
    read: Callable[[bytes], Any], tmp_path: Path
) -> None:
    for pickled, module, name in _foreign(tmp_path):
        with pytest.raises(ForbiddenGlobalError) as raised:
            read(pickled)
        assert (raised.value.module, raised.value.name) == (module, name)
        assert f"{module}.{name}" in str(raised.value)
    assert not (tmp_path / "ran").exists()
    assert RAN == []


@READERS
def test_the_admitted_marker_itself_runs(read: Callable[[bytes], Any]) -> None:
    """Control for the marker: an admitted global called directly does run."""
    assert read(pickle.dumps(Reduces(mark, "direct"))) == "direct"
    assert RAN == ["direct"]


@READERS
def test_getattr_reaches_only_the_admitted_attribute(read: Callable[[bytes], Any]) -> None:
    getattr_ = glob("builtins", "getattr")
    to_pickle = call(getattr_, glob("pandas", "DataFrame"), text("to_pickle"))
    with pytest.raises(ForbiddenGlobalError, match=r"pandas\.DataFrame\.to_pickle"):
        read(framed(to_pickle))
    computed = call(getattr_, call(glob(HERE, "factory")), text("__globals__"))
    with pytest.raises(UnsafePickleError, match=r"nested reduce chain|computed"):
        read(framed(computed))
    assert RAN == []
    # What pandas itself needs still works: ZoneInfo._unpickle.
    zone = pd.Timestamp("2024-01-01", tz="Europe/Paris")
    assert read(pickle.dumps(zone, protocol=5)) == zone


# --- structure ------------------------------------------------------------------------------


@READERS
def test_nested_reduce_chains_are_refused_before_the_first_call(
    read: Callable[[bytes], Any],
) -> None:
    chain = call(call(glob(HERE, "factory")), text("chained"))
    memoized = (
        call(glob(HERE, "factory")) + pickle.MEMOIZE + pickle.POP + pickle.BINGET + b"\x00"
        + pickle.MARK + text("chained") + pickle.TUPLE + pickle.REDUCE
    )  # fmt: skip
    for body in (chain, memoized):
        with pytest.raises(UnsafePickleError, match="nested reduce chain"):
            read(framed(body))
    assert RAN == []


@READERS
def test_globals_cannot_be_modified(read: Callable[[bytes], Any]) -> None:
    state = pickle.MARK + text("greeting") + text("pwned") + pickle.DICT
    build = glob(HERE, "Target") + pickle.NONE + state + pickle.TUPLE2 + pickle.BUILD
    setitem = glob(HERE, "Target") + text("greeting") + text("pwned") + pickle.SETITEM
    for body in (build, setitem):
        with pytest.raises(UnsafePickleError, match="to a global"):
            read(framed(body))
    assert Target.greeting == "hello"


@READERS
def test_global_names_must_be_literals(read: Callable[[bytes], Any]) -> None:
    computed = call(glob(HERE, "mark"), text("os")) + text("system") + pickle.STACK_GLOBAL
    with pytest.raises(UnsafePickleError, match="computed"):
        read(framed(computed))
    assert RAN == []


@READERS
def test_array_allocation_is_bounded_by_the_pickle(read: Callable[[bytes], Any]) -> None:
    ndarray = glob("numpy", "ndarray")
    huge = pickle.MARK + pickle.BININT + struct.pack("<i", 2**30) + pickle.TUPLE
    newobj = ndarray + pickle.MARK + huge + pickle.TUPLE + pickle.NEWOBJ
    with pytest.raises(UnsafePickleError, match=r"numpy\.ndarray"):
        read(framed(newobj))
    reconstruct = call(
        glob("numpy._core.multiarray", "_reconstruct"),
        ndarray,
        huge,
        pickle.SHORT_BINBYTES + b"\x01b",
    )
    with pytest.raises(UnsafePickleError, match="non-empty array"):
        read(framed(reconstruct))


_REFUSED_OPCODES = {
    "EXT1": pickle.EXT1 + b"\x01",
    "PERSID": pickle.PERSID + b"x\n",
    "BINPERSID": text("x") + pickle.BINPERSID,
    "NEXT_BUFFER": pickle.NEXT_BUFFER,
    "INST": pickle.MARK + pickle.INST + HERE.encode() + b"\nmark\n",
    "OBJ": pickle.MARK + glob(HERE, "mark") + pickle.OBJ,
    "STRING": b"S'x'\n",
    "INT": b"I1\n",
    "GET": pickle.NONE + pickle.BINPUT + b"\x00" + b"g0\n",
}


@READERS
@pytest.mark.parametrize("opcode", sorted(_REFUSED_OPCODES))
def test_opcodes_this_library_never_writes_are_refused(
    read: Callable[[bytes], Any], opcode: str
) -> None:
    with pytest.raises(UnsafePickleError, match=opcode):
        read(framed(_REFUSED_OPCODES[opcode]))
    assert RAN == []


@READERS
@pytest.mark.parametrize(
    "pickled",
    [
        b"",
        b"not a pickle",
        framed(pickle.REDUCE),
        framed(pickle.BINGET + b"\x07"),
        framed(pickle.POP_MARK),
        framed(pickle.NONE + pickle.NONE),
        framed(pickle.NONE) + b"trailing",
        framed(pickle.BINUNICODE + struct.pack("<I", 10**6) + b"short"),
    ],
    ids=["empty", "garbage", "underflow", "memo", "no-mark", "leftover", "trailing", "length"],
)
def test_malformed_pickles_are_refused(read: Callable[[bytes], Any], pickled: bytes) -> None:
    with pytest.raises(UnsafePickleError):
        read(pickled)


def test_every_truncation_is_refused() -> None:
    value = pd.DataFrame({"t": pd.date_range("2024", periods=2, tz="Europe/Paris"), "n": [1, 2]})
    pickled = pickle.dumps(value, protocol=5)
    admission = PickleFallbackSerializer(allowed=[PANDAS]).admitted_globals
    full = Admission(admission, frozenset({("zoneinfo", "ZoneInfo", "_unpickle")}))
    pd.testing.assert_frame_equal(_unpickler.load(pickled, full), value)
    for cut in range(len(pickled)):
        with pytest.raises(UnsafePickleError):
            _unpickler.load(pickled[:cut], full)


@READERS
def test_failing_helpers_are_refused_without_quoting_data(read: Callable[[bytes], Any]) -> None:
    secret = "SECRET-7f3a"
    with pytest.raises(UnsafePickleError) as raised:
        read(framed(call(glob("numpy", "dtype"), text(secret))))
    assert secret not in str(raised.value)
    assert "TypeError" in str(raised.value)


# --- the run-time layer on its own ----------------------------------------------------------


def test_find_class_refuses_even_without_the_scan() -> None:
    """Defence in depth: the unpickler enforces the allowlist itself."""
    admission = Admission(frozenset({("numpy", "dtype")}))
    unpickler = _unpickler._RestrictedUnpickler(pickle.dumps(Reduces(mark)), admission)
    with pytest.raises(ForbiddenGlobalError):
        unpickler.load()
    methods = Admission(
        frozenset({("zoneinfo", "ZoneInfo")}), frozenset({("zoneinfo", "ZoneInfo", "_unpickle")})
    )
    guarded = _unpickler._RestrictedUnpickler(b"", methods).find_class("builtins", "getattr")
    assert guarded(importlib.import_module("zoneinfo").ZoneInfo, "_unpickle") is not None
    with pytest.raises(UnsafePickleError):
        guarded(importlib.import_module("zoneinfo").ZoneInfo, "__init_subclass__")
    with pytest.raises(UnsafePickleError):
        guarded(np, "ndarray")
    assert RAN == []


# --- the msgpack frame around pickles -------------------------------------------------------


@pytest.mark.parametrize(
    "payload",
    [
        b"\xc1",
        ormsgpack.packb(ormsgpack.Ext(EXT_NESTED, b"")),
        ormsgpack.packb(ormsgpack.Ext(EXT_NESTED, b"\x63" + ormsgpack.packb(["m", "n", 1]))),
        ormsgpack.packb(ormsgpack.Ext(EXT_NESTED, b"\x02" + ormsgpack.packb("not a list"))),
        ormsgpack.packb(ormsgpack.Ext(EXT_NESTED, b"\x02" + ormsgpack.packb([1, 2, 3]))),
    ],
    ids=["not-msgpack", "empty-nested", "unknown-code", "not-a-list", "bad-names"],
)
def test_malformed_frames_are_refused(payload: bytes) -> None:
    serde = PickleFallbackSerializer(
        JsonPlusSerializer(), allowed=[PANDAS], allow_unauthenticated=True
    )
    with pytest.raises(DecryptionError):
        serde.loads_typed((TAG, payload))
