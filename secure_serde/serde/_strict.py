"""The strict decoder: JsonPlus's encoding, read as data, for values nothing authenticates.

Permissive ``JsonPlusSerializer`` msgpack imports and calls the name the
bytes spell (``("os", "system", <cmd>)``): harmless for a value whose type
tag and bytes a cipher authenticated, code execution for one that anyone
with write access to the store could have planted or relabelled: plaintext
rows under ``Migration.plaintext``, rows of langgraph's built-in ``+aes``
format (a ``bytes+aes`` upload can be relabelled ``msgpack+aes``), and
plaintext-tagged sealed-metadata envelopes.

`StrictDecoder` reads those, modelled on langgraph's strict msgpack mode: it
constructs only ``SAFE_MSGPACK_TYPES`` plus an explicit allowlist (the inner
serializer's ``allowed_msgpack_modules`` when it is a set, and a compiled
graph's ``with_msgpack_allowlist``) and calls only ``SAFE_MSGPACK_METHODS``.
Where langgraph's strict mode returns a blocked type's raw payload, this
raises `StrictDecodeError`, so a refused value never flows on as something
else. In msgpack, ``_DeltaSnapshot`` (ext 7) round-trips, numpy arrays (ext
6) are rebuilt with the exact byte length their dtype and shape need, and
object dtypes, secure_serde's embedded pickles (ext 80, 81) and unknown ext
codes are refused. ``json`` (langgraph's pre-msgpack format) is read as
plain JSON, refusing any LangChain ``lc`` envelope, since reviving one
imports by name or reads an environment variable.
"""

from __future__ import annotations

import importlib
import json
import math
from collections.abc import Callable, Iterable
from typing import Any, Final, NoReturn

import ormsgpack
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde._errors import PickleRefusedError, StrictDecodeError
from secure_serde.serde import _langgraph as lg

# Nested msgpack extensions (each decoded by a recursive unpack); far above
# what any real state nests, far below Python's recursion limit.
MAX_DEPTH: Final = 64
_UNPACK_OPTION: Final = ormsgpack.OPT_NON_STR_KEYS
_PICKLE: Final = "pickle"
# secure_serde.pickling's ext codes (an embedded pickle, a container holding one).
_PICKLE_EXT_CODES: Final = frozenset({80, 81})
# JsonPlus's container ext codes: each payload is (module, name, arguments...).
CONSTRUCTORS: Final = frozenset(
    {
        lg.EXT_CONSTRUCTOR_SINGLE_ARG,
        lg.EXT_CONSTRUCTOR_POS_ARGS,
        lg.EXT_CONSTRUCTOR_KW_ARGS,
        lg.EXT_PYDANTIC_V1,
        lg.EXT_PYDANTIC_V2,
    }
)
_SEND: Final = ("langgraph.types", "Send")
_NUMPY_ORDERS: Final = frozenset({"C", "F"})
_MAX_DTYPE_TEXT: Final = 64
_LC_KEY: Final = "lc"
_FAILED: Final = object()
# Tags JsonPlus itself reads without decoding anything.
_UNDECODED: Final[dict[str, Callable[[bytes], Any]]] = {
    "null": lambda _: None, "bytes": bytes, "bytearray": bytearray,
}  # fmt: skip


def allowlist_of(serde: SerializerProtocol | None) -> frozenset[tuple[str, str]]:
    """The explicit msgpack allowlist of ``serde`` (or of the JsonPlus it wraps), if any.

    ``True`` (JsonPlus's permissive default) and ``None`` (strict) both add
    nothing: the strict decoder never widens to "everything".
    """
    inner: Any = serde
    if inner is not None and JsonPlusSerializer not in type(inner).__mro__:
        # A wrapper of JsonPlus (PickleFallbackSerializer) exposes it as ``serde``;
        # the __mro__ test skips virtual subclasses, which only wrap one.
        inner = getattr(inner, "serde", None)
    if inner is None or JsonPlusSerializer not in type(inner).__mro__:
        return frozenset()
    allowlist = lg.msgpack_allowlist(inner)
    if allowlist is None or allowlist is True:
        return frozenset()
    return _pairs(allowlist)


def _pairs(entries: Iterable[Any]) -> frozenset[tuple[str, str]]:
    pairs = set()
    for entry in entries:
        if isinstance(entry, type):
            pairs.add((entry.__module__, entry.__name__))
        elif (
            isinstance(entry, tuple) and len(entry) == 2 and all(isinstance(p, str) for p in entry)
        ):
            pairs.add((entry[0], entry[1]))
    return frozenset(pairs)


