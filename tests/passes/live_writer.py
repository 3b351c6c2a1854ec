"""An application that keeps writing to a store while rewrap runs, for the live-writer tests.

A background thread opens its own graph on the store and runs one human turn after another
(`run_turns`), on threads a test picks by turn number, until the test stops it. Finished turns
are kept in order, so a test tells which turns landed while rewrap was working by counting them
before and after (`mark`, `since`), never by reading a clock, and afterwards checks that every
turn is in the state of its thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from tests.passes.rewrap_support import config, run_turns

# Turn numbers of the writer start here, clear of the turns the tests write beforehand.
FIRST_TURN: Final = 100
# Only a guard against a hung writer (a lock never released): a turn takes milliseconds.
_STALL_S: Final = 120.0


@dataclass
class LiveWriter:
    """What the writer thread has done so far: each finished turn's thread and time, in order."""

    done: list[tuple[str, float]] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)
    changed: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, turns: int) -> None:
        """Return once the writer has finished ``turns`` turns (it is really writing)."""
        with self.changed:
            moved = self.changed.wait_for(
                lambda: len(self.done) >= turns or bool(self.errors), timeout=_STALL_S
            )
        assert moved, f"the writer is stuck after {len(self.done)} turns"

    def mark(self) -> int:
        """How many turns have finished so far; `since` takes it back."""
        with self.changed:
            return len(self.done)

    def since(self, mark: int) -> list[str]:
        """The threads of the turns that finished after `mark` was taken."""
        with self.changed:
            return [thread for thread, _ in self.done[mark:]]

    def between(self, start: float, end: float) -> list[str]:
        """The threads of the turns that finished between two `time.monotonic` readings.

        Kept for tests that watch a subprocess; in-process tests use `mark` and `since`.
        """
        return [thread for thread, at in self.done if start <= at <= end]

    def finished(self, thread: str) -> None:
        with self.changed:
            self.done.append((thread, time.monotonic()))
            self.changed.notify_all()

    def failed(self, exc: BaseException) -> None:
        with self.changed:
            self.errors.append(exc)
            self.changed.notify_all()

    def check_turns_kept(self, graph: Any, base_turns: int) -> None:
        """Fail unless each thread written to holds every one of its human turns.

        Threads named ``base...`` held ``base_turns`` turns before the writer started.
        """
        for thread in {t for t, _ in self.done}:
            humans = [
                m.content
                for m in graph.get_state(config(thread)).values["messages"]
                if m.type == "human"
            ]
            turns = sum(1 for t, _ in self.done if t == thread)
            expected = turns + (base_turns if thread.startswith("base") else 0)
            assert len(humans) == expected, (thread, humans)


@contextmanager
def live_writer(
    open_graph: Callable[[], AbstractContextManager[Any]],
    pick_thread: Callable[[int], str],
    *,
    min_turns: int = 0,
) -> Iterator[LiveWriter]:
    """Run the writer for the duration of the block; fail afterwards if it raised.

    ``pick_thread(turn)`` names the thread each turn writes to. The writer stops when the
    block ends, but not before it has written ``min_turns`` turns.
    """
    writer = LiveWriter()
    stop = threading.Event()

    def write() -> None:
        try:
            with open_graph() as graph:
                turn = 0
                while not stop.is_set() or turn < min_turns:
                    thread = pick_thread(turn)
                    run_turns(graph, thread, 1, start=FIRST_TURN + turn)
                    writer.finished(thread)
                    turn += 1
        except BaseException as exc:  # noqa: BLE001 - the writer thread hands it to the test
            writer.failed(exc)

    worker = threading.Thread(target=write)
    worker.start()
    try:
        yield writer
    finally:
        stop.set()
        worker.join(timeout=60)
    assert not writer.errors, writer.errors
