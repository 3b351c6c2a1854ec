"""Rendering decoded checkpoint values for people (compact text) and for programs (JSON).

Messages get one line each (``human: 'text'``, tool calls by name and
arguments); other values their ``repr``, shortened to ``max_chars``
(0 keeps everything). The JSON form keeps structure: pydantic models (messages
included) are dumped with ``model_dump(mode="json")``, dataclasses and named
tuples become objects, sets and tuples lists, bytes base64, and anything
else its ``repr`` under ``"__repr__"``.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import enum
import json
import shlex
import sys
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from secure_serde.passes import PassReport

__all__ = [
    "MAX_LISTED",
    "capped",
    "command",
    "compact",
    "for_terminal",
    "message_lines",
    "print_document",
    "report_lines",
    "shorten",
    "to_jsonable",
]

_ELLIPSIS: Final = "..."
# Rows listed by id in a text report, per list; --json lists every row the report kept.
MAX_LISTED: Final = 20


def for_terminal(text: object) -> str:
    """``text`` with each character ``str.isprintable`` refuses written as its Python escape.

    Store-derived strings (type tags, metadata keys, thread ids) pass through here at every
    text sink: a newline could forge a report line, ``ESC[8m`` hide one, U+202E reverse one.
    Printable text, emoji included, is kept. JSON needs none of this: ``json`` escapes them.
    """
    value = text if isinstance(text, str) else str(text)
    if value.isprintable():
        return value
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in value
    )


def capped(
    rows: Sequence[object],
    total: int | None = None,
    *,
    limit: int = MAX_LISTED,
    indent: str = "  ",
) -> list[str]:
    """The first ``limit`` rows (`for_terminal`), then one line counting the rest.

    A store of a million bad rows prints a page, and ``--json`` the list the report kept;
    ``total`` is how many there were, when it keeps fewer than it counts (rewrap keeps 1,000).
    """
    count = len(rows) if total is None else max(total, len(rows))
    lines = [f"{indent}{for_terminal(row)}" for row in rows[: max(limit, 0)]]
    rest = count - len(lines)
    if rest > 0:
        where = "them" if len(rows) >= count else f"the first {len(rows):,}"
        lines.append(f"{indent}... and {rest:,} more (--json lists {where})")
    return lines


def print_document(document: object, as_json: bool, text: Callable[[], Iterable[str]]) -> None:
    """A command's one document: ``--json`` prints it, else ``text()`` reads it (`for_terminal`)."""
    if as_json:
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for line in text():
            print(for_terminal(line))


def report_lines(
    report: PassReport,
    *,
    named: Callable[[str], str] = str,
    fixes: Sequence[str] = (),
) -> list[str]:
    """A pass's report as text (rewrap, adopt): its summary, the accepted rows and failures,
    each list `capped`, then ``fixes``, the command that fixes each kind of failure."""
    lines = [for_terminal(line) for line in report.summary(named)]
    if report.accepted:
        lines.append(for_terminal(report.accepted_heading))
        lines += capped(report.accepted, report.counts.get("accepted"))
    if report.failures:
        lines.append(for_terminal(report.failures_heading))
        lines += capped(report.failures, report.failure_count)
        lines += [f"  {for_terminal(fix)}" for fix in fixes]
    return lines


def command(*argv: str) -> str:
    """``secure-serde ARGV`` as a shell line that runs as printed, safe for a terminal."""
    return for_terminal(" ".join(["secure-serde", *(shlex.quote(arg) for arg in argv)]))


def shorten(text: str, max_chars: int) -> str:
    if max_chars <= 0 or len(text) <= max_chars:
        return text
    return text[: max(max_chars - len(_ELLIPSIS), 1)] + _ELLIPSIS


def _content(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return repr(content)
    texts = [b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    texts += [b for b in content if isinstance(b, str)]
    others = len(content) - len(texts)
    shown = repr(" ".join(texts))
    return shown + (f" (+{others} non-text block(s))" if others else "")


def message_lines(message: BaseMessage, max_chars: int) -> list[str]:
    name = f" {message.name}" if getattr(message, "name", None) else ""
    lines = [shorten(for_terminal(f"{message.type}{name}: {_content(message)}"), max_chars)]
    for call in getattr(message, "tool_calls", None) or ():
        args = ", ".join(f"{k}={v!r}" for k, v in (call.get("args") or {}).items())
        lines.append(shorten(for_terminal(f"-> {call.get('name')}({args})"), max_chars))
    return lines


def compact(value: Any, max_chars: int) -> list[str]:
    """A value as text lines: the first goes after ``name:``, the others are indented."""
    # Imported here, not at the top: audit and rewrap use `for_terminal`
    # alone, and need not load langchain_core and pydantic to start.
    from langchain_core.messages import BaseMessage

    if isinstance(value, list) and value and all(isinstance(m, BaseMessage) for m in value):
        lines = [f"{len(value)} message(s)"]
        for index, message in enumerate(value):
            first, *rest = message_lines(message, max_chars)
            lines.append(f"[{index}] {first}")
            lines += [f"    {line}" for line in rest]
        return lines
    if isinstance(value, BaseMessage):
        return message_lines(value, max_chars)
    return [shorten(for_terminal(repr(value)), max_chars)]


def to_jsonable(value: Any) -> Any:  # noqa: C901 - one branch per JSON-able type
    """``value`` as JSON-compatible data, structure kept (see the module docstring)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {"__type__": type(value).__name__, **to_jsonable(value._asdict())}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [to_jsonable(v) for v in items]
    from pydantic import BaseModel

    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    from langgraph.types import Send  # see stores._next.derive_next: kept off start-up

    if isinstance(value, Send):
        return {"__type__": "Send", "node": value.node, "arg": to_jsonable(value.arg)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {"__type__": type(value).__name__, **to_jsonable(fields)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"__bytes__": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (uuid.UUID, enum.Enum)):
        return str(value)
    return {"__repr__": repr(value)}
