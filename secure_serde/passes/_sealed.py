"""Rotation of a store `secure_serde.SealedSaver` sealed: each cell re-encrypted where it lies.

The rows come from secure_serde/stores/_sealed.py; the cells inside them are
laid out by secure_serde/sealing/_cell.py. Each cell is re-encrypted as
_plan.py says, at the location `SealedSaver` seals it for, as `Sealer.rebind` does.

====================  ===========================================================
cell                  location (``.in_store(store id)`` unless noted)
====================  ===========================================================
channel value         ``Location.blob(thread, ns, channel, version)``: the row key
                      (PostgreSQL), or the channel's entry in the checkpoint's own
                      ``channel_versions`` (SQLite, where the values are cells
                      inside the checkpoint's msgpack)
pending write         ``Location.write(thread, ns, checkpoint id, task id, task
                      path, idx, channel)``, task path and idx read from the cell
checkpoint record     ``Location.checkpoint(thread, ns, checkpoint id, None, b"")``
store identity        ``Location.identity(IDENTITY_THREAD)``, without a store id
====================  ===========================================================

The store id comes from the store identity, opened first (`identify`);
a store whose identity does not open is refused as a whole.

On SQLite the stock saver keeps the whole checkpoint as one msgpack value
that nothing authenticates: it is decoded by the strict decoder (data
types only), its value cells re-encrypted, and it is encoded again as the
stock saver encodes it (``JsonPlusSerializer().dumps_typed``). Only the
cells change.

A sealed store has no "not migrated yet": a row that should hold a cell
and does not (plaintext, a cell of another kind, an unencrypted tag, a
missing record) is a failure, listed and left as it is, and so is a cell
that does not authenticate at its location. A row is rewritten whole or not
at all, so a SQLite checkpoint with one bad value keeps all its values.
Counts are per row: a SQLite checkpoint row counts once, whatever number
of value cells it holds.

**Tenant rows** (``sst1:<token>:<thread>``, secure_serde/sealing/_tenant_saver.py)
are under their tenant's thread keys, which rotate with ``TenantKeys.rewrap``:
how they are skipped (``tenant-keyed``, ``shredded``) or rewrapped, with and
without the tenant key store, is docs/tenants.md, "How audit and rewrap tell
a tenant row". The store identity and every other row are rewrapped as above.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, Final, cast

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde._engine import CURRENT, EMPTY, Planned, Skip, Unreadable
from secure_serde._errors import (
    BindingError,
    ConfigurationError,
    DecryptionError,
    SecureSerdeError,
    StoreIdentityError,
    UnknownTenantError,
)
from secure_serde.ciphers import SealingCipher, TagAuthenticatingCipher, is_sealing
from secure_serde.crypto import Location
from secure_serde.passes._plan import _source, primary_test
from secure_serde.sealing import (
    IDENTITY_THREAD,
    BlindIndex,
    ShreddedScopes,
    TenantKeys,
    parse_record,
    tenant_prefix,
    tenant_thread_prefix,
)
from secure_serde.sealing import cell_layout as _cell
from secure_serde.serde import EncryptedSerializer, Migration, ReadRule, StrictDecoder
from secure_serde.stores import IDENTITY_KEY, RECORDS, SEALED_RECORD_KEY, Cell, SealedRow, Swap

__all__ = ["SHREDDED", "TENANT_KEYED", "SealedPlanner"]

TENANT_KEYED: Final = Skip("tenant-keyed")
SHREDDED: Final = Skip("shredded")

_BYTES: Final = "bytes"
_MSGPACK: Final = "msgpack"
_EMPTY: Final = "empty"
_IDENTITY_AT: Final = Location.identity(IDENTITY_THREAD)
_NOT_A_CELL: Final = "this store is sealed: a row without a sealed cell is refused, never sealed"


class _Refused(Exception):
    """One row's refusal, carried out of the nested steps as an `Unreadable`."""

    def __init__(self, outcome: Unreadable) -> None:
        super().__init__(outcome.reason)
        self.outcome = outcome


def _refuse(error: type[SecureSerdeError], text: str) -> _Refused:
    return _Refused(Unreadable.of(error, text))


