"""Whether the bytes being deserialized right now were authenticated, type tag included.

`EncryptedSerializer` calls the inner serializer through `load_authenticated`
after its cipher has authenticated both the ciphertext and the inner type
tag. Inner layers that must never read unauthenticated bytes (the pickle
fallback) ask `is_authenticated`. A context variable carries the answer
through any wrappers in between and never leaks across threads or tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Final, TypeVar

from langgraph.checkpoint.serde.base import SerializerProtocol

T = TypeVar("T")

_AUTHENTICATED: Final[ContextVar[bool]] = ContextVar("secure_serde_authenticated", default=False)


def load_authenticated(serde: SerializerProtocol, data: tuple[str, bytes]) -> Any:
    """``serde.loads_typed(data)``, vouching that ``data`` (tag and bytes) was authenticated."""
    token = _AUTHENTICATED.set(True)
    try:
        return serde.loads_typed(data)
    finally:
        _AUTHENTICATED.reset(token)


def is_authenticated() -> bool:
    """True inside `load_authenticated`, False everywhere else."""
    return _AUTHENTICATED.get()


def unvouched(function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` outside any authenticated scope.

    A layer that has used the vouching calls this for its own decoding, so
    code that runs while a value is rebuilt (a pydantic validator, say) cannot
    hand other, unauthenticated bytes to a serializer under the same vouching.
    """
    token = _AUTHENTICATED.set(False)
    try:
        return function(*args)
    finally:
        _AUTHENTICATED.reset(token)
