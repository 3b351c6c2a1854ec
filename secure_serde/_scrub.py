"""`scrubbed`: errors leave a function that held key material with its frames' locals cleared.

Error trackers that capture frame locals (Sentry's default) send the
``repr`` of every local in every frame of a traceback off the host. A
function that receives a key, parses one or unwraps a data key holds it in
a local, and so does every frame below it that the error passed through.
Careful messages do not help there: the key is in the frame, not the text.

`scrubbed` wraps such a function. When an error leaves it, the locals of
every frame the error (and each error chained to it inside the call) passed
through below the wrapper are cleared with `frame.clear`, the wrapper drops
its own reference to the arguments, and the error is raised on with its
traceback, line numbers and message intact. Only the cold paths that hold
keys are wrapped: constructors, key parsing, KMS key calls and the legacy
reader, never the per-value v1 path.
"""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable
from typing import ParamSpec, TypeVar

_P = ParamSpec("_P")
_R = TypeVar("_R")


def scrubbed(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """Wrap ``function`` so that no error leaves it with key material in a frame local."""

    @functools.wraps(function)
    def call(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        handling = sys.exception()
        try:
            return function(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - re-raised below, after the frames are cleared
            error = exc
        # Outside the ``except`` block, so no second error is chained to it.
        del args, kwargs
        # The chain is followed up to the error the caller was already handling,
        # whose frames are the caller's own; running frames keep their locals.
        seen: set[int] = set()
        todo = [error]
        while todo:
            current = todo.pop()
            if current is handling or id(current) in seen:
                continue
            seen.add(id(current))
            traceback.clear_frames(current.__traceback__)
            todo += [e for e in (current.__cause__, current.__context__) if e is not None]
        del handling
        tb = error.__traceback__
        # The first entry is this wrapper, added again by the ``raise``.
        if tb is not None and tb.tb_frame is sys._getframe():
            tb = tb.tb_next
        raise error.with_traceback(tb)

    return call
