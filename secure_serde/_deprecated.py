"""Arguments kept for one release after their removal or renaming, in one place.

After 0.2.0 the pycryptodome AES-GCM backend was dropped (``cryptography``
is a hard dependency, and two wire-identical backends were a permanent
cost), and each kind of key name got its own word (docs/keys.md,
"Glossary"). Code written for 0.2.0 keeps working for one more release:
each old spelling warns with `DeprecationWarning` at the caller's line and
means what it meant.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from types import FrameType
from typing import Final, TypeVar

from secure_serde._errors import ConfigurationError

__all__ = ["check_backend", "renamed", "warn_deprecated"]

_T = TypeVar("_T")

# The backends a 0.2.0 caller could name that 0.3.0 still is: both mean
# "cryptography", the only one left.
_IGNORED_BACKENDS: Final = frozenset({"auto", "cryptography"})
# Compared with code objects' file names, which come from the same import
# machinery as ``__file__``; the separator keeps "secure_serde_x/" out.
_PACKAGE_DIR: Final = os.path.dirname(__file__) + os.sep
# `with Saver.from_conn_string(...)` runs the constructor from contextlib's
# frames: the caller is past them too.
_PASSED_THROUGH: Final = (_PACKAGE_DIR, contextlib.__file__)


def _stacklevel() -> int:
    """How far up the stack the first frame outside secure_serde is.

    Constructors are wrapped (`scrubbed`) and aliases are resolved a few
    calls deep, so a fixed ``stacklevel`` would point at library code:
    the warning must name the caller's line, which is what needs changing.
    """
    level = 1
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_PASSED_THROUGH):
        frame = frame.f_back
        level += 1
    return level


def warn_deprecated(message: str) -> None:
    """Warn with `DeprecationWarning` at the first caller outside secure_serde."""
    warnings.warn(message, DeprecationWarning, stacklevel=_stacklevel())


def check_backend(backend: object, where: str) -> None:
    """Validate the 0.2.0 ``backend=`` argument of ``where``; ``None`` means not passed.

    ``"auto"`` and ``"cryptography"`` meant what every cipher now does, so
    they only warn. Any other value (``"pycryptodome"`` included) asked for
    something that no longer exists and raises `ConfigurationError`, rather
    than silently encrypting some other way than the caller asked.
    """
    if backend is None:
        return
    if isinstance(backend, str) and backend in _IGNORED_BACKENDS:
        warn_deprecated(
            f"{where}: backend= is deprecated and ignored: AES-GCM always runs on"
            " 'cryptography' (OpenSSL). Remove the argument: the next release refuses it"
        )
        return
    shown = repr(backend) if isinstance(backend, str) else type(backend).__name__
    raise ConfigurationError(
        f"{where}: backend={shown} is not available: secure_serde encrypts only with"
        " 'cryptography' (the pycryptodome AES-GCM backend was removed; pycryptodome now"
        " only reads langgraph's legacy 'aes' rows). Remove the argument"
    )


def renamed(old_name: str, old: _T | None, new_name: str, new: _T | None, where: str) -> _T | None:
    """The value of a renamed argument, given under its new or (deprecated) old name.

    Passing both is an error even when they agree: one of them is a leftover.
    """
    if old is None:
        return new
    if new is not None:
        raise ConfigurationError(
            f"{where}: pass {new_name}= only; {old_name}= is its deprecated old name"
        )
    warn_deprecated(f"{where}: {old_name}= is deprecated; use {new_name}=")
    return old
