"""Checks that an error leaving secure_serde carries no secret in its traceback.

Error trackers that capture frame locals (Sentry's default) send each
local's ``repr`` off the host. `assert_no_secret_locals` walks every frame
of an error's traceback, and of every error chained to it through
``__cause__`` and ``__context__``, from the first secure_serde frame down,
and fails when a local's value (looked into through str, bytes, dicts,
lists, tuples and sets) or its ``repr`` holds any form of a secret: the key
text, its UTF-8 bytes, the key bytes it parses to and the AES-256 key
derived from them, each also as hex and as a bytes literal.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import secure_serde
from secure_serde import ConfigurationError
from secure_serde.crypto import hkdf_sha256, parse_key

__all__ = [
    "assert_no_secret_locals",
    "key_forms",
    "secret_findings",
]

_PACKAGE_DIR: Final = str(Path(secure_serde.__file__).resolve().parent) + os.sep
_MAX_DEPTH: Final = 6
# The HKDF info of the AES-256 key, spelled out as tests/crypto/test_format.py's vectors pin it.
_INFO_AEAD: Final = b"secure_serde/v1/aes-256-gcm"


def key_forms(key: str | bytes) -> list[str | bytes]:
    """Every form a configured key takes inside secure_serde, for `secret_findings`.

    The text (and its UTF-8 bytes), the key bytes it parses to, and the
    AES-256 key HKDF derives from them. A value `parse_key` refuses is
    still a secret (a key with a typo is still nearly the key): its text
    and bytes are listed, with any whitespace-stripped form.
    """
    forms: list[str | bytes] = [key]
    if isinstance(key, str):
        forms.append(key.encode("utf-8", "surrogatepass"))
        if key.strip() != key and key.strip():
            forms += [key.strip(), key.strip().encode("utf-8", "surrogatepass")]
    try:
        material = parse_key(key)
    except ConfigurationError:
        return forms
    forms += [material, hkdf_sha256(material, _INFO_AEAD, 32)]
    return forms


def _needles(secrets: Iterable[str | bytes]) -> tuple[list[str], list[bytes]]:
    texts: list[str] = []
    raw: list[bytes] = []
    for secret in secrets:
        if isinstance(secret, str):
            texts.append(secret)
            continue
        raw.append(secret)
        texts.append(secret.hex())
        texts.append(repr(secret)[2:-1])  # as a bytes literal shows it, escapes included
        with contextlib.suppress(UnicodeDecodeError):
            texts.append(secret.decode("utf-8"))
    return [t for t in texts if t], [b for b in raw if b]


def _holds(value: Any, texts: list[str], raw: list[bytes], depth: int = 0) -> bool:
    if depth > _MAX_DEPTH:
        return False
    if isinstance(value, str):
        return any(t in value for t in texts)
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return any(r in data for r in raw) or _holds(repr(data), texts, raw, depth + 1)
    if isinstance(value, dict):
        return any(
            _holds(k, texts, raw, depth + 1) or _holds(v, texts, raw, depth + 1)
            for k, v in list(value.items())
        )
    if isinstance(value, (list, tuple, set, frozenset)) and any(
        _holds(item, texts, raw, depth + 1) for item in list(value)
    ):
        return True
    try:
        shown = repr(value)
    except Exception:  # noqa: BLE001 - a broken repr shows nothing
        return False
    return any(t in shown for t in texts)


def _chain(error: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo = [error]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        todo += [e for e in (current.__cause__, current.__context__) if e is not None]
        if isinstance(current, BaseExceptionGroup):
            todo += list(current.exceptions)


def _frames(tb: TracebackType | None) -> Iterator[TracebackType]:
    # The frames above the first secure_serde frame are the caller's own
    # (the test's, which holds the key it passed in); everything from there
    # down ran on secure_serde's behalf, third-party code included.
    inside = False
    while tb is not None:
        inside = inside or tb.tb_frame.f_code.co_filename.startswith(_PACKAGE_DIR)
        if inside:
            yield tb
        tb = tb.tb_next


def secret_findings(error: BaseException, secrets: Iterable[str | bytes]) -> list[str]:
    """Where ``error`` (and its chain) shows a secret: message, args or a frame local."""
    texts, raw = _needles(secrets)
    found = []
    for current in _chain(error):
        name = type(current).__name__
        if _holds(str(current), texts, raw) or _holds(current.args, texts, raw):
            found.append(f"{name}: message or args")
        if _holds(dict(vars(current)) if hasattr(current, "__dict__") else {}, texts, raw):
            found.append(f"{name}: attributes")
        for tb in _frames(current.__traceback__):
            code = tb.tb_frame.f_code
            for local, value in dict(tb.tb_frame.f_locals).items():
                if value is current:
                    continue
                if _holds(value, texts, raw):
                    found.append(
                        f"{name}: local {local!r} of {code.co_name}"
                        f" ({Path(code.co_filename).name}:{tb.tb_lineno})"
                    )
    return found


def assert_no_secret_locals(error: BaseException, *secrets: str | bytes) -> None:
    """Fail if ``error`` carries any of ``secrets`` anywhere an error tracker would see it.

    Pass key forms from `key_forms`, passwords or any other secret text.
    The check itself is tested against an error that does hold a secret
    (tests/test_secrets_tracebacks.py), so it cannot pass vacuously.
    """
    if not secrets:
        raise ValueError("name at least one secret to look for")
    findings = secret_findings(error, secrets)
    if findings:
        raise AssertionError("secret found in the error: " + "; ".join(findings))