class SealedPlanner:
    """Turns the rows of a sealed store into swaps under the primary cipher.

    Same contract as `secure_serde.passes.Planner.plan` (the batch loop,
    the workers and the report are shared); `identify` must run first.
    """

    # The store identity: where it is sealed, its row's type tag (None: any), what it is called.
    _identity_at: Location = _IDENTITY_AT
    _identity_tag: str | None = IDENTITY_KEY
    _identity_name = "this store identity"
    _no_identity = (
        "this store has no readable store identity: it cannot be rewrapped"
        f" (restore the thread {IDENTITY_THREAD!r} from a backup)"
    )

    def __init__(
        self,
        cipher: TagAuthenticatingCipher,
        decrypt_only: Iterable[TagAuthenticatingCipher] = (),
        *,
        seal: bool = True,
        verify: bool = False,
    ) -> None:
        if not is_sealing(cipher):
            raise ConfigurationError(
                f"the primary cipher {type(cipher).__name__} cannot bind values to their place:"
                " a store SealedSaver sealed can only be rewrapped under a cipher that can"
            )
        decrypt_only = tuple(decrypt_only)
        self._rule = ReadRule((cipher, *decrypt_only), Migration.NONE)
        self._serde = EncryptedSerializer(cipher, decrypt_only=decrypt_only)
        self._cipher = cast(SealingCipher, cipher)
        self._is_current, self.primary = primary_test(cipher)
        self._seal = seal
        self._verify = verify
        self._strict = StrictDecoder()
        self._encoder = JsonPlusSerializer()
        self._store: bytes | None = None
        self._index: BlindIndex | None = None
        self._tenants: dict[str, str] | None = None
        self._shredded = ShreddedScopes(frozenset(), frozenset())

    def identify(self, identity: Cell | None) -> None:
        """Open the store identity (its row, as the store reads it): the store id every cell names.

        Raises:
            StoreIdentityError: no identity, or one that does not open under these keys.
        """
        tag = self._identity_tag
        if identity is None or identity.data is None or tag not in (None, identity.type_tag):
            raise StoreIdentityError(self._no_identity)
        failed = False
        try:
            cell = _cell.from_text(identity.data.decode("utf-8"), _cell.IDENTITY)
            at = self._identity_at
            record = self._serde.loads_typed_at((cell.type_tag, cell.ciphertext), at)
        except (SecureSerdeError, UnicodeDecodeError):
            failed = True
        if failed:
            # Raised outside the handler: nothing of the record rides along as context.
            raise StoreIdentityError(
                f"{self._identity_name} does not open under the given keys: it was"
                " forged, or the store is sealed under other keys"
            )
        parsed = parse_record(record)
        self._store, self._index = parsed.store_id, parsed.index

    def use_tenant_keys(self, tenant_keys: TenantKeys) -> None:
        """Map each tenant of the key store to its rows' thread-id prefix; read its tombstones.

        Runs after `identify` (the prefixes are keyed by the identity's index key).
        The key store itself is not kept: the planner holds ids and prefixes only.
        """
        if not isinstance(tenant_keys, TenantKeys):
            raise ConfigurationError(
                f"tenant_keys= takes a TenantKeys, not {type(tenant_keys).__name__}"
            )
        index = self._index
        if index is None:
            raise ConfigurationError("SealedPlanner.identify must run before use_tenant_keys")
        self._tenants = {tenant_prefix(index, t): t for t in tenant_keys.tenant_ids()}
        self._shredded = tenant_keys.shredded_scopes()

    def plan(self, cell: Cell) -> Skip | Unreadable | Planned:
        thread = cell.ref.thread_id
        prefix = tenant_thread_prefix(thread)
        if prefix is not None and self._tenants is not None:
            tenant = self._tenants.get(prefix)
            if tenant is not None:
                if self._shredded.covers(tenant, thread[len(prefix) :]):
                    return SHREDDED
                return TENANT_KEYED
        try:
            outcome = self._plan(cell)
        except _Refused as refused:
            outcome = refused.outcome
        if prefix is None or not isinstance(outcome, Unreadable):
            return outcome
        if self._tenants is None:
            return TENANT_KEYED
        return Unreadable.of(
            UnknownTenantError,
            "the row is under a tenant's thread id, the tenant key store holds no tenant for it,"
            " and it does not open under the store keys: planted, or another key store's",
        )

    def _plan(self, cell: Cell) -> Skip | Unreadable | Planned:
        table = cell.ref.table
        if table == RECORDS:
            return self._plan_record(cell)
        if table == "checkpoint_blobs" and cell.type_tag == _EMPTY and cell.data is None:
            return EMPTY
        if cell.data is None:
            raise _refuse(BindingError, f"the row holds no value: {_NOT_A_CELL}")
        if table == "checkpoints":
            return self._plan_checkpoint(cell, cell.data)
        if cell.type_tag != _BYTES:
            raise _refuse(
                BindingError,
                f"the row is stored as {cell.type_tag!r}, not as a cell: {_NOT_A_CELL}",
            )
        ref = cell.ref
        if table == "checkpoint_blobs":
            at = Location.blob(
                ref.thread_id, ref.checkpoint_ns, str(ref.get("channel")), ref.get("version")
            )
            new, source = self._rekey(cell.data, _cell.VALUE, self._in_store(at))
        elif table in ("writes", "checkpoint_writes"):
            new, source = self._rekey_write(cell)
        else:
            raise _refuse(BindingError, f"a sealed store has no table {table!r}")
        return self._planned(cell, _BYTES, new, source)

    def _plan_record(self, cell: Cell) -> Skip | Unreadable | Planned:
        ref = cell.ref
        if cell.data is None:
            raise _refuse(BindingError, f"the checkpoint holds no sealed record: {_NOT_A_CELL}")
        try:
            text = cell.data.decode("utf-8")
        except UnicodeDecodeError:
            raise _refuse(BindingError, "the sealed record is not text") from None
        if cell.type_tag == IDENTITY_KEY:
            kind, at = _cell.IDENTITY, _IDENTITY_AT
        elif cell.type_tag == SEALED_RECORD_KEY:
            checkpoint_id = ref.checkpoint_id
            if checkpoint_id is None:
                raise _refuse(BindingError, "the checkpoint row has no checkpoint id")
            kind = _cell.RECORD
            at = self._in_store(
                Location.checkpoint(ref.thread_id, ref.checkpoint_ns, checkpoint_id, None, b"")
            )
        else:
            raise _refuse(BindingError, f"the row holds no sealed record: {_NOT_A_CELL}")
        return self._rekey_text(cell, text, kind, at, cell.type_tag)

    def _rekey_text(
        self, cell: Cell, text: str, kind: int, at: Location, stored_as: str | None
    ) -> Skip | Planned:
        try:
            raw = _cell.from_text(text, kind)
        except BindingError as exc:
            raise _refuse(type(exc), str(exc)) from None
        new, source = self._rekey(_cell.pack(kind, raw.type_tag, raw.ciphertext), kind, at)
        stored = None if new is None else _cell.to_text(new).encode("ascii")
        return self._planned(cell, stored_as, stored, source)

    def _plan_checkpoint(self, cell: Cell, data: bytes) -> Skip | Unreadable | Planned:
        if cell.type_tag != _MSGPACK:
            raise _refuse(
                BindingError,
                f"the checkpoint is stored as {cell.type_tag!r}, not as the stock saver's msgpack",
            )
        try:
            checkpoint = self._strict.loads_typed((_MSGPACK, data))
        except DecryptionError as exc:
            # Its message may quote names the bytes chose: keep only the class.
            raise _refuse(
                type(exc), "the strict decoder refused the checkpoint (data types only)"
            ) from None
        if not isinstance(checkpoint, dict):
            raise _refuse(BindingError, "the checkpoint is not a mapping")
        values = checkpoint.get("channel_values") or {}
        versions = checkpoint.get("channel_versions") or {}
        if not isinstance(values, dict) or not isinstance(versions, dict):
            raise _refuse(BindingError, "the checkpoint's values or versions are not mappings")
        changed, sources = self._rekey_values(cell, values, versions)
        if not sources:
            return CURRENT
        source = sources.most_common(1)[0][0]
        if not self._seal:
            return Planned(None, source)
        checkpoint["channel_values"] = {**values, **changed}
        type_tag, encoded = self._encoder.dumps_typed(checkpoint)
        if type_tag != _MSGPACK:  # pragma: no cover - a dict of data always encodes as msgpack
            raise _refuse(BindingError, "the checkpoint did not encode as msgpack again")
        return Planned(Swap(cell, _MSGPACK, encoded), source)

    def _rekey_values(
        self, cell: Cell, values: dict[Any, Any], versions: dict[Any, Any]
    ) -> tuple[dict[Any, Any], Counter[str]]:
        ref = cell.ref
        changed: dict[Any, Any] = {}
        sources: Counter[str] = Counter()
        for channel, raw in values.items():
            at = Location.blob(
                ref.thread_id, ref.checkpoint_ns, str(channel), versions.get(channel)
            )
            try:
                new, source = self._rekey(raw, _cell.VALUE, self._in_store(at))
            except _Refused as refused:
                outcome = refused.outcome
                raise _Refused(
                    Unreadable(outcome.error, f"{outcome.reason} (channel {channel!r})")
                ) from None
            if source is not None:
                sources[source] += 1
                changed[channel] = new
        return changed, sources

    def _rekey_write(self, cell: Cell) -> tuple[bytes | None, str | None]:
        ref = cell.ref
        channel = cell.channel if isinstance(cell, SealedRow) else None
        checkpoint_id, task_id = ref.checkpoint_id, ref.get("task_id")
        if channel is None or checkpoint_id is None or task_id is None:
            raise _refuse(BindingError, "the write row lacks its channel, checkpoint or task id")
        try:
            parsed = _cell.unpack(cell.data, _cell.WRITE)
        except BindingError as exc:
            raise _refuse(type(exc), str(exc)) from None
        at = Location.write(
            ref.thread_id,
            ref.checkpoint_ns,
            checkpoint_id,
            str(task_id),
            parsed.task_path,
            parsed.idx,
            channel,
        )
        return self._rekey(cell.data, _cell.WRITE, self._in_store(at))

    def _in_store(self, location: Location) -> Location:
        if self._store is None:
            raise ConfigurationError("SealedPlanner.identify must run before plan")
        return location.in_store(self._store)

    def _rekey(self, raw: object, kind: int, at: Location) -> tuple[bytes | None, str | None]:
        """The cell re-encrypted at ``at``: (new cell, source); (None, None) when current.

        In a dry run the new cell is ``None`` and the source is still given.
        """
        try:
            cell = _cell.unpack(raw, kind)
            route = self._rule.route(cell.type_tag)
        except DecryptionError as exc:  # a BindingError too; both name tags, never data
            raise _refuse(type(exc), str(exc)) from None
        cipher = route.cipher
        if cipher is None or not is_sealing(cipher):
            raise _refuse(
                BindingError, f"a {cell.type_tag!r} cell is not under a cipher that binds its place"
            )
        current = self._is_current(route.cipher_name, cell.ciphertext)
        if current and not self._verify:
            return None, None
        locating = cast(SealingCipher, cipher)
        plaintext = self._open(locating, route.cipher_name, route.inner, cell, at)
        if current:
            return None, None
        source = _source(route.cipher_name, cell.ciphertext)
        if not self._seal:
            return None, source
        name, ciphertext = self._cipher.encrypt_at(plaintext, route.inner, at.encode())
        del plaintext
        tag = f"{route.inner}+{name}"
        if kind == _cell.WRITE:
            return _cell.pack_write(tag, cell.task_path, cell.idx, ciphertext), source
        return _cell.pack(kind, tag, ciphertext), source

    @staticmethod
    def _open(
        cipher: SealingCipher, name: str, inner: str, cell: _cell.Cell, at: Location
    ) -> bytes:
        failed: type[DecryptionError] = DecryptionError
        try:
            return bytes(cipher.decrypt_at(name, cell.ciphertext, inner, at.encode()))
        except DecryptionError as exc:
            failed = type(exc)
        # Raised outside the handler, so no plaintext-adjacent frame rides along.
        raise _refuse(
            failed,
            f"a {cell.type_tag} cell does not authenticate at its {at.kind} place: tampered"
            " with, or moved, copied or swapped from another row or store; left as it is",
        )

    def _planned(
        self, cell: Cell, new_type: str | None, new: bytes | None, source: str | None
    ) -> Skip | Planned:
        if source is None:
            return CURRENT
        if not self._seal or new is None or new_type is None:
            return Planned(None, source)
        return Planned(Swap(cell, new_type, new), source)
