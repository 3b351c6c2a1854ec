"""``secure-serde inspect STORE --thread T``: decrypt and show a checkpoint or a thread's history.

What it shows is in docs/cli.md (``secure-serde inspect``); the reading is
`secure_serde.stores.CheckpointReader` (`_inspect_read.SealedReader` on a store SealedSaver
sealed), which derives ``next`` without the graph. This is a debugging tool: unlike audit, it
prints state values. Exit codes: the epilog.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any, Final

from secure_serde import Migration
from secure_serde.cli._args import JSON, STORE, define, positive_int
from secure_serde.cli._inspect_read import SealedReader
from secure_serde.cli._pretty import compact, print_document, to_jsonable
from secure_serde.config import PICKLE_PRESETS, serializer_from_env
from secure_serde.serde import langgraph_internals as lg
from secure_serde.stores import (
    CheckpointEntry,
    CheckpointReader,
    is_internal_channel,
    open_store,
    sealed_store_display,
)

__all__ = ["register"]

EXIT_SHOWN: Final = 0
EXIT_NOT_SHOWN: Final = 1
_DEFAULT_MAX_CHARS: Final = 300
_SHOWN_FIRST: Final = ("step", "source", "parents")
UNBOUND_WARNING: Final = (
    "not sealed for its location (a stock saver or an older secure_serde wrote it) in a"
    " store 0.3's savers write: they read it only under Migration(unbound=True)"
)


def register(parser: argparse.ArgumentParser) -> None:
    define(
        parser,
        run,
        "Decrypt and print one checkpoint of a thread, or its history newest first: channel"
        " values, next tasks, metadata and pending writes. Reads through LangGraph's savers,"
        " read only, with the keys of LANGGRAPH_AES_KEY, SECURE_SERDE_KEYRING_FILE and"
        " SECURE_SERDE_KMS_KEY. 'next' is derived from the checkpoint's trigger channels"
        " without the graph (exact for StateGraph graphs; siblings sorted by name). Prints"
        " state values: it is a debugging tool.",
        {
            "store": STORE,
            "--thread": {"required": True, "help": "the thread id"},
            "--checkpoint": {"help": "one checkpoint id (default: the whole history)"},
            "--ns": {
                "default": "",
                "help": "checkpoint namespace, for a subgraph (default: the root graph)",
            },
            "--limit": {"type": positive_int, "help": "show at most this many checkpoints"},
            "--json": JSON,
            "--all-channels": "also show LangGraph's internal channels (branch:to:*, __start__,"
            " ...)",
            "--max-chars": {
                "type": int,
                "default": _DEFAULT_MAX_CHARS,
                "help": "shorten each printed value to this many characters, 0 for no limit"
                f" (default {_DEFAULT_MAX_CHARS}; text output only)",
            },
            "--pickle": {
                "action": "append",
                "default": [],
                "choices": PICKLE_PRESETS,
                "help": "read values written with PickleFallbackSerializer and this preset"
                " (repeatable)",
            },
            "--allow-plaintext": "also read unencrypted values (decoded strictly: data types"
            " only, no imports)",
            "--allow-legacy-pickle": "also unpickle pickle rows of langgraph's built-in format"
            " (tag not authenticated)",
            "--allow-inline-values": "PostgreSQL: also read values a stock saver left inline in"
            " the checkpoint JSON",
        },
        "exit status: 0 shown; 1 no such thread, namespace or checkpoint, or a checkpoint"
        " could not be read (shown in its place); 2 usage, configuration or store error.",
    )


def run(args: argparse.Namespace) -> int:
    # Every switch widens what is read, never what runs: values no cipher
    # authenticated (plaintext, legacy +aes, inline) are decoded strictly.
    migration = Migration(
        plaintext=args.allow_plaintext,
        legacy_pickle=args.allow_legacy_pickle,
        inline_values=args.allow_inline_values,
    )
    serde = serializer_from_env(migration=migration, pickle_presets=args.pickle)
    sealed = sealed_store_display(args.store)
    reader: CheckpointReader
    if sealed is not None:
        # Sealed by SealedSaver: read as the application reads, with no migration switch.
        display = sealed
        reader = SealedReader(args.store, serializer_from_env(pickle_presets=args.pickle))
    else:
        with open_store(args.store) as store:  # a clear error for a missing or foreign store
            display = store.display
            reader = CheckpointReader(store, serde, migration=migration)
    try:
        namespaces = dict(reader.namespaces(args.thread))
        if args.ns not in namespaces:
            known = ", ".join(f"{ns!r} ({n})" for ns, n in namespaces.items()) or "none"
            print(
                f"secure-serde: no checkpoints for thread {args.thread!r} in namespace"
                f" {args.ns!r}; its namespaces: {known}",
                file=sys.stderr,
            )
            return EXIT_NOT_SHOWN
        if args.checkpoint is None:
            ids = reader.checkpoint_ids(args.thread, args.ns, args.limit)
        else:
            ids = [args.checkpoint]
        entries = []
        for checkpoint_id in ids:
            entry = reader.read(args.thread, args.ns, checkpoint_id)
            if entry is None:
                print(
                    f"secure-serde: no checkpoint {checkpoint_id!r} in thread {args.thread!r},"
                    f" namespace {args.ns!r}",
                    file=sys.stderr,
                )
                return EXIT_NOT_SHOWN
            entries.append(entry)
        binding = any(e.unbound for e in entries) and reader.binding_store()
    finally:
        reader.close()
    unbound = [e.checkpoint_id for e in entries if e.unbound] if binding else []
    if unbound:
        print(
            f"secure-serde: warning: {len(unbound)} checkpoint(s) shown are {UNBOUND_WARNING}:"
            f" {', '.join(unbound)}",
            file=sys.stderr,
        )
    views = [_view(entry, args.all_channels, binding) for entry in entries]
    document = {
        "store": display,
        "thread_id": args.thread,
        "checkpoint_ns": args.ns,
        "namespaces": namespaces,
        "next_derived_without_graph": True,
        "binding_store": binding,
        "checkpoints": views,
    }
    text = lambda: _text(display, args, namespaces, views)  # noqa: E731 - one use, named
    print_document(to_jsonable(document) if args.json else None, args.json, text)
    return EXIT_NOT_SHOWN if any(e.error for e in entries) else EXIT_SHOWN


def _view(entry: CheckpointEntry, all_channels: bool, binding: bool) -> dict[str, Any]:
    """One checkpoint as shown: ``--json`` prints it through `to_jsonable`, `_lines` as text."""
    view: dict[str, Any] = {"checkpoint_id": entry.checkpoint_id}
    saved = entry.saved
    if saved is not None:
        metadata: Mapping[str, Any] = saved.metadata or {}
        parent = (saved.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        view.update(
            parent_checkpoint_id=parent,
            created_at=saved.checkpoint.get("ts"),
            step=metadata.get("step"),
            source=metadata.get("source"),
        )
    view.update(
        error=entry.error,
        unbound=entry.unbound,
        warning=UNBOUND_WARNING if binding and entry.unbound else None,
    )
    if saved is None:
        return view
    stored: Mapping[str, Any] = saved.checkpoint.get("channel_values") or {}
    view.update(
        next=list(entry.next),
        metadata=saved.metadata,
        # At a snapshot checkpoint the snapshot is the channel's whole value.
        values={
            channel: value.value if isinstance(value, lg.DeltaSnapshot) else value
            for channel, value in stored.items()
            if all_channels or not is_internal_channel(channel)
        },
        delta_channels=entry.deltas,
        pending_writes=[
            {"task_id": task_id, "channel": channel, "value": value}
            for task_id, channel, value in saved.pending_writes or ()
        ],
    )
    return view


def _value(indent: str, name: str, value: Any, width: int) -> list[str]:
    first, *rest = compact(value, width)
    return [f"{indent}{name}: {first}", *(f"{indent}  {line}" for line in rest)]


def _text(
    display: str, args: argparse.Namespace, namespaces: Mapping[str, int], views: list[Any]
) -> list[str]:
    others = ", ".join(f"{ns!r} ({n})" for ns, n in namespaces.items() if ns != args.ns)
    where = "root graph" if args.ns == "" else "subgraph"
    lines = [
        f"store: {display}",
        f"thread: {args.thread!r}  namespace: {args.ns!r} ({where}),"
        f" {namespaces[args.ns]} checkpoint(s)"
        + (f"; other namespaces: {others}" if others else ""),
        "next: derived from the stored trigger channels, without the graph"
        " (the tasks of the following step, as get_state_history lists them)",
    ]
    for index, view in enumerate(views):
        newest = " (newest)" if index == 0 and args.checkpoint is None else ""
        lines += ["", f"== checkpoint {view['checkpoint_id']}{newest}"]
        lines += _lines(view, args.max_chars)
    return lines


def _lines(view: Mapping[str, Any], width: int) -> list[str]:  # noqa: C901 - one branch a part
    if "metadata" not in view:  # nothing of it could be read
        return [f"  cannot read: {view['error']}"]
    lines = [
        f"  step {view['step']}, source {view['source']},"
        f" created {view['created_at']}, parent {view['parent_checkpoint_id']}"
    ]
    if view["warning"]:
        lines.append(f"  WARNING: {view['warning']}")
    if view["error"] is not None:
        lines.append(f"  cannot read all of it: {view['error']}")
    lines.append(f"  next: {', '.join(view['next']) if view['next'] else '(none)'}")
    metadata: Mapping[str, Any] = view["metadata"] or {}
    if metadata.get("parents"):
        lines += _value("  ", "parents", metadata["parents"], width)
    rest = {k: v for k, v in metadata.items() if k not in _SHOWN_FIRST}
    if rest:
        lines.append("  metadata:")
        for key, value in sorted(rest.items()):
            lines += _value("    ", key, value, width)
    values, deltas = view["values"], view["delta_channels"]
    lines.append("  values:" if values or deltas else "  values: (none)")
    for channel, value in values.items():
        lines += _value("    ", channel, value, width)
    for channel, delta in deltas.items():
        seed = (
            f"snapshot {compact(delta['seed'], width)[0]}" if delta["has_seed"] else "no snapshot"
        )
        lines.append(
            f"    {channel}: DeltaChannel, {seed} + {len(delta['writes'])} write(s)"
            " since (the graph's reducer combines them)"
        )
        for write in delta["writes"]:
            lines += _value("      ", "+", write, width)
    if writes := view["pending_writes"]:
        lines.append(f"  pending writes ({len(writes)}):")
        for write in writes:
            name = f"task {write['task_id'][:8]} {write['channel']}"
            lines += _value("    ", name, write["value"], width)
    return lines
