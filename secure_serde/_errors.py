"""The one exception tree of secure_serde.

Callers that only want to know "could this row be read?" catch
`DecryptionError`; every refusal on the read path derives from it, so a
single ``except`` covers tampering, truncation, unknown keys and refused
plaintext alike. Messages name key ids, labels and cipher names, never key
bytes or plaintext (docs/keys.md, "Glossary").
"""

from __future__ import annotations

from typing import Any


class SecureSerdeError(Exception):
    """Root of every error raised by secure_serde."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Several subclasses take keyword-only fields (key_id, cipher_name);
        # rebuilding from args and __dict__ lets every error cross a process
        # boundary (multiprocessing, concurrent.futures) intact.
        return (_restore, (type(self), self.args, dict(self.__dict__)))


def _restore(cls: type[SecureSerdeError], args: tuple[Any, ...], state: dict[str, Any]) -> Any:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class ConfigurationError(SecureSerdeError, ValueError):
    """Bad arguments, raised when a key, cipher or serializer is built, never at first write."""


class EncryptionError(SecureSerdeError):
    """A value could not be encrypted; nothing was written."""


class UnserializableValueError(EncryptionError, TypeError):
    """A value holds a type the serializer cannot encode (a numpy scalar, say); nothing was written.

    Also a ``TypeError``, which langgraph's own serializer raises for the same value.
    """


class DecryptionError(SecureSerdeError):
    """A stored value could not be authenticated or decrypted.

    Messages name the structural check that failed (a short blob, an unknown
    version) but never why authentication failed: every bad tag reads
    "ciphertext failed authentication", so a message is no oracle.
    """


class BindingError(DecryptionError):
    """A value or checkpoint record does not open at the location it was read from.

    Moved, copied, swapped, re-pointed, re-parented or tampered with:
    authentication cannot tell these apart, so one error covers them all.
    """


class UnboundValueError(BindingError):
    """An unbound value (encrypted with the empty location) where a location is expected.

    Written by a stock saver or an older secure_serde; readable only under
    ``Migration(unbound=True)``, and ``secure-serde adopt`` copies such rows
    into a sealed store.
    """


class HistoryError(BindingError):
    """A checkpoint's history does not reach a root record.

    A parent pointer was cut, an ancestor was deleted, or a record claims a
    parent that is not there. A shorter history would rebuild wrong state
    (a DeltaChannel replays every write back to its seed), so none is read.
    """


class StoreIdentityError(BindingError):
    """A checkpoint store's identity is missing, forged, or not this store's.

    A store that holds cells but no identity is refused rather than given a
    new one: a new identity would make rows copied from elsewhere open here.
    """


class PlaintextRefusedError(DecryptionError):
    """A row carries no cipher suffix and plaintext reads are not enabled."""


class UnknownCipherError(DecryptionError):
    """The cipher name in a row's type tag is not configured here."""

    def __init__(self, message: str, *, cipher_name: str) -> None:
        super().__init__(message)
        self.cipher_name = cipher_name


class UnknownKeyError(DecryptionError):
    """The key id in a ciphertext header is not in the configured keys.

    ``key_id`` is that header's key id in hex (for ``kms`` values, the KMS
    key's CMK id), never a label or a KMS key name.
    """

    def __init__(self, message: str, *, key_id: str) -> None:
        super().__init__(message)
        self.key_id = key_id


class RetiredKeyError(UnknownKeyError):
    """The key id is known but retired: it may no longer decrypt. The message adds its label."""


class DecompressionError(DecryptionError):
    """A compressed value is corrupt or truncated, or needs a codec that is not installed."""


class DecompressionBombError(DecompressionError):
    """A compressed value would decompress past the configured ``max_size``; refused before."""

    def __init__(self, message: str, *, max_size: int) -> None:
        super().__init__(message)
        self.max_size = max_size


class PickleRefusedError(DecryptionError):
    """A ``pickle`` row whose type tag is not authenticated was refused.

    Anyone with write access to the store could have relabelled it, and
    unpickling runs its code.
    """


class StrictDecodeError(DecryptionError):
    """A value whose type tag nothing authenticates was refused by the strict decoder.

    Raised instead of importing, calling or returning raw what such a value
    names. ``type_name`` is the ``module.name`` it asked for, if any (never a value).
    """

    def __init__(self, message: str, *, type_name: str | None = None) -> None:
        super().__init__(message)
        self.type_name = type_name