class StrictDecoder:
    """Decodes JsonPlus values as data: only allowlisted types are built, nothing else imported."""

    __slots__ = ("_extra", "_types")

    def __init__(self, allowlist: Iterable[tuple[str, ...] | type] = ()) -> None:
        self._extra = _pairs(allowlist)
        self._types: frozenset[tuple[str, ...]] = lg.SAFE_MSGPACK_TYPES | self._extra

    @classmethod
    def for_serde(cls, serde: SerializerProtocol | None) -> StrictDecoder:
        """The strict decoder honouring ``serde``'s own explicit allowlist."""
        return cls(allowlist_of(serde))

    @property
    def allowlist(self) -> frozenset[tuple[str, str]]:
        """The (module, name) pairs admitted beyond langgraph's ``SAFE_MSGPACK_TYPES``."""
        return self._extra

    def with_allowlist(self, extra: Iterable[tuple[str, ...] | type]) -> StrictDecoder:
        """This decoder with ``extra`` admitted too; ``self`` when nothing changes."""
        pairs = _pairs(extra)
        if pairs <= self._extra:
            return self
        return StrictDecoder(self._extra | pairs)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        """Decode ``(inner type tag, bytes)``.

        Raises `StrictDecodeError`, or `PickleRefusedError` for a tag naming pickle.
        """
        type_tag, payload = data
        if type_tag == "msgpack":
            return _Run(self._types).unpack(payload)
        if type_tag == "json":
            return _json(payload)
        if type_tag in _UNDECODED:
            return _UNDECODED[type_tag](payload)
        if _PICKLE in type_tag.split("+"):
            raise PickleRefusedError(
                f"refusing a {type_tag!r} value whose type tag nothing authenticates:"
                " pickles are read only from authenticated values"
            )
        raise StrictDecodeError(
            f"refusing a value of type {type_tag!r}: the strict decoder reads null, bytes,"
            " bytearray, msgpack and json only"
        )

    def __repr__(self) -> str:
        return f"StrictDecoder(allowlist={sorted(self._extra)!r})"


def _json(payload: bytes) -> Any:
    try:
        return json.loads(payload, object_hook=_refuse_envelope)
    except StrictDecodeError:
        raise
    except (ValueError, RecursionError):
        pass
    raise StrictDecodeError("refusing a malformed json value")


def _refuse_envelope(obj: dict[str, Any]) -> dict[str, Any]:
    if _LC_KEY in obj and "type" in obj:
        raise StrictDecodeError(
            "refusing a LangChain serialized object in a json value: reviving it would"
            " import by name (or read an environment variable)"
        )
    return obj


