"""The reused zstd decompression context (python-zstandard) reads what the stdlib path reads.

Every payload here goes through both readers: the reused per-thread
context, and the single-use standard-library decompressor it replaces for
frames that declare their size. They must agree on every output and on the
type of every refusal.
"""

from __future__ import annotations

import threading
import zlib
from typing import Any

import pytest
from backports import zstd

from secure_serde import DecompressionBombError, DecompressionError
from secure_serde.serde import _compress

zstandard = pytest.importorskip("zstandard")

MIB = 1024 * 1024
TEXT = b"the quick brown fox jumps over the lazy dog, " * 300


def _streamed(data: bytes, window_log: int) -> bytes:
    options: dict[int, int] = {
        zstd.CompressionParameter.window_log: window_log,
        zstd.CompressionParameter.content_size_flag: 0,
    }
    compressor = zstd.ZstdCompressor(options=options)
    return compressor.compress(data) + compressor.flush()


def _declared_wide_window() -> bytes:
    """A frame that declares its size but asks for a 128 MiB window."""
    options: dict[int, int] = {
        zstd.CompressionParameter.window_log: 27,
        zstd.CompressionParameter.content_size_flag: 1,
    }
    compressor = zstd.ZstdCompressor(options=options)
    return compressor.compress(TEXT * 20, mode=zstd.ZstdCompressor.FLUSH_FRAME)


def _payloads() -> dict[str, bytes]:
    good = zstd.compress(TEXT)
    samples = [f"sample {i} {'abc' * i}".encode() for i in range(200)]
    dictionary = zstd.train_dict(samples, 1024)
    return {
        "good": good,
        "empty value": zstd.compress(b""),
        "declared past the bound": zstd.compress(b"\x00" * (2 * MIB)),
        "exactly the bound": zstd.compress(b"q" * MIB),
        "truncated": good[:-3],
        "cut in the header": good[:4],
        "trailing byte": good + b"\x00",
        "two frames": good + good,
        "garbage": b"\x01\x02\x03\x04 not compressed at all",
        "empty": b"",
        "zlib bytes": zlib.compress(TEXT),
        "dictionary": zstd.compress(b"sample 5 abcabc" * 20, zstd_dict=dictionary),
        "flipped byte": good[:20] + bytes([good[20] ^ 0xFF]) + good[21:],
        "wide window, declared": _declared_wide_window(),
        "streamed, no size": _streamed(TEXT, 12),
        "streamed, wide window": _streamed(TEXT, 27),
    }


def _outcome(monkeypatch: pytest.MonkeyPatch, fast: Any, payload: bytes) -> Any:
    monkeypatch.setattr(_compress, "_fast_zstd", fast)
    try:
        return _compress.decompress("zstd", payload, MIB)
    except DecompressionError as exc:
        return type(exc)


@pytest.mark.parametrize(("name", "payload"), sorted(_payloads().items()))
def test_the_reused_context_reads_and_refuses_as_the_stdlib_path(
    monkeypatch: pytest.MonkeyPatch, name: str, payload: bytes
) -> None:
    reused = _outcome(monkeypatch, zstandard, payload)
    single_use = _outcome(monkeypatch, None, payload)
    assert reused == single_use, name
    if name in ("good", "exactly the bound", "empty value", "streamed, no size"):
        assert isinstance(reused, bytes)
    if name == "declared past the bound":
        assert reused is DecompressionBombError


def test_the_reused_path_refuses_from_the_header_before_decompressing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A declared size past the bound never reaches a decompressor."""
    monkeypatch.setattr(_compress, "_fast_zstd", zstandard)
    monkeypatch.setattr(_compress, "_REUSED", _compress._ReusedDecompressors())
    with pytest.raises(DecompressionBombError, match="declares"):
        _compress.decompress("zstd", zstd.compress(b"\x00" * (4 * MIB)), MIB)
    assert _compress._REUSED.by_window == {}


def test_one_context_per_thread_and_window_bound_is_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_compress, "_fast_zstd", zstandard)
    monkeypatch.setattr(_compress, "_REUSED", _compress._ReusedDecompressors())
    payload = zstd.compress(TEXT)
    for _ in range(3):
        assert _compress.decompress("zstd", payload, MIB) == TEXT
    assert _compress.decompress("zstd", payload, 64 * MIB) == TEXT
    mine = dict(_compress._REUSED.by_window)
    assert sorted(mine) == [20, 26]
    seen: list[dict[int, Any]] = []

    def other_thread() -> None:
        assert _compress.decompress("zstd", payload, MIB) == TEXT
        seen.append(dict(_compress._REUSED.by_window))

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert list(seen[0]) == [20]
    assert seen[0][20] is not mine[20]
    assert _compress._REUSED.by_window[20] is mine[20]


def test_a_failed_read_leaves_the_context_usable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_compress, "_fast_zstd", zstandard)
    good = zstd.compress(TEXT)
    for bad in (good[:-3], good + b"\x00", b"\x28\xb5\x2f\xfd" + b"\xff" * 40):
        with pytest.raises(DecompressionError):
            _compress.decompress("zstd", bad, MIB)
        assert _compress.decompress("zstd", good, MIB) == TEXT
