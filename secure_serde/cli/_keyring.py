"""``secure-serde keyring``: the staged rotation runbook as commands on a keyring file.

Tink's order, one command per stage: ``add`` a key (it only decrypts),
deploy the file everywhere, ``promote`` it (it encrypts), rewrap, ``retire``
the old key (its rows are named, not read), then ``drop`` it. Every edit is
validated by building the `KeyRotationCipher` the file describes, and
written atomically at mode 0600 under an exclusive lock, so a crash or a
concurrent edit never leaves a half-written keyring. Keys are never printed
unless ``show --reveal`` asks. An edit follows symbolic links to the regular
file and replaces that file beside itself; what cannot be edited that way is
refused with `KeyringFileError` before anything changes (docs/cli.md,
"secure-serde keyring").
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from secure_serde._errors import ConfigurationError, KeyringFileError
from secure_serde._scrub import scrubbed
from secure_serde.ciphers import (
    EnvKeyCipher,
    KeyRotationCipher,
    check_keyring_fields,
    keyring_json,
)
from secure_serde.cli._args import check_label
from secure_serde.crypto import generate_encoded_key, shown_label

__all__ = ["register"]

_MODE: Final = 0o600
# The label a file may name without holding the key: LANGGRAPH_AES_KEY is the key "env".
_ENV_LABEL: Final = "env"
# The fields a keyring file may hold (as KeyRotationCipher.from_env reads it).
_FIELDS: Final = frozenset({"primary", "keys", "retired", "legacy_key", "legacy_mode"})
# Largest keyring file read: a few hundred keys fit in far less.
_MAX_FILE_BYTES: Final = 1 << 20
_REVEAL: Final[dict[str, Any]] = {"action": "store_true", "help": "also print the keys themselves"}


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "keyring",
        help="create and edit a keyring file: add, promote, retire, drop, show",
        description=(
            "Edit the JSON keyring file that SECURE_SERDE_KEYRING_FILE names, one rotation"
            " stage per command: add (decrypt only) -> deploy -> promote -> secure-serde"
            " rewrap -> retire -> drop. Edits are atomic, the file is kept at mode 0600,"
            " and keys are never printed unless 'show --reveal' asks."
        ),
    )
    actions = parser.add_subparsers(dest="action", required=True)
    new = {"metavar": "LABEL", "required": True, "help": "the new key's label, such as 2025-06"}
    old = {"help": "the key's label"}
    for name, text, argument, spec in (
        ("new", "create a keyring file with one new primary key", "--label", new),
        ("add", "add a new random key that only decrypts", "--label", new),
        ("promote", "make a key the primary: new rows are encrypted under it", "label", old),
        ("retire", "stop a key from decrypting: its rows are refused, naming it", "label", old),
        ("drop", "remove a retired key from the file for good", "label", old),
        ("show", "list the labels, roles and key ids", "--reveal", _REVEAL),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("file", type=Path)
        action.add_argument(argument, **spec)
    parser.set_defaults(func=run)


@scrubbed  # the loaded file holds keys: no error leaves them in a frame local
def run(args: argparse.Namespace) -> int:
    if args.action == "new":
        return _new(args.file, args.label)
    if args.action == "show":
        return _show(args.file, reveal=args.reveal)
    target = edit_target(args.file)
    with _locked(args.file, target):
        # Step 1 of a drop-in deployment's first rotation: no file yet, the key is "env".
        fresh = args.action == "add" and not os.path.lexists(target)
        if not fresh:
            _check_single_name(args.file, target)
        config: dict[str, Any] = {"keys": {}} if fresh else _load(args.file)[0]
        message = _EDITS[args.action](config, args.label)
        _validate(config, args.file)
        _write(args.file, target, config)
    print(message)
    return 0


def _exists(path: Path) -> ConfigurationError:
    return ConfigurationError(f"{path} already exists; use 'keyring add' to extend it")


def _new(path: Path, label: str) -> int:
    check_label(label)
    # An existing file that is no link is refused before edit_target looks at what it is.
    target = path if os.path.lexists(path) and not path.is_symlink() else edit_target(path)
    if os.path.lexists(target):
        raise _exists(path)
    config: dict[str, Any] = {"primary": label, "keys": {label: generate_encoded_key()}}
    _validate(config, path)
    with _locked(path, target):
        _write(path, target, config, exclusive=True)
    print(f"created {path} (mode 0600) with primary key {label!r}")
    print(f"point the application at it: SECURE_SERDE_KEYRING_FILE={path}")
    return 0


def _add(config: dict[str, Any], label: str) -> str:
    check_label(label)
    keys = config.setdefault("keys", {})
    if label in keys or label == _ENV_LABEL:
        raise ConfigurationError(f"label {shown_label(label)} is already taken")
    keys[label] = generate_encoded_key()
    return (
        f"added key {label!r}; it only decrypts. Deploy this file everywhere, then run"
        f" 'secure-serde keyring promote FILE {label}'"
    )


def _promote(config: dict[str, Any], label: str) -> str:
    _require_key(config, label)
    if label in config.get("retired", []):
        raise ConfigurationError(
            f"key {shown_label(label)} is retired; a retired key cannot encrypt"
        )
    old = config.get("primary", _ENV_LABEL)
    config["primary"] = label
    return (
        f"key {label!r} is now the primary (was {old!r}). Deploy, run 'secure-serde rewrap',"
        f" then retire {old!r}"
    )


def _retire(config: dict[str, Any], label: str) -> str:
    _require_key(config, label)
    if config.get("primary", _ENV_LABEL) == label:
        raise ConfigurationError(
            f"key {shown_label(label)} is the primary; promote another key first"
        )
    retired = config.setdefault("retired", [])
    if label not in retired:
        retired.append(label)
    return f"key {label!r} is retired: rows under it are now refused, naming it"


def _drop(config: dict[str, Any], label: str) -> str:
    if label not in config.get("retired", []):
        raise ConfigurationError(
            f"retire key {shown_label(label)} (and audit the store) before dropping it"
        )
    config["retired"].remove(label)
    config.get("keys", {}).pop(label, None)
    if config.get("legacy_key") == label:
        config["legacy_key"] = None
    return f"key {label!r} is gone from the file; rows still under it can never be read"


_EDITS: Final = {"add": _add, "promote": _promote, "retire": _retire, "drop": _drop}


def _require_key(config: dict[str, Any], label: str) -> None:
    if label not in config.get("keys", {}) and label != _ENV_LABEL:
        raise ConfigurationError(f"no key labelled {shown_label(label)} in the file")


@scrubbed
def _show(path: Path, *, reveal: bool) -> int:
    config, mode = _load(path)
    if reveal and os.name == "posix" and mode & 0o077:
        who = " and ".join(n for n, bits in (("group", 0o070), ("others", 0o007)) if mode & bits)
        raise KeyringFileError(
            f"keyring file {path} is open to {who} (mode {mode:04o}), so its keys are not"
            f" printed: a key file must be private to its owner, as ssh requires. Run"
            f" `chmod 600 {path}`, then show --reveal again",
            path=str(path),
        )
    _validate(config, path)
    keys: dict[str, str] = config.get("keys", {})
    primary, retired = config.get("primary", _ENV_LABEL), config.get("retired", [])
    print(f"{path}:")
    for label in sorted(keys):
        role = "primary" if label == primary else "retired" if label in retired else "decrypt only"
        key_id = EnvKeyCipher(keys[label], legacy_mode=None).key_id
        line = f"  {label:<20} {role:<13} key id {key_id}"
        print(f"{line}  {keys[label]}" if reveal else line)
    if config.get("legacy_key"):
        print(f"  legacy '+aes' rows are read with key {config['legacy_key']!r}")
    return 0


def edit_target(path: Path) -> Path:
    """The file an edit of ``path`` replaces: ``path``, or the regular file its links lead to.

    Raises `KeyringFileError` for a link that dangles or loops, and for a
    target that exists but is not a regular file. A path that does not
    exist (and is no link) is returned as it is, for ``new`` and a first
    ``add`` to create.
    """
    target = path
    if path.is_symlink():
        try:
            target = Path(os.path.realpath(path, strict=True))
        except OSError as exc:
            problem = exc.strerror or "it cannot be followed"
        else:
            problem = ""
        if problem:
            raise KeyringFileError(
                f"keyring file {path} is a symbolic link that cannot be followed to a file"
                f" ({problem}): an edit changes the file a link points to, so create the"
                " keyring there, or point the link at it",
                path=str(path),
            )
    try:
        info = os.stat(target)
    except FileNotFoundError:
        return target
    except OSError as exc:
        raise KeyringFileError(
            f"cannot read keyring file {path}: {exc.strerror}", path=str(path)
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise KeyringFileError(
            f"keyring file {path} is not a regular file, so it cannot be edited", path=str(path)
        )
    return target


def _check_single_name(path: Path, target: Path) -> None:
    """Refuse a file with a second hard link: the rename would leave its old keys there."""
    try:
        links = os.stat(target).st_nlink
    except OSError:
        return  # _load reports it
    if links > 1:
        raise KeyringFileError(
            f"keyring file {path} has {links} hard links: an edit replaces one name, and the"
            " others would keep the old keys (a dropped key would live on). Remove the other"
            " links, or copy the file, then edit it",
            path=str(path),
        )


def _read(path: Path) -> tuple[bytes, int]:
    """The bytes and mode of the file ``path`` names (through links), from one open file."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise IsADirectoryError(21, "not a regular file")
        data = file.read(_MAX_FILE_BYTES + 1)
    return data, stat.S_IMODE(info.st_mode)


