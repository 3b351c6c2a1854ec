"""`KeyRotationCipher`: a keyring of AES-256-GCM keys with staged rotation, and its file.

The stages and the keyring file's fields are in docs/rotation.md. A retired
key still resolves by key id but refuses to decrypt, so a missed row is
named instead of silently read.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Final

from secure_serde._errors import ConfigurationError, RetiredKeyError
from secure_serde._scrub import scrubbed
from secure_serde.ciphers._aesgcm import AesGcmCipher
from secure_serde.ciphers._keyring import Keyring
from secure_serde.ciphers._legacy import LEGACY_CIPHER_NAME, LegacyAesReader
from secure_serde.crypto import (
    ENV_VAR,
    MODE_EAX,
    MODE_GCM,
    Buffer,
    Key,
    could_be_key,
    key_name,
    parse_key,
    shown_label,
)

KEYRING_FILE_VAR: Final = "SECURE_SERDE_KEYRING_FILE"
# Set to "no" to accept a keyring file that group or others may access, as
# sshd's StrictModes=no does; the default refuses it.
KEYRING_STRICT_MODES_VAR: Final = "SECURE_SERDE_KEYRING_STRICT_MODES"
_STRICT_MODES_OFF: Final = frozenset({"no", "0", "false", "off"})
# Largest keyring file read: a few hundred keys fit in far less.
MAX_FILE_BYTES: Final = 1 << 20
# The label `from_env` gives the key in LANGGRAPH_AES_KEY. Labels are for
# people; the header carries the key's derived key id, so renaming is harmless.
ENV_LABEL: Final = "env"
_FILE_FIELDS: Final = frozenset({"primary", "keys", "retired", "legacy_key", "legacy_mode"})
_LEGACY_MODES: Final = {"eax": MODE_EAX, "gcm": MODE_GCM}

_log = logging.getLogger("secure_serde")


class KeyRotationCipher(AesGcmCipher):
    """Encrypt under the primary key; decrypt with the key whose key id the header names.

    Args:
        keys: label (a name of your choice, such as ``"2025-06"``) to key,
            in any form `secure_serde` accepts (16/24/32 bytes, raw text,
            ``base64:``).
        primary: the label of the key that encrypts.
        retired: labels of keys whose rows must no longer be read; those
            rows raise `RetiredKeyError` naming the key id and label.
        legacy_key: the label of the key that langgraph's built-in cipher
            used, to keep reading its ``+aes`` rows (EAX, or ``legacy_mode``)
            until the store is rewrapped. Those rows carry no key id, so
            exactly one key may be named here. Retiring that key makes them
            raise `RetiredKeyError` too.
    """

    __slots__ = ("_labels", "_legacy_retired")

    # `scrubbed` here and below: every error while the keys are locals
    # leaves with its frames' locals cleared (see secure_serde._scrub).
    @scrubbed
    def __init__(
        self,
        keys: Mapping[str, str | bytes],
        primary: str,
        *,
        retired: Collection[str] = (),
        legacy_key: str | None = None,
        legacy_mode: int = MODE_EAX,
    ) -> None:
        if isinstance(retired, str):
            raise ConfigurationError("retired must be a collection of labels, not one string")
        # Read once: an iterator would be used up by the first membership test.
        retired = tuple(retired)
        if not keys:
            raise ConfigurationError("the keyring is empty")
        # Messages show labels through `shown_label`: a key pasted where a label
        # belongs (``primary``, ``retired``, ``legacy_key``) is never echoed.
        for label in keys:
            if not isinstance(label, str) or not label:
                raise ConfigurationError(
                    f"labels must be non-empty strings, got {shown_label(label)}"
                )
            if could_be_key(label):
                raise ConfigurationError(
                    "a label has the shape of a key (16, 24 or 32 bytes, or 'base64:...'),"
                    " so it is not shown and not accepted: labels are printed in reprs and"
                    " messages. Use a short label such as '2025-06'"
                )
        for name, argument in ((primary, "primary"), (legacy_key, "legacy_key")):
            if name is not None and (not isinstance(name, str) or name not in keys):
                raise ConfigurationError(
                    f"{argument} {shown_label(name)} is not in keys (labels: {_shown(keys)})"
                )
        unknown = [i for i in retired if not isinstance(i, str) or i not in keys]
        if unknown:
            shown = ", ".join(shown_label(i) for i in unknown)
            raise ConfigurationError(
                f"retired labels {shown} are not in keys (labels: {_shown(keys)})"
            )
        if primary in retired:
            raise ConfigurationError(f"the primary key {shown_label(primary)} cannot be retired")
        derived = {
            label: Key.derive(parse_key(value, source=f"key {label!r}"), label=label)
            for label, value in keys.items()
        }
        super().__init__(
            Keyring(
                [derived[i] for i in keys if i not in retired],
                derived[primary],
                retired=[derived[i] for i in retired],
            ),
            None
            if legacy_key is None
            else LegacyAesReader(parse_key(keys[legacy_key]), legacy_mode),
        )
        self._labels = {key.key_id_hex: label for label, key in derived.items()}
        # Kept as a name, not dropped: a legacy row under a retired key then
        # fails with the key's key id instead of "unknown cipher 'aes'".
        self._legacy_retired = (
            None if legacy_key is None or legacy_key not in retired else derived[legacy_key]
        )

    @classmethod
    @scrubbed
    def from_env(cls) -> KeyRotationCipher:
        """Build the keyring from the environment; docs/rotation.md has the file's fields.

        ``LANGGRAPH_AES_KEY``, when set, is the key labelled ``env``: the
        primary unless the keyring file (``SECURE_SERDE_KEYRING_FILE``) names
        another, and the key legacy ``+aes`` rows are read with unless the
        file says otherwise (as the drop-in does).
        """
        keys: dict[str, str | bytes] = {}
        env_value = os.environ.get(ENV_VAR)
        if env_value is not None:
            keys[ENV_LABEL] = parse_key(env_value, source=ENV_VAR)
        path = os.environ.get(KEYRING_FILE_VAR)
        config = read_keyring_file(Path(path))[0] if path else {}
        for label, value in config.get("keys", {}).items():
            if label in keys:
                raise ConfigurationError(
                    f"label {label!r} is reserved for {ENV_VAR}; rename it in the file"
                )
            keys[label] = value
        env = ENV_LABEL if env_value is not None else None
        primary = config.get("primary", env)
        if primary is None:
            raise ConfigurationError(
                f"no primary key: set {ENV_VAR} or name a primary in {KEYRING_FILE_VAR}"
            )
        return cls(
            keys,
            primary,
            retired=tuple(config.get("retired", ())),
            legacy_key=config.get("legacy_key", env),
            legacy_mode=_LEGACY_MODES[config.get("legacy_mode", "eax")],
        )

    @property
    def primary_key_id(self) -> str:
        """The primary key's key id, in hex."""
        return self._keyring.primary.key_id_hex

    @property
    def primary_label(self) -> str:
        """The primary key's label, as configured (``primary=``)."""
        return self._labels[self.primary_key_id]

    @property
    def labels(self) -> tuple[str, ...]:
        """Every configured label, retired ones included, in configuration order."""
        return tuple(self._labels.values())

    def label_for(self, key_id: str) -> str | None:
        """The label of the key whose key id (hex, as in a header) is ``key_id``, if any."""
        return self._labels.get(key_id)

    def _open_legacy(self, reader: LegacyAesReader, ciphertext: Buffer) -> bytes:
        if self._legacy_retired is not None:
            key = self._legacy_retired
            raise RetiredKeyError(
                f"{key_name(key.key_id_hex, key.label)}, which reads legacy"
                f" {LEGACY_CIPHER_NAME!r} rows, is retired",
                key_id=key.key_id_hex,
            )
        return reader.open(ciphertext)

    def __repr__(self) -> str:
        return (
            f"<KeyRotationCipher primary={self.primary_label!r}"
            f" (key id {self.primary_key_id}) labels={sorted(self._labels.values())}>"
        )


