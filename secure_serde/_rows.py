"""Where a row lives, and why a pass could not handle it: records that hold ids, never data.

`RowRef` names a stored value by its table and full primary key (the stores
layer reads and writes by it); `CheckpointRow` names a row of a checkpoint
pass by the checkpoint's ids; `RowFailure` is one failed unit of any pass
(secure_serde/_report.py), and `Unvouched` one row adopt cannot vouch for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from secure_serde._errors import SecureSerdeError

__all__ = [
    "LEGACY",
    "MISPLACED",
    "PARENT_REFUSED",
    "PLAINTEXT",
    "UNAUTHENTICATED",
    "WHY",
    "CheckpointRow",
    "KeyValue",
    "RowFailure",
    "RowRef",
    "Unvouched",
]

KeyValue = str | int


@dataclass(frozen=True)
class RowRef:
    """Where one serialized value lives: its table and full primary key. Never data.

    ``key`` pairs every primary-key column with its value, in index order,
    so a reference is enough to find the row again (`Store.reload`) and
    safe to print: it holds ids only.
    """

    table: str
    key: tuple[tuple[str, KeyValue], ...]

    def get(self, column: str) -> KeyValue | None:
        return dict(self.key).get(column)

    @property
    def thread_id(self) -> str:
        return str(self.get("thread_id"))

    @property
    def checkpoint_ns(self) -> str:
        value = self.get("checkpoint_ns")
        return "" if value is None else str(value)

    @property
    def checkpoint_id(self) -> str | None:
        """None for tables keyed by channel version (PostgreSQL ``checkpoint_blobs``)."""
        value = self.get("checkpoint_id")
        return None if value is None else str(value)

    @property
    def key_values(self) -> tuple[KeyValue, ...]:
        return tuple(value for _, value in self.key)

    def __str__(self) -> str:
        parts = " ".join(f"{name}={value!r}" for name, value in self.key)
        return f"{self.table} {parts}"


@dataclass(frozen=True)
class CheckpointRow(RowRef):
    """Where a row of a checkpoint pass lives: the checkpoint's ids and the row in it.

    ``row`` is ``"checkpoint"``, ``"value <channel>"`` or ``"write <task id>
    <channel>"``. ``seq`` orders the rows of one run as the pass listed them.
    """

    row: str = "checkpoint"
    seq: int = field(default=0, compare=False, repr=False)

    @classmethod
    def at(
        cls,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        row: str = "checkpoint",
        seq: int = 0,
    ) -> CheckpointRow:
        key = (
            ("thread_id", thread_id),
            ("checkpoint_ns", checkpoint_ns),
            ("checkpoint_id", checkpoint_id),
        )
        return cls("checkpoints", key, row, seq)

    def __str__(self) -> str:
        where = f"{self.thread_id!r} ns={self.checkpoint_ns!r} checkpoint {self.checkpoint_id}"
        return f"{where}: {self.row}"


# Adopt's reasons for listing a row (`Unvouched.reason`), and what each means.
PLAINTEXT: Final = "plaintext"
LEGACY: Final = "legacy"
UNAUTHENTICATED: Final = "unauthenticated"
MISPLACED: Final = "misplaced"
PARENT_REFUSED: Final = "parent refused"
WHY: Final = {
    PLAINTEXT: "stored in plaintext: nothing authenticates it",
    LEGACY: "langgraph's +aes format: its type tag is not authenticated (could be relabelled)",
    UNAUTHENTICATED: "did not authenticate at its location (read only under a Migration switch)",
    MISPLACED: "did not authenticate at its location, even under the Migration switches",
    PARENT_REFUSED: "its parent checkpoint was refused, so its history would not be complete",
}


@dataclass(frozen=True)
class Unvouched:
    """One row ``adopt`` cannot vouch for, and whether it was (or would be) copied."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    row: str  # "checkpoint", "value <channel>", or "write <task id> <channel>"
    reason: str  # PLAINTEXT, LEGACY, UNAUTHENTICATED, MISPLACED or PARENT_REFUSED
    copied: bool

    def __str__(self) -> str:
        where = f"{self.thread_id!r} ns={self.checkpoint_ns!r} checkpoint {self.checkpoint_id}"
        action = "copied (accepted)" if self.copied else "refused"
        return f"{where}: {self.row}: {WHY[self.reason]}; {action}"


@dataclass(frozen=True)
class RowFailure:
    """A unit a pass could not handle: where it is and why, never what it holds.

    ``error`` is the exception class that kept it (``None`` when no error
    class applies, such as a row that kept changing under concurrent writes,
    or a row adopt refuses by policy); ``reason`` says the same in words;
    ``kind`` is a short label a pass sorts its rows by (adopt's
    ``plaintext``, ``legacy``...), empty when the error class says it all.
    """

    ref: RowRef
    reason: str
    error: type[SecureSerdeError] | None = None
    kind: str = ""

    def __str__(self) -> str:
        return f"{self.ref}: {self.reason}"

    def as_json(self) -> dict[str, Any]:
        ref = self.ref
        where: dict[str, Any] = {"table": ref.table, "key": dict(ref.key)}
        if isinstance(ref, CheckpointRow):
            where["row"] = ref.row
        return {
            **where,
            "error": None if self.error is None else self.error.__name__,
            "kind": self.kind or None,
            "reason": self.reason,
        }
