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

Which cells exist (read from the langgraph-checkpoint-sqlite 3.1 and
langgraph-checkpoint-postgres 3.2 sources; primary keys are read from the
database catalog, so the shallow Postgres saver works too):

=====================  =========================  ==============================================
store                  table (type col, data col)  primary key
=====================  =========================  ==============================================
SQLite                 checkpoints (type,          thread_id, checkpoint_ns, checkpoint_id
                       checkpoint)
SQLite                 writes (type, value)        thread_id, checkpoint_ns, checkpoint_id,
                                                   task_id, idx
SQLite                 checkpoints.metadata        thread_id, checkpoint_ns, checkpoint_id
                       (sealed-metadata envelope)
PostgreSQL             checkpoint_blobs (type,     thread_id, checkpoint_ns, channel, version
                       blob)                       (shallow saver: no version)
PostgreSQL             checkpoint_writes (type,    thread_id, checkpoint_ns, checkpoint_id,
                       blob)                       task_id, idx
PostgreSQL             checkpoints.metadata        thread_id, checkpoint_ns, checkpoint_id
                       (sealed-metadata envelope)  (shallow saver: no checkpoint_id)
PostgreSQL             checkpoints.checkpoint      thread_id, checkpoint_ns, checkpoint_id
                       (0.3's record)
=====================  =========================  ==============================================

``checkpoints.metadata`` cells are the sealed-metadata envelope our sealed
savers write (by default, in both databases): the JSON entry
``SEALED_METADATA_KEY`` = ``{"type": <type tag>, "data": <base64>}``, a
serialized value like any other, so rewrap re-encrypts it and audit
authenticates it. Only rows holding one are cells (`TableSpec.envelope_key`).
So is the seal of each checkpoint record the sealed PostgreSQL savers keep in
``checkpoints.checkpoint`` under ``RECORD_KEY`` (`record_cell`).

Not cells, because the serializer never sees them: the rest of the
checkpoint metadata (JSON in both stores) and PostgreSQL's
``checkpoints.checkpoint`` JSONB, where the saver inlines
None/str/int/float/bool channel values itself.

The API, all of it synchronous (sqlite3, psycopg 3):

* `Store.tables` - the `TableSpec` (name, type column, data column, primary
  key columns) of every cell-holding table present.
* `Store.iter_batches(table, batch_size, thread_range)` - every `Cell` of a
  table as lists of at most ``batch_size``, in primary-key order. Each page
  is one short keyset query (``WHERE (pk) > (last pk) ORDER BY pk LIMIT n``)
  run outside any transaction, so memory stays constant, no snapshot is
  held for the run, and the application keeps writing meanwhile.
  `Store.iter_cells` flattens every table.
* `Cell` - ``ref`` (a `RowRef`), ``type_tag`` (``str | None``), ``data``
  (``bytes | None``; ``None`` for PostgreSQL's ``"empty"`` blob rows, which
  hold no value) and ``location``: where a sealed saver binds the value,
  worked out from the row (``_locate``), or ``None``.
* `RowRef` - the table and the full primary key as ``(column, value)``
  pairs, with ``thread_id``, ``checkpoint_ns`` and ``checkpoint_id``
  shortcuts. It holds ids only, so it is what tools print; never print
  ``Cell.data``.
* `Store.compare_and_swap(swaps)` - apply `Swap` (cell, new type, new
  data) objects in one transaction; each updates its row only if the row
  still holds exactly the cell's type tag and bytes
  (``UPDATE ... WHERE pk = ... AND type IS old AND data IS old``; for an
  envelope, ``jsonb_set`` on the row whose entry is still the one read),
  and the returned list says which were applied. A row that changed since it was
  read is never overwritten.
* `Store.reload(ref)` - the row's cell as it is now, or ``None``.
* `Store.count(table, thread_range)` / `Store.count_all` - for progress bars.
* `Store.thread_ranges(n)` - ``n`` disjoint `ThreadRange` objects covering
  every thread id, split by PostgreSQL at row percentiles
  (``percentile_disc``); SQLite returns one range (one writer at a time).
  Every method takes a ``thread_range`` to work on one part only.
* `Store.display` is safe to print (no password); `Store.location` reopens
  the store, e.g. in a worker process.

Beside the cells, for the tools that read a store as history or count its
JSON columns (every connection a tool opens on a store is opened here, and
every statement is a literal with bound parameters):

* `HistoryView(store)` - a read-only connection (SQLite ``mode=ro``,
  PostgreSQL read-only session) with the namespaces and checkpoint ids of a
  thread, and whether records carry a seal.
* `scan_json_columns(view)` - metadata key names, inline channel values
  and 0.3's records, counted by the database (`JsonColumnScan`).
* The layout of the sealed-metadata column (`envelope`, `parse_envelope`,
  `SEALED_METADATA_KEY`, `INDEX_METADATA_KEY`, `ROW_KEY`) and of a
  checkpoint record's seal (`canonical`, `metadata_record`, `RECORD_KEY`),
  shared with the sealed savers, which build on this package.
* `V03Reader(store, serde=...)` - the checkpoints of a store secure_serde
  0.3's sealed savers wrote, read only and checked as 0.3 read them
  (secure_serde/stores/_v03.py); `checkpoint_tags(view)` - each checkpoint's
  stored type tags, decrypting nothing (`CheckpointTags`), which
  ``secure_serde.savers.adopt`` classifies rows by.

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
        RecordSeals,
        scan_json_columns,
    )
    from secure_serde.stores._envelope import (
        INDEX_METADATA_KEY,
        METADATA_TABLE,
        RECORD_KEY,
        RECORD_TABLE,
        ROW_KEY,
        SEALED_METADATA_KEY,
        envelope,
        envelope_cell,
        parse_envelope,
    )
    from secure_serde.stores._history import CheckpointId, HistoryView
    from secure_serde.stores._open import (
        open_items,
        open_sealed,
        open_store,
        sealed_items_at,
        sealed_store_display,
        store_thread_ids,
    )
    from secure_serde.stores._postgres import PostgresStore
    from secure_serde.stores._record import canonical, metadata_record
    from secure_serde.stores._sqlite import SqliteStore
    from secure_serde.stores._v03 import V03Reader
    from secure_serde.stores._v03_metadata import V03_STRUCTURAL_METADATA_KEYS
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
            "INDEX_METADATA_KEY": "secure_serde.stores._envelope",
            "InlineChannel": "secure_serde.stores._columns",
            "JsonColumnScan": "secure_serde.stores._columns",
            "MAX_NAMES": "secure_serde.stores._columns",
            "METADATA_TABLE": "secure_serde.stores._envelope",
            "MetadataKeys": "secure_serde.stores._columns",
            "RECORD_KEY": "secure_serde.stores._envelope",
            "RECORD_TABLE": "secure_serde.stores._envelope",
            "ROW_KEY": "secure_serde.stores._envelope",
            "RecordSeals": "secure_serde.stores._columns",
            "PostgresStore": "secure_serde.stores._postgres",
            "RowRef": "secure_serde.stores._base",
            "SEALED_METADATA_KEY": "secure_serde.stores._envelope",
            "SqliteStore": "secure_serde.stores._sqlite",
            "Store": "secure_serde.stores._base",
            "StoreError": "secure_serde.stores._base",
            "Swap": "secure_serde.stores._base",
            "V03Reader": "secure_serde.stores._v03",
            "V03_STRUCTURAL_METADATA_KEYS": "secure_serde.stores._v03_metadata",
            "TableSpec": "secure_serde.stores._base",
            "ThreadRange": "secure_serde.stores._base",
            "canonical": "secure_serde.stores._record",
            "checkpoint_tags": "secure_serde.stores._v03_tags",
            "envelope": "secure_serde.stores._envelope",
            "envelope_cell": "secure_serde.stores._envelope",
            "metadata_record": "secure_serde.stores._record",
            "open_store": "secure_serde.stores._open",
            "sealed_items_at": "secure_serde.stores._open",
            "open_items": "secure_serde.stores._open",
            "open_sealed": "secure_serde.stores._open",
            "sealed_store_display": "secure_serde.stores._open",
            "store_thread_ids": "secure_serde.stores._open",
            "parse_envelope": "secure_serde.stores._envelope",
            "scan_json_columns": "secure_serde.stores._columns",
        },
    )

__all__ = [
    "ALL_THREADS",
    "DEFAULT_BATCH_SIZE",
    "INDEX_METADATA_KEY",
    "MAX_NAMES",
    "METADATA_TABLE",
    "RECORD_KEY",
    "RECORD_TABLE",
    "ROW_KEY",
    "SEALED_METADATA_KEY",
    "V03_STRUCTURAL_METADATA_KEYS",
    "Cell",
    "CheckpointId",
    "CheckpointTags",
    "HistoryView",
    "InlineChannel",
    "JsonColumnScan",
    "MetadataKeys",
    "PostgresStore",
    "RecordSeals",
    "RowRef",
    "SqliteStore",
    "Store",
    "StoreError",
    "Swap",
    "TableSpec",
    "ThreadRange",
    "V03Reader",
    "canonical",
    "checkpoint_tags",
    "envelope",
    "envelope_cell",
    "metadata_record",
    "open_items",
    "open_sealed",
    "open_store",
    "parse_envelope",
    "scan_json_columns",
    "sealed_items_at",
    "sealed_store_display",
    "store_thread_ids",
]