class MetadataDowngradeError(DecryptionError):
    """Plaintext metadata that does not match what the saver sealed.

    Such a value is not authenticated; 0.3's stores are read despite it only
    under ``Migration(unsealed_metadata=True)``. ``keys`` names the keys (never values).
    """

    def __init__(self, message: str, *, keys: tuple[str, ...]) -> None:
        super().__init__(message)
        self.keys = keys


class BlindIndexError(DecryptionError):
    """A stored blind-index token does not match the authenticated value it claims to index.

    A planted token would make a filter return rows it does not match.
    ``key`` names the metadata key (never a value or a token).
    """

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class MetadataMovedError(DecryptionError):
    """0.3's metadata envelope of a checkpoint names another one (thread, namespace or id)."""


class UnsafePickleError(DecryptionError):
    """A pickle embedded in a stored value was refused before any of it ran.

    Nothing is returned in place of the value: a partial value would flow on
    as if it were the stored one.
    """


class ForbiddenGlobalError(UnsafePickleError):
    """An embedded pickle names a global (``module``, ``name``) that is not admitted."""

    def __init__(self, message: str, *, module: str, name: str) -> None:
        super().__init__(message)
        self.module = module
        self.name = name


class PickleNotAllowedError(SecureSerdeError, TypeError):
    """A value msgpack cannot encode would have to be pickled, and its type is not allowed.

    ``type_name`` names the type (or the global its pickle needs); the
    message says how to allow it. Nothing was written.
    """

    def __init__(self, message: str, *, type_name: str) -> None:
        super().__init__(message)
        self.type_name = type_name


class KmsError(SecureSerdeError):
    """AWS KMS refused a call, or could not be reached after botocore's retries.

    ``operation`` is the KMS API name (``GenerateDataKey``, ``Decrypt``,
    ``DescribeKey``), ``key_arn`` the key it was called for, ``error_code``
    KMS's error code or botocore's exception name.
    """

    def __init__(self, message: str, *, operation: str, key_arn: str, error_code: str) -> None:
        super().__init__(message)
        self.operation = operation
        self.key_arn = key_arn
        self.error_code = error_code


class KmsEncryptionError(KmsError, EncryptionError):
    """No data key could be had from KMS for a write; nothing was written."""


class KmsDecryptionError(KmsError, DecryptionError):
    """KMS did not unwrap a stored data key: unreachable, refused, or wrong context."""


class SecretPicklingError(SecureSerdeError, TypeError):
    """An object holding key material refused to be pickled or copied."""


class KeyringFileError(ConfigurationError):
    """A keyring file cannot be edited or shown safely, so nothing was changed or printed.

    An edit that might miss the file (a dangling link, a second hard link
    that would keep the old keys) or a reveal of a file others may read would
    leave keys where the operator does not expect them. ``path`` is as given.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class TenantRequiredError(ConfigurationError):
    """A call to a tenant-keyed saver names no tenant, or another tenant than its scope.

    Calls that carry no config (``delete_thread``, ``prune``...) are made on
    ``saver.for_tenant(tenant_id)``: guessing a tenant could cross tenants.
    """


class ShreddedError(SecureSerdeError):
    """The key of a tenant (or of one of its threads) was shredded: its rows are gone for good.

    Not a `DecryptionError`: nothing was tampered with, the data was erased
    on purpose (``TenantKeys.shred``, ``secure-serde tenants shred``).
    ``tenant_id`` and ``thread_id`` (``None`` for a whole tenant) name what
    was shredded, ``shredded_at`` when (ISO 8601).
    """

    def __init__(
        self, message: str, *, tenant_id: str, thread_id: str | None, shredded_at: str
    ) -> None:
        super().__init__(message)
        self.tenant_id = tenant_id
        self.thread_id = thread_id
        self.shredded_at = shredded_at


class UnknownTenantError(SecureSerdeError, LookupError):
    """The tenant key store holds no key for this tenant (or thread).

    Also when a stored row needs a key the key store does not hold (one
    restored from a backup older than the row).
    """


class UnreadableRowError(DecryptionError):
    """The inner saver could not read a stored row, so nothing of it was checked or returned.

    A hostile or damaged cell can make the inner saver's own decoding fail
    before `SealedSaver` sees the row. The message names the inner saver and
    the error class only: the driver's error may quote the cell.
    """
