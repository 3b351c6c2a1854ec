"""The installed version, read from the package metadata: pyproject.toml is its one source.

Imported on first use of ``secure_serde.__version__`` or ``secure-serde
--version`` only: `importlib.metadata` costs more to import than the rest of
``import secure_serde``.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import Final

__all__ = ["DISTRIBUTION", "__version__"]

DISTRIBUTION: Final = "secure-serde"


def _installed() -> str:
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:  # pragma: no cover - a source tree never installed
        return "0+unknown"


__version__: Final = _installed()