class _Run:
    """One strict decode: keeps the first refusal, which ormsgpack would wrap in ValueError."""

    __slots__ = ("_depth", "_types", "error")

    def __init__(self, types: frozenset[tuple[str, ...]]) -> None:
        self._types = types
        self._depth = 0
        self.error: StrictDecodeError | None = None

    def unpack(self, data: bytes) -> Any:
        try:
            return ormsgpack.unpackb(data, ext_hook=self._hook, option=_UNPACK_OPTION)
        except (ValueError, TypeError, RecursionError):
            error = self.error
        if error is not None:
            raise error
        raise StrictDecodeError("refusing a malformed msgpack value")

    def _hook(self, code: int, data: bytes) -> Any:
        if self._depth >= MAX_DEPTH:
            self._fail(StrictDecodeError(f"refusing msgpack nested deeper than {MAX_DEPTH}"))
        self._depth += 1
        try:
            return self._ext(code, data)
        except StrictDecodeError as exc:
            self._fail(exc)
        finally:
            self._depth -= 1

    def _fail(self, exc: StrictDecodeError) -> NoReturn:
        if self.error is None:
            self.error = exc
        raise exc

    def _nested(self, data: bytes) -> Any:
        return ormsgpack.unpackb(data, ext_hook=self._hook, option=_UNPACK_OPTION)

    def _ext(self, code: int, data: bytes) -> Any:
        if code == lg.EXT_DELTA_SNAPSHOT:
            return lg.DeltaSnapshot(self._nested(data))
        if code in CONSTRUCTORS:
            return self._construct(code, self._nested(data))
        if code == lg.EXT_METHOD_SINGLE_ARG:
            return self._method(self._nested(data))
        if code == lg.EXT_NUMPY_ARRAY:
            return _numpy(self._nested(data))
        if code in _PICKLE_EXT_CODES:
            raise StrictDecodeError(
                "refusing an embedded pickle: pickles are read only from authenticated values"
            )
        raise StrictDecodeError(f"refusing unknown msgpack extension code {code}")

    def _construct(self, code: int, tup: Any) -> Any:
        if not (
            isinstance(tup, list) and len(tup) >= 3 and all(isinstance(p, str) for p in tup[:2])
        ):
            raise StrictDecodeError(f"refusing a malformed msgpack extension (code {code})")
        module, name, arg = tup[0], tup[1], tup[2]
        type_name = f"{module}.{name}"
        if (module, name) not in self._types:
            raise StrictDecodeError(
                f"refusing to construct {type_name!r}: not in the msgpack allowlist of values"
                " whose type tag nothing authenticates",
                type_name=type_name,
            )
        if code == lg.EXT_CONSTRUCTOR_POS_ARGS and (module, name) == _SEND:
            return _call(type_name, lg.send_from_args, arg)
        # The pair is on the allowlist: importing its module is importing a
        # module this process chose, not one the bytes chose.
        cls = _resolve(module, name)
        if code == lg.EXT_CONSTRUCTOR_SINGLE_ARG:
            return _call(type_name, cls, arg)
        if code == lg.EXT_CONSTRUCTOR_POS_ARGS:
            if not isinstance(arg, list):
                raise StrictDecodeError(f"refusing {type_name!r}: arguments are not a list")
            return _call(type_name, cls, *arg)
        if not isinstance(arg, dict) or not all(isinstance(k, str) for k in arg):
            raise StrictDecodeError(f"refusing {type_name!r}: arguments are not a mapping")
        if code == lg.EXT_CONSTRUCTOR_KW_ARGS:
            return _call(type_name, cls, **arg)
        # pydantic, as JsonPlus: validate, else build without validation.
        fallback = "construct" if code == lg.EXT_PYDANTIC_V1 else "model_construct"
        value = _attempt(cls, **arg)
        if value is _FAILED:
            value = _call(type_name, getattr(cls, fallback, None), **arg)
        return value

    def _method(self, tup: Any) -> Any:
        if not (
            isinstance(tup, list)
            and len(tup) >= 4
            and all(isinstance(part, str) for part in (tup[0], tup[1], tup[3]))
        ):
            raise StrictDecodeError("refusing a malformed msgpack method extension")
        module, name, arg, method = tup[0], tup[1], tup[2], tup[3]
        type_name = f"{module}.{name}.{method}"
        if (module, name, method) not in lg.SAFE_MSGPACK_METHODS:
            raise StrictDecodeError(
                f"refusing to call {type_name!r}: not an allowed msgpack method",
                type_name=type_name,
            )
        return _call(type_name, getattr(_resolve(module, name), method, None), arg)


def _resolve(module: str, name: str) -> Any:
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        pass
    raise StrictDecodeError(f"refusing {module}.{name!s}: it is not importable here")


def _attempt(function: Any, *args: Any, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)``, or `_FAILED` if it raised; callers raise a typed error."""
    try:
        return function(*args, **kwargs)
    except Exception:  # noqa: BLE001 - every caller turns _FAILED into StrictDecodeError
        return _FAILED


def _call(type_name: str, function: Any, *args: Any, **kwargs: Any) -> Any:
    if not callable(function):
        raise StrictDecodeError(f"refusing {type_name!r}: not constructible")
    value = _attempt(function, *args, **kwargs)
    if value is not _FAILED:
        return value
    # Raised outside the handler: the original error may quote the stored arguments.
    raise StrictDecodeError(
        f"refusing {type_name!r}: its stored arguments do not construct it", type_name=type_name
    )


def _numpy(meta: Any) -> Any:
    if not (isinstance(meta, list) and len(meta) == 4):
        raise StrictDecodeError("refusing a malformed numpy array")
    dtype_text, shape, order, buf = meta
    if not (
        isinstance(dtype_text, str)
        and len(dtype_text) <= _MAX_DTYPE_TEXT
        and isinstance(shape, list)
        and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)
        and order in _NUMPY_ORDERS
        and isinstance(buf, bytes)
    ):
        raise StrictDecodeError("refusing a malformed numpy array")
    try:
        import numpy
    except ImportError:
        raise StrictDecodeError("refusing a numpy array: numpy is not installed") from None
    try:
        dtype = numpy.dtype(dtype_text)
    except (TypeError, ValueError):
        raise StrictDecodeError("refusing a numpy array of an unknown dtype") from None
    if dtype.hasobject:
        # Object arrays hold Python objects: numpy would need pickle to build them.
        raise StrictDecodeError("refusing a numpy array of object dtype")
    if dtype.itemsize * math.prod(shape) != len(buf):
        raise StrictDecodeError("refusing a numpy array whose bytes do not match its shape")
    return numpy.frombuffer(buf, dtype=dtype).reshape(shape, order=order)
