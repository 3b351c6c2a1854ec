"""Reading ``secure-serde rewrap --progress`` from a child process, to kill it at a chosen point.

The SIGKILL tests choose the moment of a kill by the work the child reports it has committed
(rows scanned and rewrapped), not by a clock: on a slow machine and a fast one alike, the kill
then lands with work done and work left.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

__all__ = ["Progress", "progress_lines"]

# One redraw of cli/_rewrap.py's ProgressLine; a redraw ends with "failed N ".
_LINE: Final = re.compile(
    rb"\rrewrap \[[#-]*\] ([\d,]+)/([\d,]+) rows [^\r]*?  ([\d,]+) rows/s"
    rb"  rewrapped ([\d,]+)  failed [\d,]+ "
)


@dataclass(frozen=True)
class Progress:
    """One progress line: drawn after a batch is committed."""

    scanned: int
    total: int
    rate: int
    rewrapped: int

    @property
    def finished(self) -> bool:
        return self.total > 0 and self.scanned >= self.total


def progress_lines(fd: int) -> Iterator[Progress]:
    """Each progress line the child draws on ``fd``, as it comes; ends when the child closes it."""
    pending = b""
    while chunk := os.read(fd, 4096):
        pending += chunk
        end = 0
        for match in _LINE.finditer(pending):
            end = match.end()
            scanned, total, rate, rewrapped = (int(g.replace(b",", b"")) for g in match.groups())
            yield Progress(scanned, total, rate, rewrapped)
        pending = pending[end:]
