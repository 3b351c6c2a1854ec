"""Loading one embedded pickle: the static scan, then an unpickler that knows only admitted globals.

The unpickler checks again at run time what the scan proved: ``find_class``
resolves only admitted globals, ``getattr`` reaches only admitted
attributes, and every BUILD state is checked on the real objects. It is the
C ``pickle.Unpickler`` (0.3's pure-Python one cost about five times more),
which has no hook for BUILD, so each BUILD is first rewritten as ``TUPLE2
BINPERSID`` (`_scan.Layout`) and arrives at ``persistent_load`` as an
``(instance, state)`` pair; the pickle's own persistent ids are refused, so
every call there is a BUILD. Any failure, in an admitted helper too, raises
`UnsafePickleError`: a value is never replaced by a default.
"""

from __future__ import annotations

import io
import math
import pickle
import sys
import types
from collections.abc import Callable
from typing import Any, Final

from secure_serde._errors import UnsafePickleError
from secure_serde.pickling import _scan
from secure_serde.pickling._scan import Admission, Layout
from secure_serde.pickling._verdicts import ScanVerdicts

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


def check_state(state: Any, nested: bool = True) -> None:
    """The scan's `_check_state` rule on the real objects; no key a ``str`` subclass (== dunder)."""
    pending = [state]
    while pending:
        item = pending.pop()
        if type(item) in _PLAIN:
            continue
        if callable(item):
            raise _scan.bad_state(f"a callable ({type(item).__name__})")
        if isinstance(item, tuple):
            pending += item
        elif isinstance(item, dict) and (nested or item is state):
            for key, value in item.items():
                if isinstance(key, str) and (type(key) is not str or _scan.is_dunder(key)):
                    raise _scan.bad_state("a dunder name")
                if callable(value):
                    raise _scan.bad_state(f"a callable ({type(value).__name__})")


_APPLY_BUILD: Final[Callable[[Any], None]] = pickle._Unpickler.dispatch[pickle.BUILD[0]]
# What a global can be: BUILD on one is refused (the scan refuses it statically too).
_SHARED: Final = (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)


def _checked_build(pair: Any) -> Any:
    """BUILD, for a rerouted ``(instance, state)`` pair: check the state, then apply it as BUILD."""
    if type(pair) is not tuple or len(pair) != 2:
        raise UnsafePickleError("refusing a pickle that uses persistent ids")
    inst, state = pair
    if isinstance(inst, _SHARED):
        # An admitted class or function itself: BUILD would set attributes process-wide.
        raise UnsafePickleError("refusing a pickle that applies BUILD to a global")
    numpy = sys.modules.get("numpy")
    check_state(state, nested=numpy is None or not isinstance(inst, numpy.dtype))
    if numpy is not None and isinstance(inst, numpy.ndarray):
        _check_array_state(numpy, state)
    # load_build's first branch, inline (most states go there); the rest is load_build's.
    setstate: Any = getattr(inst, "__setstate__", None)
    if setstate is not None:
        setstate(state)
    else:
        # load_build reads its operands from the unpickler's stack.
        _APPLY_BUILD(types.SimpleNamespace(stack=[inst, state]))
    return inst


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


# Admitted globals, resolved once per admission (C find_class imports, about 10 µs a call).
# A name enters only after passing that admission's check, so a hit is the check;
# builtins.getattr, which becomes a guarded stand-in, never enters.
_RESOLVED: dict[Admission, dict[tuple[str, str], Any]] = {}
_MAX_RESOLVED: Final = 4096
_MAX_ADMISSIONS: Final = 64


def _resolved_for(admission: Admission) -> dict[tuple[str, str], Any]:
    if admission in _RESOLVED or len(_RESOLVED) < _MAX_ADMISSIONS:
        return _RESOLVED.setdefault(admission, {})
    return {}


class _RestrictedUnpickler(pickle.Unpickler):
    """The C unpickler, each BUILD rerouted to `_checked_build` (without a layout, by `locate`)."""

    def __init__(self, data: bytes, admission: Admission, layout: Layout | None = None) -> None:
        self._admission = admission
        self._resolved = _resolved_for(admission)
        self._refusal: UnsafePickleError | None = None
        if layout is None:
            try:
                layout = _scan.locate(data)
            except UnsafePickleError as exc:
                self._refusal = exc
        rerouted = b"" if layout is None else layout.reroute(data)
        super().__init__(io.BytesIO(rerouted), fix_imports=False)

    def load(self) -> Any:
        if self._refusal is not None:
            raise self._refusal
        return super().load()

    def find_class(self, module: str, name: str) -> Any:
        key = (module, name)
        found = self._resolved.get(key)
        if found is not None:
            return found
        if key == _scan.GETATTR and self._admission.methods:
            return self._guarded_getattr()
        if key not in self._admission.globals:
            raise _scan.forbidden(module, name)
        found = pickle.Unpickler.find_class(self, module, name)
        if key in _EMPTY_ONLY:
            found = _empty_only(found)
        if len(self._resolved) < _MAX_RESOLVED:
            self._resolved[key] = found
        return found

    def persistent_load(self, pid: Any) -> Any:
        return _checked_build(pid)

    def _guarded_getattr(self) -> Callable[[Any, str], Any]:
        pairs = [
            (pickle.Unpickler.find_class(self, module, qualname), attribute)
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
    """Rebuild the value pickled in ``data``; ``verdicts`` may spare the scan, not the checks."""
    layout = (_scan.scan if verdicts is None else verdicts.scan)(data, admission)
    try:
        return _RestrictedUnpickler(data, admission, layout).load()
    except UnsafePickleError:
        raise
    except Exception as exc:  # noqa: BLE001 - re-raised as UnsafePickleError just below
        # Only the exception type: its text could quote stored values.
        raise UnsafePickleError(
            f"an admitted helper failed to rebuild a pickled value ({type(exc).__name__})"
        ) from None


def dump(value: Any, admission: Admission, verdicts: ScanVerdicts | None = None) -> bytes:
    """Pickle ``value``, or raise the scan's refusal if it could not be read back."""
    data = pickle.dumps(value, protocol=PICKLE_PROTOCOL)
    (_scan.scan if verdicts is None else verdicts.scan)(data, admission)
    return data
