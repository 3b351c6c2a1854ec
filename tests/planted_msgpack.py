"""Planted msgpack rows that prove whether permissive JsonPlus would have run them.

langgraph's ``JsonPlusSerializer`` (permissive by default) rebuilds a msgpack
extension by importing the module the bytes name and calling the name with
the stored argument. The rows built here name `PlantedCall.record`, a
harmless callable that records that it ran, or ``os.system`` with a command
that only creates a marker file; reading them through any path secure_serde
offers must never call either.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import (
    EXT_CONSTRUCTOR_KW_ARGS,
    EXT_CONSTRUCTOR_POS_ARGS,
    EXT_CONSTRUCTOR_SINGLE_ARG,
    EXT_PYDANTIC_V1,
    EXT_PYDANTIC_V2,
)

SENTINEL_MODULE: Final = "tests.planted_msgpack"
SENTINEL_NAME: Final = "record_call"


class PlantedCall:
    """``record_call`` sets ``PlantedCall.ran``: proof that a planted name was called."""

    ran = False
    args: ClassVar[list[Any]] = []

    @classmethod
    def reset(cls) -> None:
        cls.ran = False
        cls.args = []


def record_call(*args: Any, **kwargs: Any) -> dict[str, Any]:
    PlantedCall.ran = True
    PlantedCall.args.append((args, kwargs))
    return {"planted": True}


def ext(code: int, module: str, name: str, arg: Any) -> ormsgpack.Ext:
    """One JsonPlus constructor extension naming ``module.name``."""
    return ormsgpack.Ext(code, ormsgpack.packb([module, name, arg]))


def planted_value(
    code: int = EXT_CONSTRUCTOR_SINGLE_ARG,
    module: str = SENTINEL_MODULE,
    name: str = SENTINEL_NAME,
    arg: Any = "payload",
) -> bytes:
    """A msgpack map (the shape of a checkpoint or a state) holding one planted call."""
    return ormsgpack.packb({"v": 1, "channel_values": {"x": ext(code, module, name, arg)}})


def os_system_value(marker: str) -> bytes:
    """A msgpack value that permissive JsonPlus turns into ``os.system("echo ran > <marker>")``.

    ``echo`` is a shell builtin, so the command needs no PATH (the CLI subprocess tests run
    with a minimal one).
    """
    return planted_value(module="os", name="system", arg=f"echo ran > {marker}")


# Every constructor extension permissive JsonPlus imports and calls, with an argument of
# the shape it expects.
CONSTRUCTOR_CASES: Final[dict[str, tuple[int, Any]]] = {
    "single-arg": (EXT_CONSTRUCTOR_SINGLE_ARG, "payload"),
    "positional": (EXT_CONSTRUCTOR_POS_ARGS, ["payload"]),
    "keywords": (EXT_CONSTRUCTOR_KW_ARGS, {"a": 1}),
    "pydantic-v1": (EXT_PYDANTIC_V1, {"a": 1}),
    "pydantic-v2": (EXT_PYDANTIC_V2, {"a": 1}),
}
