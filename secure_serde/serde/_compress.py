"""`CompressedSerializer`: compress what the inner serializer writes; decompress within a bound.

A compressed value's type tag is the inner tag plus the algorithm
(``msgpack+zstd``, docs/compression.md); under `EncryptedSerializer` the
cipher authenticates the bytes and that inner tag before this layer sees
them, so nothing is decompressed before authentication.

Decompression never produces more than ``max_size`` bytes: a zstd frame that
declares a larger size is refused from its header, before any output; a
frame that declares nothing, and every zlib stream, is decompressed with a
``max_length`` of ``max_size + 1`` and refused if that much comes out. The
zstd window is capped to the bound too, so a crafted header cannot make the
decoder allocate a large window either. Both raise `DecompressionBombError`.

zstd comes from the standard library's API (``compression.zstd`` on Python
3.14+, the ``backports.zstd`` package before): it writes every value, and
reads any frame. Its decompressor is single-use, though, and building one
cost 9-12 µs, 40-60% of a bounded 12 KB decompress. So when
python-zstandard (``zstandard``) is importable, frames that declare their
size (every frame this module writes) are read with one reusable
decompression context per thread and per window bound, with the same
refusals (`_unzstd_reused`). ``zstandard`` is an accelerator, never needed
for correctness: it is already installed wherever langgraph is (langsmith
depends on it), is listed in the ``zstd`` extra, and is used only when the
standard API is there too, so both paths read the same rows.
"""

from __future__ import annotations

import copy
import functools
import logging
import sys
import threading
import zlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal, cast

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde._errors import ConfigurationError, DecompressionBombError, DecompressionError
from secure_serde.serde._langgraph import register_allowlist_wrapper

if sys.version_info >= (3, 14):
    from compression import zstd as _zstd_module
else:
    try:
        from backports import zstd as _zstd_module
    except ImportError:  # the zstd extra is not installed: zlib only
        _zstd_module = None  # type: ignore[assignment]

# python-zstandard, imported on the first zstd read (see the module doc).
_FAST_UNSET: Final = object()
_fast_zstd: Any = _FAST_UNSET
# What zstandard reports for a frame with no content size, or a bad one.
_CONTENTSIZE_UNKNOWN: Final = 2**64 - 1
_CONTENTSIZE_ERROR: Final = 2**64 - 2

logger = logging.getLogger("secure_serde")

Algorithm = Literal["zstd", "zlib"]
ZSTD: Final = "zstd"
ZLIB: Final = "zlib"
ALGORITHMS: Final[frozenset[str]] = frozenset({ZSTD, ZLIB})
UNCOMPRESSED: Final = "uncompressed"
# Why a compressed tag is refused on a row whose format does not authenticate its tag.
UNBOUND_COMPRESSED: Final = (
    "that format never stored compressed values and does not authenticate its type tag,"
    " so the tag was changed"
)

# Measured in benchmarks/bench_compress.py (see benchmarks/README.md): below
# about 512 bytes of msgpack, zstd saves under a quarter of the value and under
# ~100 bytes (less than a PostgreSQL row's own overhead), for a fixed cost of
# some tens of microseconds per value; above it the saving grows fast.
DEFAULT_MIN_SIZE: Final = 512
# Above the threshold, a value is stored compressed only when that saves at
# least an eighth of it and at least 64 bytes (about a PostgreSQL row's own
# overhead): a value that barely shrinks (ids, base64, already-compressed
# bytes) would cost a decompression on every read for nothing it keeps.
MIN_SAVED_FRACTION: Final = 8
MIN_SAVED_BYTES: Final = 64
# Level 1: on 130 KB chat states, levels 2-3 shrink the output by 1-5% more for
# 1.1-1.6x the time; negative levels are barely faster and leave 13-44% more bytes.
DEFAULT_LEVEL: Final = 1
_ZLIB_DEFAULT_LEVEL: Final = 6
# Larger than any checkpoint value we have seen in practice; a value above
# it is stored uncompressed, so everything written here is readable here.
DEFAULT_MAX_SIZE: Final = 64 * 1024 * 1024
# zstd's own floor and the cap its decoders accept on 64-bit builds.
_MIN_WINDOW_LOG: Final = 10
_MAX_WINDOW_LOG: Final = 31


def zstd_available() -> bool:
    """True when zstd can be used (Python 3.14+, or the ``zstd`` extra installed)."""
    return _zstd_module is not None


def compression_of(type_tag: str) -> str | None:
    """The algorithm a type tag says its value is compressed with, below any cipher suffix.

    Reads ``msgpack+zstd`` and ``msgpack+zstd+aesgcm`` alike; ``None`` for
    uncompressed values. Used by audit to count compressed values without
    decrypting them.
    """
    return next((part for part in reversed(type_tag.split("+")[1:]) if part in ALGORITHMS), None)


