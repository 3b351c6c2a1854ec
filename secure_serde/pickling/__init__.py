"""Pickle fallback: JsonPlus msgpack, where allowed values msgpack cannot take are pickled alone.

`PickleFallbackSerializer` wraps a ``JsonPlusSerializer``; `PANDAS` and
`NUMPY` are the presets for ``allowed=``. Read ``SECURITY.md`` before using
it outside `secure_serde.EncryptedSerializer`.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from secure_serde.pickling._codec import EXT_NESTED, EXT_PICKLE, TAG
    from secure_serde.pickling._presets import NUMPY, PANDAS, Preset
    from secure_serde.pickling._serializer import PickleFallbackSerializer
else:
    from secure_serde._lazy import lazy_attributes

    __getattr__, __dir__ = lazy_attributes(
        __name__,
        {
            "EXT_NESTED": "secure_serde.pickling._codec",
            "EXT_PICKLE": "secure_serde.pickling._codec",
            "NUMPY": "secure_serde.pickling._presets",
            "PANDAS": "secure_serde.pickling._presets",
            "PickleFallbackSerializer": "secure_serde.pickling._serializer",
            "Preset": "secure_serde.pickling._presets",
            "TAG": "secure_serde.pickling._codec",
        },
    )

__all__ = [
    "EXT_NESTED",
    "EXT_PICKLE",
    "NUMPY",
    "PANDAS",
    "TAG",
    "PickleFallbackSerializer",
    "Preset",
]
