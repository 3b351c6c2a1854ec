"""The fuzz campaign's short run: every target, a few thousand mutated seeds, in the suite.

The long runs are atheris (``tests/fuzz/fuzz_*.py``, docs/fuzzing.md). Here
hypothesis drives the same target functions over the same seeds, mutated
by the operations libFuzzer uses most (bit flips, inserts, erases,
truncation, splicing two seeds), so a change that lets anything but a
`SecureSerdeError` escape fails the suite. One harness also runs under
atheris in a subprocess, so the harness scripts cannot rot unnoticed.

Each input that a long run found to crash is kept below as hex and
replayed through its target (`REGRESSIONS`).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from secure_serde import DecryptionError
from tests.fuzz import _cli, _targets, seeds
from tests.fuzz import _fixtures as fx

REPO_ROOT = Path(__file__).resolve().parents[1]

TARGETS: dict[str, Callable[[bytes], None]] = {**_targets.TARGETS, "cli": _cli.cli}
# Examples per target: a few thousand where one costs microseconds; the CLI
# reads a whole store per input, and the legacy reader runs pycryptodome's EAX.
EXAMPLES = {"cli": 150, "legacy_aes": 600, "pickle_fallback": 1500, "keyring_json": 1500}
DEFAULT_EXAMPLES = 2500


@cache
def _seeds(name: str) -> tuple[bytes, ...]:
    return tuple(seeds.seeds(name))


@st.composite
def mutated(draw: Any, name: str) -> bytes:
    """A seed of ``name`` after up to four libFuzzer-style mutations."""
    pool = _seeds(name)
    data = bytearray(draw(st.sampled_from(pool)))
    operations = st.tuples(st.integers(0, 4), st.integers(0, 1 << 16), st.binary(max_size=8))
    for kind, at, chunk in draw(st.lists(operations, max_size=4)):
        at %= len(data) + 1
        if kind == 0:
            data[at:at] = chunk
        elif kind == 1:
            del data[at : at + 1 + len(chunk)]
        elif kind == 2 and data:
            data[at % len(data)] ^= chunk[0] if chunk else 0x80
        elif kind == 3:
            del data[at:]
        else:
            other = draw(st.sampled_from(pool))
            data[at:] = other[at % (len(other) + 1) :]
    return bytes(data)


def _inputs(name: str) -> st.SearchStrategy[bytes]:
    return st.one_of(mutated(name), st.binary(max_size=200))


def _short_run(name: str) -> Callable[[], None]:
    @settings(
        max_examples=EXAMPLES.get(name, DEFAULT_EXAMPLES),
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(data=_inputs(name))
    def run(data: bytes) -> None:
        TARGETS[name](data)

    return run


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_only_secure_serde_errors_escape(name: str) -> None:
    # Seeds first: every one must pass as it is, so a seed that stopped
    # reaching its code (a changed layout) shows up as a failure below.
    for seed in _seeds(name):
        TARGETS[name](seed)
    _short_run(name)()


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
        ("json+kms", 5),
    ],
)
def test_serializer_refuses_cells_of_another_sql_type(row: tuple[Any, Any]) -> None:
    """A NULL or non-text type column, or a non-BLOB value, is a typed refusal, not a crash."""
    serde = fx.env_serde()
    with pytest.raises(DecryptionError, match=r"not (str|bytes)"):
        serde.loads_typed(row)


def test_atheris_harness_runs(tmp_path: Path) -> None:
    """One harness under atheris for a few thousand inputs, as docs/fuzzing.md runs them all."""
    pytest.importorskip("atheris")
    corpus = tmp_path / "corpus"
    result = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "tests" / "fuzz" / "fuzz_kms_header.py"),
            str(corpus),
            "-runs=3000",
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
    assert "Done 3000 runs" in result.stderr
    assert len(list(corpus.iterdir())) >= len(_seeds("kms_header"))
    assert not list(tmp_path.glob("crash-*"))