def _load(path: Path) -> tuple[dict[str, Any], int]:
    """The keyring file's JSON object, checked field by field, and the file's mode."""
    # Raised outside the handlers so that no __context__ keeps the file's text.
    problem = None
    data, mode = b"", 0
    try:
        data, mode = _read(path)
    except FileNotFoundError:
        problem = f"no keyring file at {path}; create one with 'secure-serde keyring new'"
    except OSError as exc:
        problem = f"cannot read keyring file {path}: {exc.strerror}"
    if problem is not None:
        raise ConfigurationError(problem)
    if len(data) > _MAX_FILE_BYTES:
        raise ConfigurationError(f"keyring file {path} is larger than {_MAX_FILE_BYTES} bytes")
    config = keyring_json(data, path)
    _check_fields(config, path)
    return config, mode


def _check_fields(config: object, path: Path) -> None:
    """The shape `KeyRotationCipher.from_env` requires, checked before any field is used."""
    if not isinstance(config, dict):
        raise ConfigurationError(f"keyring file {path} must hold a JSON object with 'keys'")
    unknown = sorted(str(name) for name in set(config) - _FIELDS)
    if unknown:
        raise ConfigurationError(
            f"keyring file {path} has {len(unknown)} unknown field(s); known: {sorted(_FIELDS)}"
        )
    check_keyring_fields(config, path)


