"""`CompressedSerializer`: round trips through every composition, tags, bounds and bombs."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tracemalloc
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pandas as pd
import pytest
from backports import zstd
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import (
    CompressedSerializer,
    ConfigurationError,
    DecompressionBombError,
    DecompressionError,
    DecryptionError,
    EncryptedSerializer,
    PickleFallbackSerializer,
    PickleRefusedError,
)
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.pickling import PANDAS
from secure_serde.serde import _compress
from secure_serde.serde._langgraph import DeltaSnapshot

KEY = b"compress-tests-key-0123456789abc"
MIB = 1024 * 1024


def chat(turns: int) -> list[Any]:
    messages: list[Any] = []
    for turn in range(turns):
        text = f"turn {turn}: " + "the quick brown fox jumps over the lazy dog " * 9
        messages += [HumanMessage(content=text, id=f"h{turn}"), AIMessage(content=text[::-1])]
    return messages


def encrypted(inner: Any = None, **kwargs: Any) -> EncryptedSerializer:
    return EncryptedSerializer(EnvKeyCipher(KEY), CompressedSerializer(inner, **kwargs))


VALUES: list[Any] = [
    None,
    "short",
    b"\x00" * 4000,
    {"ssn": "123-45-6789", "n": 7, "x": 1.5},
    chat(1),
    chat(20),
    DeltaSnapshot(chat(5)),
    [DeltaSnapshot([1, 2, 3] * 400), {"nested": DeltaSnapshot("s" * 900)}],
    ("tuple", "x" * 2000),
    {1, 2, 3},
]


@pytest.mark.parametrize("algorithm", ["zstd", "zlib"])
@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_round_trip_alone_and_under_encryption(algorithm: Any, value: Any) -> None:
    plain = JsonPlusSerializer()
    expected = plain.loads_typed(plain.dumps_typed(value))
    for serde in (CompressedSerializer(algorithm=algorithm), encrypted(algorithm=algorithm)):
        back = serde.loads_typed(serde.dumps_typed(value))
        assert back == expected
        assert type(back) is type(expected)


def test_delta_snapshot_keeps_its_type_through_every_composition() -> None:
    snapshot = DeltaSnapshot(chat(10))
    for serde in (
        CompressedSerializer(),
        encrypted(),
        EncryptedSerializer.from_pycryptodome_aes(key=KEY, compress=True),
        encrypted(PickleFallbackSerializer(allowed=[PANDAS])),
    ):
        type_tag, data = serde.dumps_typed(snapshot)
        assert "zstd" in type_tag.split("+")
        back = serde.loads_typed((type_tag, data))
        assert type(back) is DeltaSnapshot
        assert back == snapshot


def test_tags_name_the_algorithm_under_the_cipher() -> None:
    value = chat(3)
    assert CompressedSerializer().dumps_typed(value)[0] == "msgpack+zstd"
    assert CompressedSerializer(algorithm="zlib").dumps_typed(value)[0] == "msgpack+zlib"
    assert encrypted().dumps_typed(value)[0] == "msgpack+zstd+aesgcm"
    drop_in = EncryptedSerializer.from_pycryptodome_aes(key=KEY, compress=True)
    assert drop_in.dumps_typed(value)[0] == "msgpack+zstd+aesgcm"
    assert EncryptedSerializer.from_pycryptodome_aes(key=KEY).dumps_typed(value)[0] == (
        "msgpack+aesgcm"
    )


def test_compressed_output_is_smaller() -> None:
    value = chat(20)
    plain = JsonPlusSerializer().dumps_typed(value)[1]
    for algorithm in ("zstd", "zlib"):
        packed = CompressedSerializer(algorithm=algorithm).dumps_typed(value)[1]
        assert len(packed) < len(plain) / 3


def test_small_values_keep_the_inner_tag_and_bytes() -> None:
    plain = JsonPlusSerializer()
    serde = CompressedSerializer()
    for value in ("a" * 100, {"k": 1}, None, b"x" * 400):
        assert serde.dumps_typed(value) == plain.dumps_typed(value)
    # The threshold is on the inner encoding's length, both ways of it.
    just_below = "a" * (_compress.DEFAULT_MIN_SIZE - 4)
    assert len(plain.dumps_typed(just_below)[1]) < _compress.DEFAULT_MIN_SIZE
    assert serde.dumps_typed(just_below)[0] == "msgpack"
    at = "a" * _compress.DEFAULT_MIN_SIZE
    assert serde.dumps_typed(at)[0] == "msgpack+zstd"
    assert CompressedSerializer(min_size=0).dumps_typed("a" * 100)[0] == "msgpack+zstd"


def test_values_that_do_not_shrink_are_stored_as_they_are() -> None:
    noise = os.urandom(2000)
    plain = JsonPlusSerializer().dumps_typed(noise)
    assert CompressedSerializer().dumps_typed(noise) == plain


def test_values_above_max_size_are_stored_uncompressed_so_they_stay_readable() -> None:
    serde = CompressedSerializer(max_size=4096)
    big = "z" * 10_000
    type_tag, data = serde.dumps_typed(big)
    assert type_tag == "msgpack"
    assert serde.loads_typed((type_tag, data)) == big


def test_either_algorithm_reads_the_other_and_uncompressed_rows() -> None:
    value = chat(4)
    zstd_rows = CompressedSerializer(algorithm="zstd")
    zlib_rows = CompressedSerializer(algorithm="zlib")
    for writer in (zstd_rows, zlib_rows, JsonPlusSerializer()):
        row = writer.dumps_typed(value)
        assert zstd_rows.loads_typed(row) == value
        assert zlib_rows.loads_typed(row) == value


def test_uncompressed_encrypted_rows_stay_readable_after_turning_compression_on() -> None:
    value = chat(4)
    old = EncryptedSerializer(EnvKeyCipher(KEY)).dumps_typed(value)
    assert old[0] == "msgpack+aesgcm"
    assert encrypted().loads_typed(old) == value
    new = encrypted().dumps_typed(value)
    # ...and turning it off again keeps compressed rows readable only through the wrapper.
    with pytest.raises(Exception, match=r"."):
        EncryptedSerializer(EnvKeyCipher(KEY)).loads_typed(new)


# --- pickle fallback ---------------------------------------------------------------------------


def test_pickle_fallback_under_compression_and_encryption() -> None:
    frame = pd.DataFrame({"a": range(300), "b": [f"row {i}" for i in range(300)]})
    serde = encrypted(PickleFallbackSerializer(allowed=[PANDAS]))
    type_tag, data = serde.dumps_typed({"df": frame, "snapshot": DeltaSnapshot(chat(2))})
    assert type_tag == "msgpack+pickle+zstd+aesgcm"
    back = serde.loads_typed((type_tag, data))
    pd.testing.assert_frame_equal(back["df"], frame)
    assert type(back["snapshot"]) is DeltaSnapshot


def test_pickle_fallback_under_compression_alone_is_still_refused() -> None:
    frame = pd.DataFrame({"a": range(300)})
    serde = CompressedSerializer(PickleFallbackSerializer(allowed=[PANDAS]))
    row = serde.dumps_typed(frame)
    assert row[0] == "msgpack+pickle+zstd"
    with pytest.raises(PickleRefusedError):
        serde.loads_typed(row)


def test_pickle_fallback_refuses_to_wrap_compression() -> None:
    with pytest.raises(ConfigurationError):
        PickleFallbackSerializer(CompressedSerializer(), allowed=[PANDAS])  # type: ignore[arg-type]


# --- nothing is decompressed before the cipher authenticated it ----------------------------


@contextmanager
def decompressor_calls() -> Iterator[list[str]]:
    """Names of the decompression functions entered while the block runs (sys.setprofile)."""
    watched = {_compress._unzstd.__code__, _compress._unzlib.__code__}
    entered: list[str] = []

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code in watched:
            entered.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        yield entered
    finally:
        sys.setprofile(None)


def zstd_bomb(size: int, *, declare_size: bool) -> bytes:
    if declare_size:
        return zstd.compress(b"\x00" * size)
    # A small window: only the output exceeds the bound (the window cap has its own test).
    compressor = zstd.ZstdCompressor(options={zstd.CompressionParameter.window_log: 17})
    chunk = b"\x00" * MIB
    out = [compressor.compress(chunk) for _ in range(size // MIB)]
    return b"".join(out) + compressor.flush()


def sealed(type_tag: str, payload: bytes) -> tuple[str, bytes]:
    """A row as EncryptedSerializer writes it: ``payload`` sealed under inner tag ``type_tag``."""
    name, ciphertext = EnvKeyCipher(KEY).encrypt_with_tag(payload, type_tag)
    return f"{type_tag}+{name}", ciphertext


def test_tampered_compressed_row_is_refused_before_any_decompression() -> None:
    serde = encrypted(max_size=MIB)
    type_tag, data = serde.dumps_typed(chat(10))
    assert type_tag == "msgpack+zstd+aesgcm"
    with decompressor_calls() as entered:
        assert serde.loads_typed((type_tag, data)) == chat(10)
    assert entered == ["_unzstd"]  # the probe sees a real decompression

    tampered = bytearray(data)
    tampered[-40] ^= 1
    bomb_tag, bomb = sealed("msgpack+zstd", zstd_bomb(64 * MIB, declare_size=False))
    cases = {
        "flipped byte": (type_tag, bytes(tampered)),
        "relabelled zstd->zlib": ("msgpack+zlib+aesgcm", data),
        "relabelled to plain": ("msgpack+aesgcm", data),
        "truncated": (type_tag, data[:-1]),
        "tampered bomb": (bomb_tag, bomb[:-1] + bytes([bomb[-1] ^ 1])),
    }
    for name, row in cases.items():
        with decompressor_calls() as entered, pytest.raises(DecryptionError) as info:
            serde.loads_typed(row)
        assert entered == [], name
        assert "authentication" in str(info.value), name
        assert not isinstance(info.value, DecompressionError), name
    # The same bomb, untampered, does reach the decompressor, which refuses it.
    with decompressor_calls() as entered, pytest.raises(DecompressionBombError):
        serde.loads_typed((bomb_tag, bomb))
    assert entered == ["_unzstd"]


# --- bombs and malformed input ----------------------------------------------------------------


@contextmanager
def peak_allocation() -> Iterator[list[int]]:
    peak: list[int] = []
    tracemalloc.start()
    try:
        yield peak
    finally:
        peak.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()


@pytest.mark.parametrize(
    ("algorithm", "bomb"),
    [
        ("zstd", lambda: zstd_bomb(1024 * MIB, declare_size=True)),
        ("zstd", lambda: zstd_bomb(512 * MIB, declare_size=False)),
        ("zlib", lambda: zlib.compress(b"\x00" * (256 * MIB), 9)),
    ],
    ids=["zstd-declared", "zstd-undeclared", "zlib"],
)
def test_bombs_are_refused_within_the_bound(algorithm: str, bomb: Any) -> None:
    payload = bomb()
    assert len(payload) < 2 * MIB
    limit = MIB
    for serde in (
        CompressedSerializer(max_size=limit),
        EncryptedSerializer(EnvKeyCipher(KEY), CompressedSerializer(max_size=limit)),
    ):
        row = (
            (f"msgpack+{algorithm}", payload)
            if isinstance(serde, CompressedSerializer)
            else sealed(f"msgpack+{algorithm}", payload)
        )
        with peak_allocation() as peak, pytest.raises(DecompressionBombError) as info:
            serde.loads_typed(row)
        assert info.value.max_size == limit
        # Bounded by the limit (+1 byte), plus the input and interpreter noise:
        # the whole bomb would be hundreds of MiB.
        assert peak[0] < 3 * limit + len(payload), peak


def test_declared_size_is_refused_from_the_header_alone() -> None:
    payload = zstd_bomb(1024 * MIB, declare_size=True)
    assert zstd.get_frame_info(payload).decompressed_size == 1024 * MIB
    with decompressor_calls(), pytest.raises(DecompressionBombError, match="declares"):
        _compress.decompress("zstd", payload, MIB)


def test_a_frame_needing_a_window_beyond_the_bound_is_refused() -> None:
    """300 KB of output fits a 1 MiB bound, but a 128 MiB window does not: refused, not reserved."""
    data = b"abc" * 100_000
    options: dict[int, int] = {
        zstd.CompressionParameter.window_log: 27,
        zstd.CompressionParameter.content_size_flag: 0,
    }
    compressor = zstd.ZstdCompressor(options=options)
    payload = compressor.compress(data) + compressor.flush()
    assert zstd.get_frame_info(payload).decompressed_size is None
    assert zstd.decompress(payload) == data  # the control: zstd's own limit (2**27) admits it
    with pytest.raises(DecompressionError, match="window") as info:
        _compress.decompress("zstd", payload, MIB)
    assert type(info.value) is DecompressionError
    # The same content with a window inside the bound is read.
    options[zstd.CompressionParameter.window_log] = 20
    compressor = zstd.ZstdCompressor(options=options)
    payload = compressor.compress(data) + compressor.flush()
    assert _compress.decompress("zstd", payload, MIB) == data


def test_exact_bound_is_accepted_one_more_byte_is_not() -> None:
    for algorithm in ("zstd", "zlib"):
        for declare in (True, False):
            data = b"q" * 5000
            if algorithm == "zlib":
                payload = zlib.compress(data)
            elif declare:
                payload = zstd.compress(data)
            else:
                # A streamed frame declares no size; a small window keeps it within the cap.
                options: dict[int, int] = {zstd.CompressionParameter.window_log: 12}
                compressor = zstd.ZstdCompressor(options=options)
                payload = compressor.compress(data) + compressor.flush()
                assert zstd.get_frame_info(payload).decompressed_size is None
            assert _compress.decompress(algorithm, payload, 5000) == data
            with pytest.raises(DecompressionBombError):
                _compress.decompress(algorithm, payload, 4999)


@pytest.mark.parametrize("algorithm", ["zstd", "zlib"])
def test_malformed_values_raise_decompression_error(algorithm: str) -> None:
    data = b"some text " * 200
    good = zstd.compress(data) if algorithm == "zstd" else zlib.compress(data)
    bad = {
        "truncated": good[:-3],
        "trailing bytes": good + b"\x00",
        "two frames": good + good,
        "garbage": b"\x01\x02\x03\x04 not compressed at all",
        "empty": b"",
    }
    for name, payload in bad.items():
        with pytest.raises(DecompressionError):
            CompressedSerializer().loads_typed((f"msgpack+{algorithm}", payload))
        assert name


def test_zstd_dictionary_frames_are_refused() -> None:
    samples = [f"sample {i} {'abc' * i}".encode() for i in range(200)]
    dictionary = zstd.train_dict(samples, 1024)
    payload = zstd.compress(b"sample 5 abcabc" * 20, zstd_dict=dictionary)
    with pytest.raises(DecompressionError, match="dictionary"):
        _compress.decompress("zstd", payload)


def test_unknown_algorithm_and_bad_settings() -> None:
    with pytest.raises(DecompressionError):
        _compress.decompress("brotli", b"x")
    with pytest.raises(ConfigurationError):
        CompressedSerializer(algorithm="brotli")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        CompressedSerializer(level=99)
    with pytest.raises(ConfigurationError):
        CompressedSerializer(algorithm="zlib", level=10)
    for bad in (-1, True, 1.5):
        with pytest.raises(ConfigurationError):
            CompressedSerializer(min_size=bad)  # type: ignore[arg-type]
    for bad_max in (0, False, "1"):
        with pytest.raises(ConfigurationError):
            CompressedSerializer(max_size=bad_max)  # type: ignore[arg-type]


def test_errors_are_typed_and_picklable() -> None:
    with pytest.raises(DecompressionBombError) as info:
        _compress.decompress("zlib", zlib.compress(b"\x00" * 10_000), 100)
    error = info.value
    assert isinstance(error, DecompressionError)
    assert isinstance(error, DecryptionError)
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is DecompressionBombError
    assert copy.max_size == 100
    assert str(copy) == str(error)


def test_compression_of_reads_tags_with_and_without_cipher() -> None:
    assert _compress.compression_of("msgpack+zstd") == "zstd"
    assert _compress.compression_of("msgpack+zlib+aesgcm") == "zlib"
    assert _compress.compression_of("msgpack+pickle+zstd+aesgcm") == "zstd"
    assert _compress.compression_of("msgpack+aesgcm") is None
    assert _compress.compression_of("msgpack") is None
    assert _compress.compression_of("zstd") is None


def test_repr_names_settings_only() -> None:
    text = repr(encrypted())
    assert "CompressedSerializer" in text
    assert repr(CompressedSerializer(algorithm="zlib", level=3)) == (
        "CompressedSerializer(serde=JsonPlusSerializer, algorithm='zlib', level=3,"
        f" min_size={_compress.DEFAULT_MIN_SIZE}, max_size={_compress.DEFAULT_MAX_SIZE})"
    )


def test_allowlist_hook_reaches_the_inner_serializer() -> None:
    # An allowlist of None (strict mode's default) is one the hook extends.
    serde = CompressedSerializer(JsonPlusSerializer(allowed_msgpack_modules=None))
    assert isinstance(serde, JsonPlusSerializer)  # registered, so langgraph calls the hook
    clone = serde.with_msgpack_allowlist([("tests.graphs_support", "Profile")])
    assert clone is not serde
    assert type(clone) is CompressedSerializer
    assert clone.serde is not serde.serde
    assert clone.algorithm == serde.algorithm
    outer = encrypted(JsonPlusSerializer(allowed_msgpack_modules=None))
    outer_clone = outer.with_msgpack_allowlist([("tests.graphs_support", "Profile")])
    assert type(outer_clone.serde) is CompressedSerializer
    assert outer_clone.serde is not outer.serde


def test_without_zstd_installed_zlib_is_the_fallback() -> None:
    """In a fresh interpreter where the zstd backport cannot be imported (Python < 3.14)."""
    script = (
        "import sys\n"
        "sys.modules['backports.zstd'] = None\n"
        "from secure_serde import CompressedSerializer, ConfigurationError, DecompressionError\n"
        "from secure_serde.serde._compress import zstd_available\n"
        "serde = CompressedSerializer()\n"
        "row = serde.dumps_typed('x' * 5000)\n"
        "print(zstd_available(), serde.algorithm, row[0], serde.loads_typed(row) == 'x' * 5000)\n"
        "try:\n"
        "    CompressedSerializer(algorithm='zstd')\n"
        "except ConfigurationError as exc:\n"
        "    print('config:', exc)\n"
        "try:\n"
        "    serde.loads_typed(('msgpack+zstd', bytes.fromhex(sys.argv[1])))\n"
        "except DecompressionError as exc:\n"
        "    print('read:', exc)\n"
    )
    zstd_row = CompressedSerializer().dumps_typed("y" * 5000)[1]
    proc = subprocess.run(
        [sys.executable, "-c", script, zstd_row.hex()],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    if sys.version_info >= (3, 14):  # pragma: no cover - compression.zstd is in the stdlib
        assert lines[0].startswith("True zstd")
        return
    assert lines[0] == "False zlib msgpack+zlib True"
    assert lines[1].startswith("config:")
    assert "secure-serde[zstd]" in lines[1]
    assert lines[2].startswith("read:")
    assert "secure-serde[zstd]" in lines[2]


def test_compressed_tag_on_a_legacy_row_is_refused_before_decryption() -> None:
    """langgraph's built-in format never stored compressed values and does not bind its tag."""
    from langgraph.checkpoint.serde.encrypted import (
        EncryptedSerializer as LangGraphEncryptedSerializer,
    )

    from secure_serde.passes import Planner, Unreadable
    from secure_serde.stores import Cell, RowRef

    legacy = LangGraphEncryptedSerializer.from_pycryptodome_aes(key=KEY)
    type_tag, data = legacy.dumps_typed(chat(3))
    assert type_tag == "msgpack+aes"
    ours = EncryptedSerializer.from_pycryptodome_aes(key=KEY, compress=True)
    assert ours.loads_typed((type_tag, data)) == chat(3)  # the control: it reads the row
    with decompressor_calls() as entered, pytest.raises(DecryptionError, match="tag was changed"):
        ours.loads_typed(("msgpack+zstd+aes", data))
    assert entered == []

    planner = Planner(EnvKeyCipher(KEY), compress=CompressedSerializer())
    ref = RowRef("writes", (("thread_id", "t"), ("idx", 0)))
    assert not isinstance(planner.plan(Cell(ref, type_tag, data)), Unreadable)
    outcome = planner.plan(Cell(ref, "msgpack+zstd+aes", data))
    assert isinstance(outcome, Unreadable)
    assert "tag was changed" in outcome.reason


def test_excluded_types_are_never_compressed() -> None:
    from tests.graphs_support import Profile

    record = Profile(name="Ada", tags=[f"note {i}" for i in range(200)])
    serde = CompressedSerializer(exclude=[Profile])
    type_tag, data = serde.dumps_typed(record)
    assert type_tag == "msgpack"
    assert data == JsonPlusSerializer().dumps_typed(record)[1]
    assert serde.loads_typed((type_tag, data)) == record
    # Other values, and the same type without exclude=, are compressed.
    assert serde.dumps_typed(chat(3))[0] == "msgpack+zstd"
    assert CompressedSerializer().dumps_typed(record)[0] == "msgpack+zstd"
    with pytest.raises(ConfigurationError):
        CompressedSerializer(exclude=["Profile"])  # type: ignore[list-item]
