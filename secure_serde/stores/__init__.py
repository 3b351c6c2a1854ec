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
docs/rotation.md, "The store layer". A store secure_serde 0.3's savers wrote
is read only by `V03Reader`; the passes refuse it (`refuse_v03`). Every connection a tool opens
on a store is opened here, and every statement is a literal with bound
parameters.

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

    __getattr__, __dir__ = lazy_attributes(
        __name__,
        {
            "ALL_THREADS": "secure_serde.stores._base",
            "Cell": "secure_serde.stores._base",
            "CheckpointId": "secure_serde.stores._history",
            "CheckpointTags": "secure_serde.stores._v03_tags",
            "DEFAULT_BATCH_SIZE": "secure_serde.stores._base",
            "HistoryView": "secure_serde.stores._history",
            "INDEX_METADATA_KEY": "secure_serde.stores._v03_metadata",
            "InlineChannel": "secure_serde.stores._columns",
            "JsonColumnScan": "secure_serde.stores._columns",
            "MAX_NAMES": "secure_serde.stores._columns",
            "MetadataKeys": "secure_serde.stores._columns",
            "RECORD_KEY": "secure_serde.stores._v03_metadata",
            "ROW_KEY": "secure_serde.stores._v03_metadata",
            "PostgresStore": "secure_serde.stores._postgres",
            "RowRef": "secure_serde.stores._base",
            "SEALED_METADATA_KEY": "secure_serde.stores._v03_metadata",
            "SqliteStore": "secure_serde.stores._sqlite",
            "Store": "secure_serde.stores._base",
            "StoreError": "secure_serde.stores._base",
            "Swap": "secure_serde.stores._base",
            "V03Reader": "secure_serde.stores._v03",
            "V03_STRUCTURAL_METADATA_KEYS": "secure_serde.stores._v03_metadata",
            "TableSpec": "secure_serde.stores._base",
            "ThreadRange": "secure_serde.stores._base",
            "canonical": "secure_serde.stores._v03_rows",
            "checkpoint_tags": "secure_serde.stores._v03_tags",
            "metadata_record": "secure_serde.stores._v03_rows",
            "open_store": "secure_serde.stores._open",
            "redact": "secure_serde.stores._dsn",
            "IDENTITY_KEY": "secure_serde.stores._sealed",
            "SEALED_RECORD_KEY": "secure_serde.stores._sealed",
            "RECORDS": "secure_serde.stores._sealed",
            "SealedRow": "secure_serde.stores._sealed",
            "identity_ref": "secure_serde.stores._sealed",
            "is_sealed_layout": "secure_serde.stores._sealed",
            "IDENTITY_PREFIX": "secure_serde.stores._items",
            "SEALED_FIELD": "secure_serde.stores._items",
            "ItemsLayout": "secure_serde.stores._items",
            "is_items_layout": "secure_serde.stores._items",
            "namespace_of": "secure_serde.stores._items",
            "identity_item_ref": "secure_serde.stores._items",
            "open_layout": "secure_serde.stores._open",
            "sealed_items_at": "secure_serde.stores._open",
            "open_items": "secure_serde.stores._open",
            "open_sealed": "secure_serde.stores._open",
            "sealed_store_display": "secure_serde.stores._open",
            "store_thread_ids": "secure_serde.stores._open",
            "parse_envelope": "secure_serde.stores._v03_metadata",
            "refuse_v03": "secure_serde.stores._v03",
            "written_by_v03": "secure_serde.stores._v03",
            "scan_json_columns": "secure_serde.stores._columns",
        },
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
    "CheckpointId",
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
