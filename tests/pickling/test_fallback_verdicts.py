"""The scan-verdict cache: keyed by admission and exact bytes, passes only, bounded.

Serializers with different ``allowed=`` lists live side by side in one
process; a pickle that passed one's scan must still be scanned, and refused,
by the other.
"""

from __future__ import annotations

import pickle

import numpy as np
import ormsgpack
import pandas as pd
import pytest

from secure_serde import PickleFallbackSerializer, UnsafePickleError
from secure_serde.pickling import NUMPY, PANDAS, TAG, Preset, _unpickler
from secure_serde.pickling._scan import Admission
from secure_serde.pickling._verdicts import ScanVerdicts, _digest
from tests.pickling.test_fallback_build import GADGETS, admission
from tests.pickling.test_fallback_hostile import framed, glob

# numpy.ndarray called directly: admitted as a callable by a bare pair, but only as an
# argument by the NUMPY preset (its pickles never call it).
CALLS_NDARRAY = framed(
    glob("numpy", "ndarray") + pickle.BININT1 + b"\x03" + pickle.TUPLE1 + pickle.NEWOBJ
)


def serde(allowed: list[type | Preset | tuple[str, str]]) -> PickleFallbackSerializer:
    return PickleFallbackSerializer(allowed=allowed, allow_unauthenticated=True)


def payload(pickled: bytes) -> tuple[str, bytes]:
    return TAG, ormsgpack.packb([ormsgpack.Ext(80, pickled)])


def test_a_pass_under_one_allowlist_is_not_a_pass_under_another() -> None:
    broad = serde([("numpy", "ndarray")])
    narrow = serde([NUMPY])
    assert broad.loads_typed(payload(CALLS_NDARRAY))[0].shape == (3,)
    assert len(broad._policy.verdicts) == 1
    for _ in range(2):
        with pytest.raises(UnsafePickleError, match="admitted only as an argument"):
            narrow.loads_typed(payload(CALLS_NDARRAY))
    assert len(narrow._policy.verdicts) == 0


def test_one_cache_keys_by_admission_too() -> None:
    verdicts = ScanVerdicts()
    callable_ndarray = Admission(frozenset({("numpy", "ndarray")}))
    argument_only = Admission(
        frozenset({("numpy", "ndarray")}), uncallable=frozenset({("numpy", "ndarray")})
    )
    verdicts.scan(CALLS_NDARRAY, callable_ndarray)
    with pytest.raises(UnsafePickleError, match="admitted only as an argument"):
        verdicts.scan(CALLS_NDARRAY, argument_only)
    assert len(verdicts) == 1


def test_writes_and_reads_of_the_same_bytes_share_one_pass() -> None:
    fallback = serde([PANDAS])
    frame = pd.DataFrame({"n": np.arange(4), "s": list("abcd")})
    for _ in range(3):
        out = fallback.loads_typed(fallback.dumps_typed({"f": frame}))
        pd.testing.assert_frame_equal(out["f"], frame)
    assert len(fallback._policy.verdicts) == 1
    changed = frame.assign(n=frame["n"] + 1)
    fallback.loads_typed(fallback.dumps_typed({"f": changed}))
    assert len(fallback._policy.verdicts) == 2


def test_refusals_are_never_remembered() -> None:
    verdicts = ScanVerdicts()
    for _ in range(2):
        with pytest.raises(UnsafePickleError, match="dunder"):
            verdicts.scan(GADGETS["dict-ndarray"], admission())
    assert len(verdicts) == 0


def test_the_cache_is_bounded() -> None:
    verdicts = ScanVerdicts(max_entries=2)
    numpy = serde([NUMPY])._policy.admission
    pickles = [pickle.dumps(np.arange(n), protocol=5) for n in range(3)]
    for pickled in pickles:
        verdicts.scan(pickled, numpy)
    assert len(verdicts) == 2
    assert (numpy, _digest(pickles[0])) not in verdicts._passed


def test_a_cached_pass_never_skips_the_run_time_checks() -> None:
    """Even a (forged) cached pass for a gadget leaves the unpickler's own BUILD check."""
    verdicts = ScanVerdicts()
    gadget = GADGETS["dataframe-ndarray"]
    verdicts._passed[(admission(), _digest(gadget))] = None
    with pytest.raises(UnsafePickleError, match="dunder"):
        _unpickler.load(gadget, admission(), verdicts)
