"""Values that would barely shrink are stored uncompressed: each read would decompress them."""

from __future__ import annotations

import random

import pytest

from secure_serde import CompressedSerializer
from secure_serde.serde._compress import MIN_SAVED_BYTES, MIN_SAVED_FRACTION


def _noise(size: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(size)  # noqa: S311 - test data, not a secret


def _saving(serde: CompressedSerializer, data: bytes) -> int:
    return len(data) - len(serde._compress(data))


@pytest.mark.parametrize("algorithm", ["zstd", "zlib"])
def test_a_value_is_compressed_only_when_it_saves_an_eighth_and_64_bytes(algorithm: str) -> None:
    serde = CompressedSerializer(algorithm=algorithm)  # type: ignore[arg-type]
    random_part = _noise(4000, 1)
    seen = {"kept": 0, "compressed": 0}
    # Random bytes with a growing run of zeros: the saving grows from nothing to most of it.
    for zeros in range(0, 4000, 50):
        data = random_part[: 4000 - zeros] + b"\x00" * zeros
        saved = _saving(serde, data)
        tag, stored = serde.compress_encoded("msgpack", data)
        enough = saved >= max(MIN_SAVED_BYTES, len(data) // MIN_SAVED_FRACTION)
        if enough:
            assert tag == f"msgpack+{algorithm}"
            assert len(stored) == len(data) - saved
            seen["compressed"] += 1
        else:
            assert (tag, stored) == ("msgpack", data)
            seen["kept"] += 1
    assert seen["kept"] > 3
    assert seen["compressed"] > 3


def test_small_values_must_save_64_bytes_even_when_that_is_more_than_an_eighth() -> None:
    serde = CompressedSerializer(min_size=0)
    # 300 bytes: an eighth is 37 bytes, so the 64-byte floor decides.
    data = _noise(230, 2) + b"\x00" * 70
    saved = _saving(serde, data)
    assert len(data) // MIN_SAVED_FRACTION < saved < MIN_SAVED_BYTES
    assert serde.compress_encoded("msgpack", data) == ("msgpack", data)
    more = _noise(200, 3) + b"\x00" * 100
    assert _saving(serde, more) >= MIN_SAVED_BYTES
    assert serde.compress_encoded("msgpack", more)[0] == "msgpack+zstd"