def _shown(keys: Mapping[str, object]) -> str:
    return ", ".join(shown_label(i) for i in keys) or "none"


def open_to(mode: int) -> str:
    """Who besides its owner ``mode`` lets in ("group and others"); "" off POSIX (ACLs rule)."""
    bits = (("group", 0o070), ("others", 0o007))
    return " and ".join(n for n, b in bits if mode & b) if os.name == "posix" else ""


def read_file(path: Path) -> tuple[bytes, int]:
    """The bytes (up to `MAX_FILE_BYTES` + 1) and mode of the regular file ``path`` (one open)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise IsADirectoryError(21, "not a regular file")
        return file.read(MAX_FILE_BYTES + 1), stat.S_IMODE(info.st_mode)


@scrubbed
def read_keyring_file(path: Path, *, private: bool = True) -> tuple[dict[str, Any], int]:
    """A keyring file's object, each field checked, and the file's mode.

    With ``private``, a file that group or others may read or write is
    refused, as ssh refuses such a private key, unless
    ``SECURE_SERDE_KEYRING_STRICT_MODES=no``.
    """
    # Raised after the ``except`` block, as in `keyring_json`.
    problem = None
    data, mode = b"", 0
    try:
        data, mode = read_file(path)
    except OSError as exc:
        hint = (
            " ('secure-serde keyring new' makes one)" if isinstance(exc, FileNotFoundError) else ""
        )
        problem = f"cannot read keyring file {path}: {exc.strerror}{hint}"
    if problem is not None:
        raise ConfigurationError(problem)
    if len(data) > MAX_FILE_BYTES:
        raise ConfigurationError(f"keyring file {path} is larger than {MAX_FILE_BYTES} bytes")
    who = open_to(mode) if private else ""
    if who and os.environ.get(KEYRING_STRICT_MODES_VAR, "").strip().lower() in _STRICT_MODES_OFF:
        _log.warning(
            "keyring file %s is open to %s (mode %04o), accepted because %s is off",
            path,
            who,
            mode,
            KEYRING_STRICT_MODES_VAR,
        )
    elif who:
        raise ConfigurationError(
            f"keyring file {path} is open to {who} (mode {mode:04o}): it holds keys,"
            f" so it must be private to its owner. Run `chmod 600 {path}`, or set"
            f" {KEYRING_STRICT_MODES_VAR}=no to accept it"
        )
    return check_keyring_fields(keyring_json(data, path), path), mode


def keyring_json(data: bytes, path: Path) -> Any:
    """The JSON value of a keyring file's bytes."""
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):  # RecursionError: nested past the interpreter's stack
        problem = f"keyring file {path} is not valid JSON (or not UTF-8, or nested too deeply)"
    # Outside the handler: even with ``from None`` the decoder's error would stay reachable
    # as ``__context__``, and its ``doc``/``object`` is the file's text, keys included.
    raise ConfigurationError(problem)


