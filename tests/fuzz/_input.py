"""Turning one fuzz input into the choices a target makes, the same way every time.

Every target reads its input through `Input`: a few leading bytes pick a
variant (which cipher name, which inner tag, which mutation), and the rest
is the value under test. The seed generator (`tests.fuzz.seeds`) writes
inputs in the same layout, so mutations of a seed keep reaching the code
the seed was built for. A regression test replays a crashing input by
calling the same target with the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

__all__ = ["Input"]

T = TypeVar("T")


class Input:
    """A cursor over a fuzz input; reading past the end yields zeros and empty bytes."""

    __slots__ = ("_at", "_data")

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._at = 0

    def byte(self) -> int:
        if self._at >= len(self._data):
            return 0
        value = self._data[self._at]
        self._at += 1
        return value

    def pick(self, options: Sequence[T]) -> T:
        return options[self.byte() % len(options)]

    def flag(self) -> bool:
        return bool(self.byte() & 1)

    def take(self, size: int) -> bytes:
        chunk = self._data[self._at : self._at + size]
        self._at += len(chunk)
        return chunk

    def sized(self) -> bytes:
        """A chunk whose length is given by the next byte (0 to 255)."""
        return self.take(self.byte())

    def text(self, errors: str = "replace") -> str:
        """Text as a database hands it over (valid UTF-8); ``surrogateescape`` for os.environ."""
        return self.sized().decode("utf-8", errors)

    def rest(self) -> bytes:
        chunk = self._data[self._at :]
        self._at = len(self._data)
        return chunk
