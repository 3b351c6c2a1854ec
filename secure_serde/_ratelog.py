"""A warning logged at most once per interval, with a count of what it stands for.

The migration switches (``Migration.plaintext``, ``Migration.inline_values``) must
leave a trace of every unauthenticated read without flooding the log on a
hot read path, so each read is counted and one warning per interval reports
the count and the latest detail.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Final

logger = logging.getLogger("secure_serde")

DEFAULT_INTERVAL: Final = 60.0


class RateLimitedWarning:
    """``record(detail)`` counts; a warning ``message % (count, detail)`` goes out per interval."""

    __slots__ = ("_interval", "_last", "_lock", "_message", "_unlogged")

    def __init__(self, message: str, interval: float = DEFAULT_INTERVAL) -> None:
        self._message = message
        self._interval = interval
        self._lock = threading.Lock()
        self._last = float("-inf")
        self._unlogged = 0

    def record(self, detail: object) -> None:
        with self._lock:
            self._unlogged += 1
            now = time.monotonic()
            if now - self._last < self._interval:
                return
            count, self._unlogged, self._last = self._unlogged, 0, now
        logger.warning(self._message, count, detail)