def compression_line(counts: Mapping[str, int]) -> str:
    """Audit's line: values by compression algorithm, from `compression_of` counts."""
    compressed = sum(n for name, n in counts.items() if name != UNCOMPRESSED)
    by_algorithm = ", ".join(
        f"{name} {n:,}" for name, n in sorted(counts.items()) if name != UNCOMPRESSED
    )
    return (
        f"compressed: {compressed:,}"
        + (f" ({by_algorithm})" if by_algorithm else "")
        + f"; uncompressed {counts.get(UNCOMPRESSED, 0):,}"
    )


def _window_log(max_size: int) -> int:
    # The smallest window that holds max_size bytes: a frame needing more
    # cannot decompress to within the bound anyway, and a smaller cap keeps
    # a crafted header from reserving a larger buffer.
    return min(max((max_size - 1).bit_length(), _MIN_WINDOW_LOG), _MAX_WINDOW_LOG)


def _too_large(
    algorithm: str, max_size: int, declared: int | None = None
) -> DecompressionBombError:
    said = "" if declared is None else f" (its header declares {declared})"
    return DecompressionBombError(
        f"a {algorithm} value would decompress to more than max_size={max_size} bytes{said};"
        " refused before decompressing past the bound",
        max_size=max_size,
    )


def _fast() -> Any:
    """The ``zstandard`` module, or ``None`` where it cannot be imported."""
    global _fast_zstd
    if _fast_zstd is _FAST_UNSET:
        try:
            import zstandard as _fast_zstd
        except ImportError:
            _fast_zstd = None
    return _fast_zstd


class _ReusedDecompressors(threading.local):
    """One python-zstandard decompression context per thread and window bound."""

    def __init__(self) -> None:
        self.by_window: dict[int, Any] = {}


_REUSED: Final = _ReusedDecompressors()


def _unzstd_reused(fast: Any, data: bytes, max_size: int) -> bytes | None:
    """``data`` decompressed by a reused context, or ``None`` for a frame that declares no size.

    The same refusals as `_unzstd`, in the same order: a bad header, a
    dictionary, a declared size past the bound, a window past the cap; then
    corrupt, truncated or trailing bytes.
    """
    try:
        params = fast.get_frame_parameters(data)
    except fast.ZstdError:
        raise DecompressionError("a zstd value does not start with a valid frame header") from None
    if params.dict_id != 0:
        raise DecompressionError("a zstd value names a dictionary; none is configured")
    declared = params.content_size
    if declared in (_CONTENTSIZE_UNKNOWN, _CONTENTSIZE_ERROR):
        return None
    if declared > max_size:
        raise _too_large(ZSTD, max_size, declared)
    window_log = _window_log(max_size)
    if params.window_size > 1 << window_log:
        raise DecompressionError("a zstd value is corrupt or exceeds the window bound")
    decompressor = _REUSED.by_window.get(window_log)
    if decompressor is None:
        decompressor = fast.ZstdDecompressor(max_window_size=1 << window_log)
        _REUSED.by_window[window_log] = decompressor
    try:
        # The output buffer is the declared size, checked above; anything
        # after the frame, or a frame that ends early, is an error here.
        output: bytes = decompressor.decompress(data, allow_extra_data=False)
    except fast.ZstdError:
        output = b""
        declared = -1
    if len(output) != declared:
        raise DecompressionError("a zstd value is corrupt, truncated or has bytes after its frame")
    return output


def _unzstd(data: bytes, max_size: int) -> bytes:
    if _zstd_module is None:
        raise DecompressionError(
            "a zstd-compressed value needs zstd: install secure-serde[zstd] (Python < 3.14)"
        )
    fast = _fast()
    output = None if fast is None else _unzstd_reused(fast, data, max_size)
    return _unzstd_single_use(data, max_size) if output is None else output


def _unzstd_single_use(data: bytes, max_size: int) -> bytes:
    """The standard-library reader: any frame, one fresh decompressor per value."""
    zstd = _zstd_module
    try:
        info = zstd.get_frame_info(data)
    except zstd.ZstdError:
        raise DecompressionError("a zstd value does not start with a valid frame header") from None
    if info.dictionary_id != 0:
        raise DecompressionError("a zstd value names a dictionary; none is configured")
    declared = info.decompressed_size
    if declared is not None and declared > max_size:
        raise _too_large(ZSTD, max_size, declared)
    decompressor = zstd.ZstdDecompressor(
        options={zstd.DecompressionParameter.window_log_max: _window_log(max_size)}
    )
    # A frame whose window exceeds the cap is "corrupt" too: it cannot fit the bound.
    return _drain(ZSTD, decompressor, zstd.ZstdError, data, max_size)