@scrubbed
def _validate(config: dict[str, Any], path: Path) -> KeyRotationCipher:
    """The cipher the file describes; refuses an edit that would not load."""
    _check_fields(config, path)
    keys = dict(config.get("keys", {}))
    # As KeyRotationCipher.from_env: without a primary, LANGGRAPH_AES_KEY ("env") is it.
    primary = config.get("primary", _ENV_LABEL)
    if _ENV_LABEL in {primary, config.get("legacy_key"), *config.get("retired", [])}:
        # Stands in for LANGGRAPH_AES_KEY, which the application supplies.
        keys.setdefault(_ENV_LABEL, generate_encoded_key())
    legacy = config.get("legacy_key")
    return KeyRotationCipher(
        keys,
        primary,
        retired=tuple(config.get("retired", ())),
        legacy_key=legacy if isinstance(legacy, str) else None,
    )


@contextlib.contextmanager
def _locked(path: Path, target: Path) -> Iterator[None]:
    """An exclusive lock on a sidecar file beside the target, so two editors never interleave.

    Beside the target, not the link: editors that reach one file through
    different links take the same lock.
    """
    lock_path = target.with_name(f".{target.name}.lock")
    try:
        fd = os.open(lock_path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), _MODE)
    except OSError as exc:
        raise _unwritable(path, target, exc) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _unwritable(path: Path, target: Path, exc: OSError) -> KeyringFileError:
    where = f"{target.parent}" + (f" (where the link {path} leads)" if target != path else "")
    return KeyringFileError(
        f"cannot edit keyring file {path}: an edit writes a new file in {where} and renames"
        f" it over the old one, and that folder refused ({exc.strerror}). Edit the keyring"
        " where it is writable, then deploy it",
        path=str(path),
    )


def _write(path: Path, target: Path, config: dict[str, Any], *, exclusive: bool = False) -> None:
    """Replace ``target`` with ``config`` atomically, then check that ``path`` reads it."""
    text = json.dumps(config, indent=2, sort_keys=True) + "\n"
    folder = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise _unwritable(path, target, exc) from None
    try:
        os.fchmod(fd, _MODE)
        # The new file keeps the old one's owner and group, where this process may.
        with contextlib.suppress(FileNotFoundError, PermissionError):
            info = os.stat(target)
            os.fchown(fd, info.st_uid, info.st_gid)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if exclusive:
            # link() fails if the name exists: never overwrite a keyring on 'new'.
            os.link(tmp, target)
            os.unlink(tmp)
        else:
            os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, FileExistsError):
            raise _exists(path) from None
        raise
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    _check_written(path, text)


def _check_written(path: Path, text: str) -> None:
    """Refuse to report success unless ``path`` now reads what was written, at mode 0600."""
    try:
        data, mode = _read(path)
    except OSError:
        data, mode = b"", 0
    if data != text.encode("utf-8"):
        raise KeyringFileError(
            f"keyring file {path} does not read back what was just written (was a link"
            " re-pointed during the edit?): check the file before deploying it",
            path=str(path),
        )
    if mode != _MODE:
        raise ConfigurationError(f"could not set mode 0600 on {path}")
