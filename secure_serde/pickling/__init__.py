"""Pickle fallback: JsonPlus msgpack, where allowed values msgpack cannot take are pickled alone.

`PickleFallbackSerializer` wraps a ``JsonPlusSerializer``; `PANDAS` and
`NUMPY` are the presets for ``allowed=``. Read ``SECURITY.md`` before using
it outside `secure_serde.EncryptedSerializer`.
"""

from secure_serde.pickling._codec import EXT_NESTED, EXT_PICKLE, TAG
from secure_serde.pickling._presets import NUMPY, PANDAS, Preset
from secure_serde.pickling._serializer import PickleFallbackSerializer

__all__ = [
    "EXT_NESTED",
    "EXT_PICKLE",
    "NUMPY",
    "PANDAS",
    "TAG",
    "PickleFallbackSerializer",
    "Preset",
]