def _unzlib(data: bytes, max_size: int) -> bytes:
    return _drain(ZLIB, zlib.decompressobj(), zlib.error, data, max_size)


def _drain(algorithm: str, decompressor: Any, error: Any, data: bytes, max_size: int) -> bytes:
    """One bounded decompress: refused past ``max_size``, truncated, or with bytes after it."""
    try:
        output: bytes = decompressor.decompress(data, max_length=max_size + 1)
    except error:
        window = " or exceeds the window bound" if algorithm == ZSTD else ""
        raise DecompressionError(f"a {algorithm} value is corrupt{window}") from None
    if len(output) > max_size:
        raise _too_large(algorithm, max_size)
    if not decompressor.eof:
        raise DecompressionError(f"a {algorithm} value is truncated")
    if decompressor.unused_data:
        end = "frame" if algorithm == ZSTD else "stream"
        raise DecompressionError(f"a {algorithm} value has bytes after its {end}")
    return output


_DECOMPRESSORS: Final[dict[str, Callable[[bytes, int], bytes]]] = {ZSTD: _unzstd, ZLIB: _unzlib}


def decompress(algorithm: str, data: bytes, max_size: int = DEFAULT_MAX_SIZE) -> bytes:
    """``data`` decompressed with ``algorithm``, refused past ``max_size`` bytes of output."""
    function = _DECOMPRESSORS.get(algorithm)
    if function is None:
        raise DecompressionError(f"unknown compression algorithm {algorithm!r}")
    return function(bytes(data), max_size)


def inner_with_allowlist(
    serde: SerializerProtocol, extra_allowlist: Iterable[tuple[str, ...] | type]
) -> SerializerProtocol:
    """``serde`` with a graph's msgpack allowlist applied, or ``serde`` itself (warned)."""
    hook = getattr(serde, "with_msgpack_allowlist", None)
    if hook is None:
        logger.warning(
            "inner serializer %s does not support a msgpack allowlist; strict msgpack"
            " is not enforced by it",
            type(serde).__name__,
        )
        return serde
    return cast(SerializerProtocol, hook(extra_allowlist))


class _ZstdWriter:
    """One compression context per thread: a fresh context per call costs more than level 1."""

    __slots__ = ("_level", "_local")

    def __init__(self, level: int) -> None:
        self._level = level
        self._local = threading.local()

    def __call__(self, data: bytes) -> bytes:
        zstd = _zstd_module
        if zstd is None:  # pragma: no cover - checked when the serializer is built
            raise ConfigurationError("zstd is not installed")
        compressor = getattr(self._local, "compressor", None)
        if compressor is None:
            compressor = zstd.ZstdCompressor(level=self._level)
            self._local.compressor = compressor
        # One call with FLUSH_FRAME: zstd knows the input size up front, so the
        # frame records it (the reader's first bound check) and sizes its window to it.
        out: bytes = compressor.compress(data, mode=zstd.ZstdCompressor.FLUSH_FRAME)
        return out


