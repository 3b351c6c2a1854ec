"""The serializer layer: `EncryptedSerializer` and what it reads and writes with.

``_langgraph``, every private langgraph name the package uses (pinned by
tests/serde/test_langgraph_private*.py), is exported whole as
``langgraph_internals`` so that its users say so where they import it.
"""

from __future__ import annotations

from secure_serde.serde import _langgraph as langgraph_internals
from secure_serde.serde._compress import (
    UNCOMPRESSED,
    CompressedSerializer,
    compression_line,
    compression_of,
)
from secure_serde.serde._migration import Migration
from secure_serde.serde._readrule import Decode, ReadRule, Route, is_refusal
from secure_serde.serde._serializer import EncryptedSerializer
from secure_serde.serde._strict import CONSTRUCTORS, StrictDecoder
from secure_serde.serde._trust import is_authenticated, unvouched

__all__ = [
    "CONSTRUCTORS",
    "UNCOMPRESSED",
    "CompressedSerializer",
    "Decode",
    "EncryptedSerializer",
    "Migration",
    "ReadRule",
    "Route",
    "StrictDecoder",
    "compression_line",
    "compression_of",
    "is_authenticated",
    "is_refusal",
    "langgraph_internals",
    "unvouched",
]
