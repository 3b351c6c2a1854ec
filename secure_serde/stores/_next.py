"""A checkpoint's ``next`` tasks, derived from what the checkpoint stores, without the graph.

LangGraph computes ``next`` (``prepare_next_tasks``) from the graph's nodes
and the channels each is triggered by. A ``StateGraph`` names those trigger
channels after the nodes, so the checkpoint alone says which nodes run next:

* ``__start__`` triggers the ``__start__`` node (new input);
* ``branch:to:NODE`` (an edge or a conditional edge to NODE) triggers NODE;
* ``join:A+B:NODE`` (``add_edge(["A", "B"], NODE)``) triggers NODE once A
  and B have all written it (deferred joins also once the step finished);
* every ``Send`` in ``__pregel_tasks`` is a task of its node.

A trigger fires when the channel holds a value (it appears in ``channel_values``) and its
version is newer than the one the node last saw (``versions_seen``), as in LangGraph's
``_triggers``. Where this is not exact: docs/cli.md (``secure-serde inspect``); nor is it for
checkpoints older than LangGraph's v4 checkpoint format.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Final

__all__ = ["derive_next", "is_internal_channel"]

_START: Final = "__start__"
_TASKS: Final = "__pregel_tasks"
_BRANCH_TO: Final = "branch:to:"
_JOIN: Final = "join:"


def is_internal_channel(channel: str) -> bool:
    """Channels LangGraph uses to run the graph, which ``get_state().values`` leaves out."""
    return channel.startswith(("__", _BRANCH_TO, _JOIN))


def _target(channel: str, values: Mapping[str, Any]) -> str | None:
    """The node ``channel`` triggers, if it holds a value (a join: once all its starts wrote it)."""
    if channel not in values:
        return None
    if channel == _START or channel.startswith(_BRANCH_TO):
        return channel.removeprefix(_BRANCH_TO)
    if not channel.startswith(_JOIN):
        return None
    starts, _, node = channel[len(_JOIN) :].rpartition(":")
    names, value = set(starts.split("+")), values[channel]
    if (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and isinstance(value[1], bool)
        and isinstance(value[0], Collection)
    ):
        seen, finished = value  # a deferred node's barrier: (seen, finished)
        return node if finished and set(seen) == names else None
    if isinstance(value, Collection) and not isinstance(value, str) and set(value) == names:
        return node
    return None


def _newer(version: Any, seen: Any) -> bool:
    if seen is None:
        return True
    try:
        return bool(version > seen)
    except TypeError:
        # Versions of mixed types (a migrated thread): any change counts.
        return bool(version != seen)


def derive_next(checkpoint: Mapping[str, Any]) -> tuple[str, ...]:
    """The names of the tasks the step after ``checkpoint`` runs: Sends first, then nodes."""
    values: Mapping[str, Any] = checkpoint.get("channel_values") or {}
    versions: Mapping[str, Any] = checkpoint.get("channel_versions") or {}
    seen_by: Mapping[str, Mapping[str, Any]] = checkpoint.get("versions_seen") or {}
    # Imported here: langgraph.types pulls in langchain-core's tracers, which
    # every other subcommand would otherwise pay for at start-up.
    from langgraph.types import Send

    packets = values.get(_TASKS)
    pushed = [p.node for p in packets if isinstance(p, Send)] if isinstance(packets, list) else []
    pulled = set()
    for channel, version in versions.items():
        node = _target(channel, values)
        if node is not None and _newer(version, (seen_by.get(node) or {}).get(channel)):
            pulled.add(node)
    return (*pushed, *sorted(pulled))
