"""`SealedSaver`: one sealed checkpointer around any LangGraph saver, on its public API.

Modules, each with one job:

* ``_cell``: the byte layout of what the inner saver stores (documented there);
* ``_identity``: the store identity, created once per store and sealed in it;
* ``_index``: blind-index tokens for metadata filters;
* ``_record``: the record, one sealed cell per checkpoint, and its inline values;
* ``_codec``: sealing a checkpoint for the inner saver, and opening one;
* ``_walks``: history checks and the bookkeeping of copy, prune and delete;
* ``_saver`` and ``_async``: the saver, sync and async;
* ``_tenants``, ``_tenant_inner`` and ``_tenant_saver``: per-tenant keys, one
  tenant's scope, and the saver that routes each call to its tenant;
* ``_audit``: every row of a sealed store checked, for ``secure-serde audit``;
* ``_store_codec``, ``_store_identity``, ``_store_plans`` and ``_store``:
  `SealedStore`, the same sealing for long-term memory (any ``BaseStore``).

Besides the user API (`SealedSaver`, `SealedStore`, `TenantKeys`, the audits),
``__all__`` holds what the folders above build on, so that none reaches into a
module here: the cell layout (as ``cell_layout``), the store identity, blind
indexes and tenant row prefixes for ``passes``; ``PruningSealedSaver`` for
``savers.postgres``.
"""

# Registers the per-tenant routing saver with SealedSaver (it subclasses SealedSaver).
import secure_serde.sealing._tenant_saver  # noqa: F401
from secure_serde.sealing import _cell as cell_layout
from secure_serde.sealing._audit import AuditFinding, SealedAuditReport, ShreddedRow, audit_sealed
from secure_serde.sealing._identity import IDENTITY_THREAD, StoreIdentity, parse_record
from secure_serde.sealing._index import BlindIndex
from secure_serde.sealing._record import new_versions_of
from secure_serde.sealing._reindex import ReindexReport
from secure_serde.sealing._saver import DEFAULT_INDEXED_METADATA, PruningSealedSaver, SealedSaver
from secure_serde.sealing._store import SealedStore
from secure_serde.sealing._store_audit import StoreAuditReport, StoreItemFinding, audit_store_items
from secure_serde.sealing._store_identity import IDENTITY_ITEM_KEY, RESERVED_NAMESPACE
from secure_serde.sealing._tenant_inner import tenant_prefix, tenant_thread_prefix
from secure_serde.sealing._tenants import ShreddedScopes, TenantKeys

__all__ = [
    "DEFAULT_INDEXED_METADATA",
    "IDENTITY_ITEM_KEY",
    "IDENTITY_THREAD",
    "RESERVED_NAMESPACE",
    "AuditFinding",
    "BlindIndex",
    "PruningSealedSaver",
    "ReindexReport",
    "SealedAuditReport",
    "SealedSaver",
    "SealedStore",
    "ShreddedRow",
    "ShreddedScopes",
    "StoreAuditReport",
    "StoreIdentity",
    "StoreItemFinding",
    "TenantKeys",
    "audit_sealed",
    "audit_store_items",
    "cell_layout",
    "new_versions_of",
    "parse_record",
    "tenant_prefix",
    "tenant_thread_prefix",
]