def check_keyring_fields(config: object, path: Path) -> dict[str, Any]:
    """``config``, a keyring file's JSON value, once each field's type is checked.

    Unknown fields are counted, never named: a key pasted as a field name is not printed.
    """
    if not isinstance(config, dict):
        raise ConfigurationError(f"keyring file {path} must hold a JSON object with 'keys'")
    unknown = set(config) - _FILE_FIELDS
    if unknown:
        raise ConfigurationError(
            f"keyring file {path} has unknown fields ({len(unknown)}); known:"
            f" {sorted(_FILE_FIELDS)}"
        )
    keys = config.get("keys", {})
    if not isinstance(keys, dict) or not all(isinstance(v, str) for v in keys.values()):
        raise ConfigurationError(f"'keys' in keyring file {path} must map labels to key strings")
    if not isinstance(config.get("primary", ""), str):
        raise ConfigurationError(f"'primary' in keyring file {path} must be a label")
    retired = config.get("retired", [])
    if not isinstance(retired, list) or not all(isinstance(i, str) for i in retired):
        raise ConfigurationError(f"'retired' in keyring file {path} must be a list of labels")
    legacy_key = config.get("legacy_key")
    if legacy_key is not None and not isinstance(legacy_key, str):
        raise ConfigurationError(f"'legacy_key' in keyring file {path} must be a label or null")
    legacy_mode = config.get("legacy_mode", "eax")
    if not isinstance(legacy_mode, str) or legacy_mode not in _LEGACY_MODES:
        raise ConfigurationError(
            f"'legacy_mode' in keyring file {path} must be one of {sorted(_LEGACY_MODES)}"
        )
    return config
