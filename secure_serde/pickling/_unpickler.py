"""Loading one embedded pickle: the static scan, then an unpickler that knows only admitted globals.

The scan (`_scan.scan`) proves, before anything runs, that every global the
pickle names is admitted, that no call result is called again and that no
BUILD state plants a dunder name or a callable. The unpickler enforces the
allowlist again at run time in ``find_class``, hands out a ``getattr`` that
reaches only the admitted (class, attribute) pairs, and checks every BUILD
state on the real objects before applying it. Any failure, including one
inside an admitted helper, raises `UnsafePickleError`; the value is never
replaced by a default.

The unpickler is the C ``pickle.Unpickler``, which has no hook for BUILD.
So every BUILD is rerouted before loading: the scan (or, without a scan
verdict, `_scan.locate`) records where each BUILD opcode is, and each one
becomes ``TUPLE2 BINPERSID`` (`_scan.Layout`). The C unpickler then pairs
the instance with its state and calls ``persistent_load`` with the pair,
which checks the state and applies it exactly as BUILD would. The pickle's
own persistent ids are refused by the scan and by `_scan.locate`, so every
``persistent_load`` call is a rerouted BUILD. The pickle's FRAME opcodes
are replaced by one frame around the whole pickle, since rerouting changes
their contents' length; framing only tells the C unpickler how much to read
at once, and one frame makes that a single read. 0.3's pure-Python
unpickler did the same checks at about five times the cost of the C one.
"""

from __future__ import annotations

import io
import math
import pickle
import sys
import types
from collections.abc import Callable
from typing import Any, Final

from secure_serde._errors import ForbiddenGlobalError, UnsafePickleError
from secure_serde.pickling._scan import GETATTR, Admission, Layout, is_dunder, locate, scan
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


_APPLY_BUILD: Final[Callable[[Any], None]] = pickle._Unpickler.dispatch[pickle.BUILD[0]]
_MISSING: Final = object()
# What a global can be: BUILD on one is refused (the scan refuses it statically too).
_SHARED: Final = (type, types.FunctionType, types.BuiltinFunctionType, types.ModuleType)


class _BuildStack:
    """What ``pickle._Unpickler.load_build`` reads: a stack of instance and state."""

    __slots__ = ("stack",)

    def __init__(self, inst: Any, state: Any) -> None:
        self.stack = [inst, state]


def _checked_build(pair: Any) -> Any:
    """BUILD, for a rerouted ``(instance, state)`` pair: check the state, then apply it.

    The same checks the pure-Python unpickler ran in its BUILD handler;
    applying goes through ``pickle``'s own BUILD, so the semantics are
    BUILD's (``__setstate__``, else the instance and slot dicts).
    """
    if type(pair) is not tuple or len(pair) != 2:
        raise UnsafePickleError("refusing a pickle that uses persistent ids")
    inst, state = pair
    if isinstance(inst, _SHARED):
        # An admitted class or function itself: BUILD would set attributes process-wide.
        raise UnsafePickleError("refusing a pickle that applies BUILD to a global")
    numpy = sys.modules.get("numpy")
    if numpy is None:
        check_state(state)
    else:
        check_state(state, nested=not isinstance(inst, numpy.dtype))
        if isinstance(inst, numpy.ndarray):
            _check_array_state(numpy, state)
    # load_build's first branch, inline (most states go there); the rest is load_build's.
    setstate: Any = getattr(inst, "__setstate__", _MISSING)
    if setstate is not _MISSING:
        setstate(state)
    else:
        _APPLY_BUILD(_BuildStack(inst, state))
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


# Admitted globals, once resolved, per admission: the C find_class goes
# through the import machinery on every call (about 10 µs), for the same few
# dozen names. A name enters an admission's table only after passing that
# admission's check below, so a lookup there is the check; builtins.getattr,
# which becomes a guarded stand-in, never enters.
_RESOLVED: dict[Admission, dict[tuple[str, str], Any]] = {}
_MAX_RESOLVED: Final = 4096
_MAX_ADMISSIONS: Final = 64


def _resolved_for(admission: Admission) -> dict[tuple[str, str], Any]:
    table = _RESOLVED.get(admission)
    if table is None:
        table = {}
        if len(_RESOLVED) < _MAX_ADMISSIONS:
            table = _RESOLVED.setdefault(admission, table)
    return table


class _RestrictedUnpickler(pickle.Unpickler):
    """The C unpickler, with every BUILD rerouted to `_checked_build` (see the module doc).

    ``layout`` is the scan's `Layout` of ``data``; without one, `_scan.locate`
    finds the BUILDs here, and a pickle it cannot walk is refused by `load`.
    """

    def __init__(self, data: bytes, admission: Admission, layout: Layout | None = None) -> None:
        self._admission = admission
        self._resolved = _resolved_for(admission)
        self._refusal: UnsafePickleError | None = None
        if layout is None:
            try:
                layout = locate(data)
            except UnsafePickleError as exc:
                self._refusal = exc
        rerouted = b"" if layout is None else layout.reroute(data)
        super().__init__(io.BytesIO(rerouted), fix_imports=False)

    def load(self) -> Any:
        if self._refusal is not None:
            raise self._refusal
        return super().load()

    def find_class(self, module: str, name: str) -> Any:
        found = self._resolved.get((module, name))
        if found is None:
            found = self._find_class(module, name)
        return found

    def _find_class(self, module: str, name: str) -> Any:
        """The admission check, then the real lookup, remembered for this admission."""
        key = (module, name)
        if key == GETATTR and self._admission.methods:
            return self._guarded_getattr()
        if key not in self._admission.globals:
            raise ForbiddenGlobalError(
                f"refusing a pickle that names {module}.{name}, which is not admitted",
                module=module,
                name=name,
            )
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
    """Rebuild the value pickled in ``data``, or raise `UnsafePickleError`.

    ``verdicts`` skips the static scan of bytes that already passed it under
    ``admission``; the run-time checks always run.
    """
    layout = scan(data, admission) if verdicts is None else verdicts.scan(data, admission)
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
