"""`SealedSaver`: one sealed checkpointer around any LangGraph saver, on its public API.

Besides the user API (`SealedSaver`, `SealedStore`, `TenantKeys`, the audits),
``__all__`` holds what the folders above build on, so that none reaches into a
module here: the cell layout (as ``cell_layout``), the store identity, blind
indexes and tenant row prefixes for ``passes``; ``PruningSealedSaver`` for
``savers.postgres``.
"""

# Registers the per-tenant routing saver with SealedSaver (it subclasses SealedSaver).
import secure_serde.sealing._tenant_saver  # noqa: F401
from secure_serde.sealing import _cell as cell_layout
from secure_serde.sealing._audit import (
    AuditFinding,
    SealedAuditReport,
    ShreddedRow,
    StoreAuditReport,
    StoreItemFinding,
    audit_sealed,
    audit_store_items,
)
from secure_serde.sealing._identity import IDENTITY_THREAD, StoreIdentity, parse_record
from secure_serde.sealing._index import BlindIndex
from secure_serde.sealing._record import new_versions_of
from secure_serde.sealing._reindex import ReindexReport
from secure_serde.sealing._saver import DEFAULT_INDEXED_METADATA, PruningSealedSaver, SealedSaver
from secure_serde.sealing._store import SealedStore
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
