"""The fuzz campaign's short run: every target, a few thousand mutated seeds, in the suite.

The long runs are atheris (``tests/fuzz/fuzz_*.py``, docs/fuzzing.md). Here
the same target functions run over the same seeds, mutated by the
operations libFuzzer uses most (bit flips, inserts, erases, truncation,
splicing two seeds, random bytes) from a fixed random seed, so a change
that lets anything but a `SecureSerdeError` escape fails the suite, and
the failing input is printed as hex. One harness also runs under atheris in
a subprocess, so the harness scripts cannot rot unnoticed.

Each input that a long run (or its review) found to crash is kept below
and replayed through its target (`REGRESSIONS`).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from secure_serde import DecryptionError
from tests.fuzz import _cli, _targets, seeds
from tests.fuzz import _fixtures as fx

REPO_ROOT = Path(__file__).resolve().parents[1]

TARGETS: dict[str, Callable[[bytes], None]] = {**_targets.TARGETS, "cli": _cli.cli}
# Inputs per target: a few thousand where one costs microseconds; the CLI
# reads a whole store per input, and the legacy reader runs pycryptodome's EAX.
CASES = {"cli": 200, "legacy_aes": 1000, "pickle_fallback": 2000}
DEFAULT_CASES = 3000


@cache
def _seeds(name: str) -> tuple[bytes, ...]:
    return tuple(seeds.seeds(name))


def _mutate(rng: random.Random, pool: tuple[bytes, ...]) -> bytes:
    if rng.random() < 0.1:
        return rng.randbytes(rng.randrange(200))
    data = bytearray(rng.choice(pool))
    for _ in range(rng.randrange(1, 5)):
        at = rng.randrange(len(data) + 1)
        kind = rng.randrange(5)
        if kind == 0:
            data[at:at] = rng.randbytes(rng.randrange(1, 9))
        elif kind == 1:
            del data[at : at + rng.randrange(1, 9)]
        elif kind == 2 and data:
            data[at % len(data)] ^= 1 << rng.randrange(8)
        elif kind == 3:
            del data[at:]
        else:
            other = rng.choice(pool)
            data[at:] = other[rng.randrange(len(other) + 1) :]
    return bytes(data)


def _cases(name: str) -> Iterator[bytes]:
    pool = _seeds(name)
    yield from pool
    rng = random.Random(f"secure_serde fuzz {name}")  # noqa: S311 - reproducible, not secret
    for _ in range(CASES.get(name, DEFAULT_CASES)):
        yield _mutate(rng, pool)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_only_secure_serde_errors_escape(name: str) -> None:
    target = TARGETS[name]
    for data in _cases(name):
        try:
            target(data)
        except Exception as exc:
            raise AssertionError(
                f"{type(exc).__name__} escaped {name} for input {data.hex()}"
            ) from exc


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_seeds_exist(name: str) -> None:
    assert len(_seeds(name)) >= 5


# (target, crashing input, what it found): replayed as they are. Inputs are
# hex, except where a run of one repeated byte is the point.
REGRESSIONS: list[tuple[str, bytes, str]] = [
    (
        "cli",
        bytes.fromhex("0100000000000000"),
        "inspect: a NULL type column raised AttributeError in EncryptedSerializer.loads_typed",
    ),
    (
        "cli",
        bytes.fromhex("0100000000020009") + b"[" * 3000,
        "inspect: metadata JSON nested deeper than the stack raised RecursionError",
    ),
    (
        "keyring_json",
        bytes.fromhex("02") + b"[" * 100_000,
        "a keyring file nested deeper than the stack raised RecursionError",
    ),
    (
        "keyring_json",
        bytes.fromhex("027b226c65676163795f6d6f6465223a205b5d7d"),
        'a keyring file with "legacy_mode": [] raised TypeError (unhashable list)',
    ),
    (
        "pickle_fallback",
        bytes.fromhex("00d40580"),
        "msgpack+pickle: JsonPlus's ext hook raised KeyError for ext 5 over an empty map,"
        " and the decoder re-raised it as it was",
    ),
    (
        "kms_header",
        bytes.fromhex("00") + b"[" * 100_000,
        "SECURE_SERDE_KMS_ENCRYPTION_CONTEXT nested deeper than the stack raised RecursionError",
    ),
]


@pytest.mark.parametrize(
    ("name", "data"),
    [(name, data) for name, data, _ in REGRESSIONS],
    ids=[f for *_, f in REGRESSIONS],
)
def test_regression(name: str, data: bytes) -> None:
    TARGETS[name](data)


@pytest.mark.parametrize(
    "row",
    [
        (None, b"\x01"),
        (7, b"\x01"),
        ("msgpack+aesgcm", None),
        ("msgpack+aes", "text"),
        ("json+aesgcm", 5),
    ],
)
def test_serializer_refuses_cells_of_another_sql_type(row: tuple[Any, Any]) -> None:
    """A NULL or non-text type column, or a non-BLOB value, is a typed refusal, not a crash."""
    serde = fx.env_serde()
    with pytest.raises(DecryptionError, match=r"not (str|bytes)"):
        serde.loads_typed(row)


# Finding F6: numpy's ndarray.__setstate__ reads past the end of the list it
# is given when an object-dtype array's shape asks for more items (here 3
# items, 1 given). This 152-byte pickle is ``_reconstruct(ndarray, (0,), b"b")``
# and then BUILD ``(1, (3,), dtype("O"), False, ["k"])``, all admitted by the
# NUMPY preset; read through the authenticated path, it kills the process.
SHORT_OBJECT_STATE_PICKLE = bytes.fromhex(
    "8005958d000000000000008c166e756d70792e5f636f72652e6d756c74696172726179948c0c5f72"
    "65636f6e7374727563749493948c056e756d7079948c076e6461727261799493944b0085944301"
    "629487945294284b014b03859468038c0564747970659493948c024f3894898887945294284b03"
    "8c017c944e4e4e4affffffff4affffffff4b3f749462895d948c016b94617494622e"
)
_READ_IN_A_CHILD = """
import sys
from secure_serde import EncryptedSerializer, UnsafePickleError
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.pickling import NUMPY, PickleFallbackSerializer
from tests.fuzz._fixtures import KEY
from tests.fuzz._targets import embed_pickle
serde = EncryptedSerializer(EnvKeyCipher(KEY), PickleFallbackSerializer(allowed=[NUMPY]))
payload = embed_pickle(bytes.fromhex(sys.argv[1]))
name, blob = serde.cipher.encrypt_with_tag(payload, "msgpack+pickle")
try:
    serde.loads_typed(("msgpack+pickle+" + name, blob))
except UnsafePickleError:
    print("refused")
"""


def test_short_object_array_state_is_refused_not_a_crash() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _READ_IN_A_CHILD, SHORT_OBJECT_STATE_PICKLE.hex()],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (result.returncode, result.stdout.strip()) == (0, "refused"), result.stderr[-2000:]


def test_atheris_harness_runs(tmp_path: Path) -> None:
    """One harness under atheris for a few thousand inputs, as docs/fuzzing.md runs them all."""
    pytest.importorskip("atheris")
    corpus = tmp_path / "corpus"
    result = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "tests" / "fuzz" / "fuzz_kms_header.py"),
            str(corpus),
            "-runs=2000",
            "-timeout=1",
            "-rss_limit_mb=2048",
            f"-artifact_prefix={tmp_path}/",
            "-seed=1",
        ],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Done 2000 runs" in result.stderr
    assert len(list(corpus.iterdir())) >= len(_seeds("kms_header"))
    assert not list(tmp_path.glob("crash-*"))
