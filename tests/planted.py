"""A pickle that proves whether it ran: the payload of every planted-pickle test."""

from __future__ import annotations

from typing import Any


class PlantedPickle:
    """Unpickling an instance sets ``PlantedPickle.ran``: proof that planted code would have run."""

    ran = False

    def __reduce__(self) -> tuple[Any, ...]:
        return (_run, ())

    @classmethod
    def reset(cls) -> None:
        cls.ran = False


def _run() -> None:
    PlantedPickle.ran = True