class CompressedSerializer:
    """Compresses the inner serializer's output above a size threshold; reads both kinds.

    Put it under `EncryptedSerializer` and over the pickle fallback
    (docs/compression.md). Values whose inner encoding is shorter than
    ``min_size``, longer than ``max_size``, or that would shrink by less than
    an eighth or less than 64 bytes, keep the inner tag and bytes unchanged.

    Args:
        serde: the inner serializer; ``None`` means a fresh ``JsonPlusSerializer()``.
        algorithm: ``"zstd"`` (the default when it is available: Python 3.14,
            or the ``zstd`` extra) or ``"zlib"`` (the fallback). Only new
            values use it; both kinds are always read.
        level: the compression level; ``None`` means 1 for zstd, 6 for zlib.
        min_size: values of fewer inner bytes are stored uncompressed.
        max_size: the largest decompressed size accepted on read (and the
            largest value compressed on write). A value that would decompress
            to more raises `DecompressionBombError` before that memory is spent.
        exclude: types whose values are never compressed (an ``isinstance``
            test on the value handed to the serializer, i.e. one channel value
            or one write), for values that mix a secret with text an outsider
            chooses; see SECURITY.md.
    """

    __slots__ = (
        "_algorithm",
        "_compress",
        "_exclude",
        "_level",
        "_max_size",
        "_min_size",
        "_serde",
    )

    def __init__(  # noqa: PLR0913 - public constructor: keyword-only limits with measured defaults
        self,
        serde: SerializerProtocol | None = None,
        *,
        algorithm: Algorithm | None = None,
        level: int | None = None,
        min_size: int = DEFAULT_MIN_SIZE,
        max_size: int = DEFAULT_MAX_SIZE,
        exclude: Iterable[type] = (),
    ) -> None:
        if algorithm is None:
            algorithm = ZSTD if _zstd_module is not None else ZLIB
        if algorithm not in ALGORITHMS:
            raise ConfigurationError(f"algorithm must be 'zstd' or 'zlib', not {algorithm!r}")
        if algorithm == ZSTD and _zstd_module is None:
            raise ConfigurationError(
                "zstd is not installed: install secure-serde[zstd], or pass algorithm='zlib'"
            )
        if isinstance(min_size, bool) or not isinstance(min_size, int) or min_size < 0:
            raise ConfigurationError("min_size must be a non-negative int")
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise ConfigurationError("max_size must be a positive int")
        if algorithm == ZSTD:
            zstd_level = DEFAULT_LEVEL if level is None else level
            self._compress: Callable[[bytes], bytes] = _ZstdWriter(zstd_level)
            try:  # an out-of-range level fails here, not at the first write
                self._compress(b"")
            except ValueError as exc:
                raise ConfigurationError(f"zstd level {zstd_level} is out of range") from exc
            self._level = zstd_level
        else:
            zlib_level = _ZLIB_DEFAULT_LEVEL if level is None else level
            if not -1 <= zlib_level <= 9:
                raise ConfigurationError(f"zlib level must be in -1..9, not {zlib_level}")
            self._compress = functools.partial(zlib.compress, level=zlib_level)
            self._level = zlib_level
        self._algorithm: str = algorithm
        self._min_size = min_size
        self._max_size = max_size
        self._exclude = tuple(exclude)
        if not all(isinstance(t, type) for t in self._exclude):
            raise ConfigurationError("exclude= takes types")
        self._serde: SerializerProtocol = JsonPlusSerializer() if serde is None else serde

    @property
    def serde(self) -> SerializerProtocol:
        return self._serde

    @property
    def algorithm(self) -> str:
        """The algorithm new values are compressed with."""
        return self._algorithm

    @property
    def max_size(self) -> int:
        return self._max_size

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if self._exclude and isinstance(obj, self._exclude):
            return self._serde.dumps_typed(obj)
        return self.compress_encoded(*self._serde.dumps_typed(obj))

    def compress_encoded(self, type_tag: str, data: bytes) -> tuple[str, bytes]:
        """What `dumps_typed` stores for a value the inner serializer encoded as ``type_tag, data``.

        Unchanged when already compressed or when the class's thresholds say
        so. ``secure-serde rewrap --compress`` calls this on decrypted bytes,
        never deserializing them.
        """
        size = len(data)
        if size < self._min_size or size > self._max_size or compression_of(type_tag):
            return type_tag, data
        packed = self._compress(data)
        if size - len(packed) < max(MIN_SAVED_BYTES, size // MIN_SAVED_FRACTION):
            return type_tag, data
        return f"{type_tag}+{self._algorithm}", packed

    def may_compress(self, type_tag: str, stored_size: int) -> bool:
        """Whether a stored value could be compressed, from its tag and stored size alone.

        ``stored_size`` is at least the inner size (a cipher only adds bytes),
        so rewrap skips decrypting rows that cannot change.
        """
        return stored_size >= self._min_size and compression_of(type_tag) is None

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_tag, payload = data
        inner, plus, algorithm = type_tag.rpartition("+")
        if plus:
            function = _DECOMPRESSORS.get(algorithm)
            if function is not None:
                return self._serde.loads_typed((inner, function(bytes(payload), self._max_size)))
        return self._serde.loads_typed(data)

    def with_msgpack_allowlist(self, extra_allowlist: Iterable[tuple[str, ...] | type]) -> Any:
        """Apply a compiled graph's msgpack allowlist to the inner serializer.

        Called by ``BaseCheckpointSaver.with_allowlist`` (directly, or through
        `EncryptedSerializer`) under ``LANGGRAPH_STRICT_MSGPACK``.
        """
        inner = inner_with_allowlist(self._serde, extra_allowlist)
        if inner is self._serde:
            return self
        clone = copy.copy(self)
        clone._serde = inner
        return clone

    def __repr__(self) -> str:
        return (
            f"CompressedSerializer(serde={type(self._serde).__name__},"
            f" algorithm={self._algorithm!r}, level={self._level}, min_size={self._min_size},"
            f" max_size={self._max_size})"
        )


register_allowlist_wrapper(CompressedSerializer)
