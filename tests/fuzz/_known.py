"""Recognising inputs that hit a finding already reported, so a long run can go past it.

Finding F6 (docs/fuzzing.md): numpy's ``ndarray.__setstate__`` reads past
the end of the list it is given for an object-dtype array whose shape asks
for more items than the list holds, and the process dies with SIGSEGV. The
pickle scan and the restricted unpickler admit such a state today. Until the
pickling layer refuses it, `pickle_fallback` skips inputs whose pickles
would make that call, and tests/test_fuzz_short.py keeps the crashing input
as a strict ``xfail``, run in a subprocess.

The check replays each embedded pickle with the pure-Python unpickler,
resolving globals through the same restricted ``find_class``, and stops at
the first ``BUILD`` that would hand numpy such a state. It runs only in the
fuzz harness.
"""

from __future__ import annotations

import contextlib
import io
import math
import pickle
from typing import Any, ClassVar

import numpy as np
import ormsgpack

from secure_serde.pickling import EXT_PICKLE
from secure_serde.pickling._scan import Admission, scan
from secure_serde.pickling._unpickler import _RestrictedUnpickler

__all__ = ["numpy_object_state_crash"]


class _Found(Exception):
    """The pickle would call ndarray.__setstate__ with too short an object list."""


def _short_object_state(inst: Any, state: Any) -> bool:
    if not isinstance(inst, np.ndarray) or not isinstance(state, tuple) or len(state) != 5:
        return False
    _, shape, dtype, _, raw = state
    if not isinstance(raw, list) or not isinstance(shape, tuple):
        return False
    if not isinstance(dtype, np.dtype) or not dtype.hasobject:
        return False
    try:
        wanted = math.prod(int(n) for n in shape)
    except (TypeError, ValueError):
        return False
    return len(raw) < wanted


class _Replay(pickle._Unpickler):
    def __init__(self, data: bytes, admission: Admission) -> None:
        super().__init__(io.BytesIO(data), fix_imports=False)
        self.find_class = _RestrictedUnpickler(data, admission).find_class  # type: ignore[method-assign]

    def load_build(self) -> None:
        if _short_object_state(self.stack[-2], self.stack[-1]):  # type: ignore[attr-defined]
            raise _Found
        super().load_build()  # type: ignore[misc]

    dispatch: ClassVar[dict[int, Any]] = dict(pickle._Unpickler.dispatch)
    dispatch[pickle.BUILD[0]] = load_build


def _pickles(payload: bytes) -> list[bytes]:
    found: list[bytes] = []

    def hook(code: int, data: bytes) -> Any:
        if code == EXT_PICKLE:
            found.append(data)
        else:
            for start in (0, 1):  # JsonPlus payloads, and ext 81's code byte first
                try:
                    ormsgpack.unpackb(
                        data[start:], ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS
                    )
                except Exception:  # noqa: S112 - not every payload is msgpack
                    continue
        return None

    # A malformed payload holds no pickle the decoder would reach.
    with contextlib.suppress(Exception):
        ormsgpack.unpackb(payload, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
    return found


def numpy_object_state_crash(payload: bytes, admission: Admission) -> bool:
    """True if reading ``payload`` would reach finding F6."""
    for data in _pickles(payload):
        try:
            scan(data, admission)
            _Replay(data, admission).load()
        except _Found:
            return True
        except Exception:  # noqa: S112 - the real read reports every other failure
            continue
    return False
