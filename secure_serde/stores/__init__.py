"""Checkpoint stores seen as cells of serialized values: the layer under rewrap, audit and inspect.

LangGraph savers hand every value they serialize to the serializer as a
``(type_tag, bytes)`` pair and store the pair in two columns of one row.
This package finds those pairs in a store written by the stock savers,
without loading langgraph's savers or the values themselves, so a tool can
look at or re-encrypt every stored value whatever it holds.

Opening a store::

    from secure_serde.stores import open_store

    with open_store("checkpoints.sqlite") as store:           # existing SQLite file
        ...
    with open_store("postgresql://app@db:5432/app") as store:  # needs the postgres extra
        ...

Which tables hold cells, and the API (`Store`, `Cell`, `RowRef`, `Swap`,
`HistoryView`, `scan_json_columns`, `V03Reader` and the 0.3 layout it reads):
docs/rotation.md, "The store layer". `CheckpointReader` is inspect's: checkpoints through
`V03Reader`, with their ``next`` tasks derived without the graph. A store secure_serde 0.3's
savers wrote is read only by `V03Reader`; the passes refuse it (`refuse_v03`). Every connection a
tool opens on a store is opened here, and every statement is a literal with bound parameters.

Errors opening, reading or writing a store raise `StoreError`, under
`SecureSerdeError`.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from secure_serde.stores._base import (
        ALL_THREADS,
        DEFAULT_BATCH_SIZE,
        Cell,
        RowRef,
        Store,
        StoreError,
        Swap,
        TableSpec,
        ThreadRange,
    )
    from secure_serde.stores._columns import (
        MAX_NAMES,
        InlineChannel,
        JsonColumnScan,
        MetadataKeys,
        scan_json_columns,
    )
    from secure_serde.stores._dsn import redact
    from secure_serde.stores._history import CheckpointId, HistoryView
    from secure_serde.stores._items import (
        IDENTITY_PREFIX,
        SEALED_FIELD,
        ItemsLayout,
        identity_item_ref,
        is_items_layout,
        namespace_of,
    )
    from secure_serde.stores._next import is_internal_channel
    from secure_serde.stores._open import (
        open_items,
        open_layout,
        open_sealed,
        open_store,
        sealed_items_at,
        sealed_store_display,
        store_thread_ids,
    )
    from secure_serde.stores._postgres import PostgresStore
    from secure_serde.stores._reader import CheckpointEntry, CheckpointReader
    from secure_serde.stores._sealed import (
        IDENTITY_KEY,
        RECORDS,
        SEALED_RECORD_KEY,
        SealedRow,
        identity_ref,
        is_sealed_layout,
    )
    from secure_serde.stores._sqlite import SqliteStore
    from secure_serde.stores._v03 import V03Reader, refuse_v03, written_by_v03
    from secure_serde.stores._v03_metadata import (
        INDEX_METADATA_KEY,
        RECORD_KEY,
        ROW_KEY,
        SEALED_METADATA_KEY,
        V03_STRUCTURAL_METADATA_KEYS,
        parse_envelope,
    )
    from secure_serde.stores._v03_rows import canonical, metadata_record
    from secure_serde.stores._v03_tags import CheckpointTags, checkpoint_tags
else:
    from secure_serde._lazy import lazy_attributes

    # Each module and the names it defines (the TYPE_CHECKING imports above, for the runtime).
    _DEFINED = {
        "_base": "ALL_THREADS DEFAULT_BATCH_SIZE Cell RowRef Store StoreError Swap TableSpec"
        " ThreadRange",
        "_columns": "MAX_NAMES InlineChannel JsonColumnScan MetadataKeys scan_json_columns",
        "_dsn": "redact",
        "_history": "CheckpointId HistoryView",
        "_items": "IDENTITY_PREFIX SEALED_FIELD ItemsLayout identity_item_ref is_items_layout"
        " namespace_of",
        "_open": "open_items open_layout open_sealed open_store sealed_items_at"
        " sealed_store_display store_thread_ids",
        "_next": "is_internal_channel",
        "_postgres": "PostgresStore",
        "_reader": "CheckpointEntry CheckpointReader",
        "_sealed": "IDENTITY_KEY RECORDS SEALED_RECORD_KEY SealedRow identity_ref is_sealed_layout",
        "_sqlite": "SqliteStore",
        "_v03": "V03Reader refuse_v03 written_by_v03",
        "_v03_metadata": "INDEX_METADATA_KEY RECORD_KEY ROW_KEY SEALED_METADATA_KEY"
        " V03_STRUCTURAL_METADATA_KEYS parse_envelope",
        "_v03_rows": "canonical metadata_record",
        "_v03_tags": "CheckpointTags checkpoint_tags",
    }
    __getattr__, __dir__ = lazy_attributes(
        __name__,
        {name: f"{__name__}.{mod}" for mod, names in _DEFINED.items() for name in names.split()},
    )

__all__ = [
    "ALL_THREADS",
    "DEFAULT_BATCH_SIZE",
    "IDENTITY_KEY",
    "IDENTITY_PREFIX",
    "INDEX_METADATA_KEY",
    "MAX_NAMES",
    "RECORDS",
    "RECORD_KEY",
    "ROW_KEY",
    "SEALED_FIELD",
    "SEALED_METADATA_KEY",
    "SEALED_RECORD_KEY",
    "V03_STRUCTURAL_METADATA_KEYS",
    "Cell",
    "CheckpointEntry",
    "CheckpointId",
    "CheckpointReader",
    "CheckpointTags",
    "HistoryView",
    "InlineChannel",
    "ItemsLayout",
    "JsonColumnScan",
    "MetadataKeys",
    "PostgresStore",
    "RowRef",
    "SealedRow",
    "SqliteStore",
    "Store",
    "StoreError",
    "Swap",
    "TableSpec",
    "ThreadRange",
    "V03Reader",
    "canonical",
    "checkpoint_tags",
    "identity_item_ref",
    "identity_ref",
    "is_internal_channel",
    "is_items_layout",
    "is_sealed_layout",
    "metadata_record",
    "namespace_of",
    "open_items",
    "open_layout",
    "open_sealed",
    "open_store",
    "parse_envelope",
    "redact",
    "refuse_v03",
    "scan_json_columns",
    "sealed_items_at",
    "sealed_store_display",
    "store_thread_ids",
    "written_by_v03",
]
