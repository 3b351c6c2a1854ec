"""Loading one embedded pickle: the static scan, then an unpickler that knows only admitted globals.

The scan (`_scan.scan`) proves, before anything runs, that every global the
pickle names is admitted, that no call result is called again and that no
BUILD state plants a dunder name or a callable. The unpickler enforces the
allowlist again at run time in ``find_class``, hands out a ``getattr`` that
reaches only the admitted (class, attribute) pairs, and checks every BUILD
state on the real objects before applying it. Any failure, including one
inside an admitted helper, raises `UnsafePickleError`; the value is never
replaced by a default.
"""

from __future__ import annotations

import io
import math
import pickle
import sys
from collections.abc import Callable
from typing import Any, ClassVar, Final, cast

from secure_serde._errors import ForbiddenGlobalError, UnsafePickleError
from secure_serde.pickling._scan import GETATTR, Admission, is_dunder, scan
from secure_serde.pickling._verdicts import ScanVerdicts

__all__ = ["PICKLE_PROTOCOL", "dump", "load"]

# Protocol 5 keeps array buffers in band as bytearrays, so arrays come back writable.
PICKLE_PROTOCOL: Final = 5
# numpy pickles an array as _reconstruct(cls, (0,), b"b") followed by its state; any
# other shape would make numpy allocate whatever the pickle asks for before the state
# (whose size the pickle's length bounds) replaces it.
_EMPTY_ONLY: Final = frozenset(
    {("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "_reconstruct")}
)


def _empty_only(reconstruct: Callable[..., Any]) -> Callable[..., Any]:
    def guarded_reconstruct(*args: Any) -> Any:
        if len(args) != 3 or args[1] != (0,):
            raise UnsafePickleError("refusing a pickle that reconstructs a non-empty array")
        return reconstruct(*args)

    return guarded_reconstruct


# Leaves of a BUILD state that need no further look.
_PLAIN: Final = frozenset({str, bytes, bytearray, int, float, bool, complex, type(None)})


def _bad_state(what: str) -> UnsafePickleError:
    return UnsafePickleError(f"refusing a pickle with a BUILD state that sets {what}")


def check_state(state: Any, nested: bool = True) -> None:
    """Refuse a BUILD state that sets a dunder name or a callable.

    The scan's rule, on the real objects: the state, the tuples it holds
    and the dicts BUILD applies (the state dict, a slot-state dict, a dict
    in a tuple state) may hold no callable; those dicts' keys may not be
    dunder names, nor str subclasses, which can equal one. ``nested=False``
    (a numpy dtype's state, whose fields dict is keyed by field names)
    checks dict keys only in the state itself.
    """
    pending = [state]
    while pending:
        item = pending.pop()
        if type(item) in _PLAIN:
            continue
        if callable(item):
            raise _bad_state(f"a callable ({type(item).__name__})")
        if isinstance(item, tuple):
            pending += item
        elif isinstance(item, dict) and (nested or item is state):
            for key, value in item.items():
                if isinstance(key, str) and (type(key) is not str or is_dunder(key)):
                    raise _bad_state("a dunder name")
                if callable(value):
                    raise _bad_state(f"a callable ({type(value).__name__})")


_BUILD: Final = pickle.BUILD[0]
_SHORT_BINUNICODE: Final = pickle.SHORT_BINUNICODE
_MEMOIZE: Final = pickle.MEMOIZE
_APPLY_BUILD: Final = pickle._Unpickler.dispatch[_BUILD]


class _Done(Exception):
    """Raised by STOP with the loaded value."""

    def __init__(self, value: Any) -> None:
        super().__init__()
        self.value = value


def _stop(unpickler: pickle.Unpickler) -> None:
    raise _Done(cast(Any, unpickler).stack.pop())


def _skip_frame(unpickler: pickle.Unpickler) -> None:
    # The whole pickle is in memory: a frame's contents follow inline.
    if len(cast(Any, unpickler).read(8)) != 8:
        raise EOFError


def _guarded_build(unpickler: pickle.Unpickler) -> None:
    stack: list[Any] = cast(Any, unpickler).stack
    if not stack:
        raise UnsafePickleError("refusing a malformed pickle: stack underflow")
    numpy = sys.modules.get("numpy")
    dtype = numpy is not None and len(stack) > 1 and isinstance(stack[-2], numpy.dtype)
    check_state(stack[-1], nested=not dtype)
    if numpy is not None and len(stack) > 1 and isinstance(stack[-2], numpy.ndarray):
        _check_array_state(numpy, stack[-1])
    _APPLY_BUILD(unpickler)


def _check_array_state(numpy: Any, state: Any) -> None:
    """Refuse an object-array state whose item list does not fill its shape.

    numpy's ``ndarray.__setstate__`` trusts the list's length and reads past
    its end otherwise: a crash of the process, or worse (fuzzing finding F6).
    """
    if not isinstance(state, tuple) or len(state) not in (4, 5):
        return  # numpy itself refuses other shapes of state with a TypeError
    shape, dtype, items = state[-4], state[-3], state[-1]
    if not isinstance(dtype, numpy.dtype) or not dtype.hasobject:
        return
    if not isinstance(shape, tuple) or not all(type(n) is int and n >= 0 for n in shape):
        raise UnsafePickleError("refusing a pickle with a malformed object-array shape")
    if not isinstance(items, list) or len(items) != math.prod(shape):
        raise UnsafePickleError("refusing a pickle whose object-array items do not match its shape")


class _RestrictedUnpickler(pickle._Unpickler):
    """The pure-Python unpickler: BUILD is an opcode the C unpickler offers no hook for."""

    dispatch: ClassVar[dict[int, Callable[[pickle.Unpickler], None]]] = {
        **pickle._Unpickler.dispatch,
        _BUILD: _guarded_build,
        pickle.STOP[0]: _stop,
        pickle.FRAME[0]: _skip_frame,
    }

    def __init__(self, data: bytes, admission: Admission) -> None:
        self._data = io.BytesIO(data)
        super().__init__(self._data, fix_imports=False)
        self._admission = admission

    def load(self) -> Any:
        """``pickle._Unpickler.load``, reading from memory without its pure-Python unframer.

        The unframer costs a Python call per read, which was a third of the
        load. The two opcodes that make up most pickles of text columns
        (SHORT_BINUNICODE and MEMOIZE) run inline, exactly as their handlers
        would; every other opcode goes to its handler.
        """
        state = cast(Any, self)
        state.read = read = self._data.read
        state.readinto = self._data.readinto
        state.readline = self._data.readline
        state.metastack = []
        state.stack = []
        state.append = state.stack.append
        state.proto = 0
        dispatch = self.dispatch
        memo = state.memo
        try:
            while True:
                key = read(1)
                if key == _SHORT_BINUNICODE:
                    state.append(str(read(read(1)[0]), "utf-8", "surrogatepass"))
                elif key == _MEMOIZE:
                    memo[len(memo)] = state.stack[-1]
                elif key:
                    dispatch[key[0]](state)
                else:
                    raise EOFError
        except _Done as done:
            return done.value

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) == GETATTR and self._admission.methods:
            return self._guarded_getattr()
        if (module, name) not in self._admission.globals:
            raise ForbiddenGlobalError(
                f"refusing a pickle that names {module}.{name}, which is not admitted",
                module=module,
                name=name,
            )
        found = super().find_class(module, name)
        if (module, name) in _EMPTY_ONLY:
            return _empty_only(found)
        return found

    def persistent_load(self, pid: Any) -> Any:
        raise UnsafePickleError("refusing a pickle that uses persistent ids")

    def _guarded_getattr(self) -> Callable[[Any, str], Any]:
        pairs = [
            (super(_RestrictedUnpickler, self).find_class(module, qualname), attribute)
            for module, qualname, attribute in sorted(self._admission.methods)
            if (module, qualname) in self._admission.globals
        ]

        def guarded_getattr(obj: Any, attribute: str) -> Any:
            for owner, allowed in pairs:
                if obj is owner and attribute == allowed:
                    return getattr(owner, allowed)
            raise UnsafePickleError("refusing a pickle that reaches an attribute not admitted")

        return guarded_getattr


def load(data: bytes, admission: Admission, verdicts: ScanVerdicts | None = None) -> Any:
    """Rebuild the value pickled in ``data``, or raise `UnsafePickleError`.

    ``verdicts`` skips the static scan of bytes that already passed it under
    ``admission``; the run-time checks always run.
    """
    if verdicts is None:
        scan(data, admission)
    else:
        verdicts.scan(data, admission)
    try:
        return _RestrictedUnpickler(data, admission).load()
    except UnsafePickleError:
        raise
    except Exception as exc:  # noqa: BLE001 - re-raised as UnsafePickleError just below
        # Only the exception type: its text could quote stored values.
        raise UnsafePickleError(
            f"an admitted helper failed to rebuild a pickled value ({type(exc).__name__})"
        ) from None


def dump(value: Any, admission: Admission, verdicts: ScanVerdicts | None = None) -> bytes:
    """Pickle ``value`` and prove it could be read back under ``admission``.

    Raises the scan's `UnsafePickleError` (a `ForbiddenGlobalError` when the
    pickle needs a global that is not admitted); callers turn it into a
    write-side error.
    """
    data = pickle.dumps(value, protocol=PICKLE_PROTOCOL)
    if verdicts is None:
        scan(data, admission)
    else:
        verdicts.scan(data, admission)
    return data
