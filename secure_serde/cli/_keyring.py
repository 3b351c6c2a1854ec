"""``secure-serde keyring``: the staged rotation runbook as commands on a keyring file.

Tink's order, one command per stage: ``add`` a key (it only decrypts),
deploy the file everywhere, ``promote`` it (it encrypts), rewrap, ``retire``
the old key (its rows are named, not read), then ``drop`` it. Every edit is
validated by building the `KeyRotationCipher` the file describes before it
is written, and written atomically (a temporary file in the same folder,
fsynced, then renamed over the old one) at mode 0600, under an exclusive
lock, so a crash or a concurrent edit never leaves a half-written keyring.
Keys are generated here and never printed unless ``show --reveal`` asks.
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

from secure_serde._errors import ConfigurationError
from secure_serde._keys import generate_encoded_key
from secure_serde.ciphers import EnvKeyCipher, KeyRotationCipher
from secure_serde.cli._renamed import add_label_option

__all__ = ["register"]

_MODE: Final = 0o600
# The label a file may name without holding the key: LANGGRAPH_AES_KEY is the key "env".
_ENV_LABEL: Final = "env"


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
    new = actions.add_parser("new", help="create a keyring file with one new primary key")
    new.add_argument("file", type=Path)
    add_label_option(new, "the new key's label, such as 2025-06", required=True)
    add = actions.add_parser("add", help="add a new random key that only decrypts")
    add.add_argument("file", type=Path)
    add_label_option(add, "the new key's label, such as 2025-06", required=True)
    for name, text in (
        ("promote", "make a key the primary: new rows are encrypted under it"),
        ("retire", "stop a key from decrypting: its rows are refused, naming it"),
        ("drop", "remove a retired key from the file for good"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("file", type=Path)
        action.add_argument("label", help="the key's label")
    show = actions.add_parser("show", help="list the labels, roles and key ids")
    show.add_argument("file", type=Path)
    show.add_argument("--reveal", action="store_true", help="also print the keys themselves")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.action == "new":
        return _new(args.file, args.label)
    if args.action == "show":
        return _show(args.file, reveal=args.reveal)
    with _locked(args.file):
        # Step 1 of a drop-in deployment's first rotation: no file yet, the key is "env".
        fresh = args.action == "add" and not args.file.exists()
        config: dict[str, Any] = {"keys": {}} if fresh else _load(args.file)
        message = _EDITS[args.action](config, args.label)
        _validate(config, args.file)
        _write(args.file, config)
    print(message)
    return 0


def _new(path: Path, label: str) -> int:
    if path.exists():
        raise ConfigurationError(f"{path} already exists; use 'keyring add' to extend it")
    config: dict[str, Any] = {"primary": label, "keys": {label: generate_encoded_key()}}
    _validate(config, path)
    _write(path, config, exclusive=True)
    print(f"created {path} (mode 0600) with primary key {label!r}")
    print(f"point the application at it: SECURE_SERDE_KEYRING_FILE={path}")
    return 0


def _add(config: dict[str, Any], label: str) -> str:
    keys = config.setdefault("keys", {})
    if label in keys or label == _ENV_LABEL:
        raise ConfigurationError(f"label {label!r} is already taken")
    keys[label] = generate_encoded_key()
    return (
        f"added key {label!r}; it only decrypts. Deploy this file everywhere, then run"
        f" 'secure-serde keyring promote FILE {label}'"
    )


def _promote(config: dict[str, Any], label: str) -> str:
    _require_key(config, label)
    if label in config.get("retired", []):
        raise ConfigurationError(f"key {label!r} is retired; a retired key cannot encrypt")
    old = config.get("primary", _ENV_LABEL)
    config["primary"] = label
    return (
        f"key {label!r} is now the primary (was {old!r}). Deploy, run 'secure-serde rewrap',"
        f" then retire {old!r}"
    )


def _retire(config: dict[str, Any], label: str) -> str:
    _require_key(config, label)
    if config.get("primary", _ENV_LABEL) == label:
        raise ConfigurationError(f"key {label!r} is the primary; promote another key first")
    retired = config.setdefault("retired", [])
    if label not in retired:
        retired.append(label)
    return f"key {label!r} is retired: rows under it are now refused, naming it"


def _drop(config: dict[str, Any], label: str) -> str:
    if label not in config.get("retired", []):
        raise ConfigurationError(f"retire key {label!r} (and audit the store) before dropping it")
    config["retired"].remove(label)
    config.get("keys", {}).pop(label, None)
    if config.get("legacy_key") == label:
        config["legacy_key"] = None
    return f"key {label!r} is gone from the file; rows still under it can never be read"


_EDITS: Final = {"add": _add, "promote": _promote, "retire": _retire, "drop": _drop}


def _require_key(config: dict[str, Any], label: str) -> None:
    if label not in config.get("keys", {}) and label != _ENV_LABEL:
        raise ConfigurationError(f"no key labelled {label!r} in the file")


def _show(path: Path, *, reveal: bool) -> int:
    config = _load(path)
    _validate(config, path)
    keys: dict[str, str] = config.get("keys", {})
    retired = set(config.get("retired", []))
    print(f"{path}:")
    for label in sorted(keys):
        role = (
            "primary"
            if label == config.get("primary", _ENV_LABEL)
            else "retired"
            if label in retired
            else "decrypt only"
        )
        key_id = EnvKeyCipher(keys[label], legacy_mode=None).key_id
        line = f"  {label:<20} {role:<13} key id {key_id}"
        print(f"{line}  {keys[label]}" if reveal else line)
    if config.get("legacy_key"):
        print(f"  legacy '+aes' rows are read with key {config['legacy_key']!r}")
    return 0


def _load(path: Path) -> dict[str, Any]:
    # Raised outside the handlers so that no __context__ keeps the file's text.
    problem = None
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        problem = f"no keyring file at {path}; create one with 'secure-serde keyring new'"
    except OSError as exc:
        problem = f"cannot read keyring file {path}: {exc.strerror}"
    except ValueError:
        problem = f"keyring file {path} is not valid JSON (or not UTF-8)"
    if problem is not None:
        raise ConfigurationError(problem)
    if not isinstance(config, dict) or not isinstance(config.get("keys", {}), dict):
        raise ConfigurationError(f"keyring file {path} must hold a JSON object with 'keys'")
    return config


def _validate(config: dict[str, Any], path: Path) -> KeyRotationCipher:
    """The cipher the file describes; refuses an edit that would not load."""
    keys = dict(config.get("keys", {}))
    named = {config.get("primary"), config.get("legacy_key"), *config.get("retired", [])}
    if _ENV_LABEL in named and _ENV_LABEL not in keys:
        # Stands in for LANGGRAPH_AES_KEY, which the application supplies.
        keys[_ENV_LABEL] = generate_encoded_key()
    # As KeyRotationCipher.from_env: without a primary, LANGGRAPH_AES_KEY ("env") is it.
    primary = config.get("primary", _ENV_LABEL)
    if not isinstance(primary, str):
        raise ConfigurationError(f"'primary' in keyring file {path} must be a label")
    if primary == _ENV_LABEL and _ENV_LABEL not in keys:
        keys[_ENV_LABEL] = generate_encoded_key()
    legacy = config.get("legacy_key")
    return KeyRotationCipher(
        keys,
        primary,
        retired=tuple(config.get("retired", ())),
        legacy_key=legacy if isinstance(legacy, str) else None,
    )


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive lock on a sidecar file, so two editors never interleave."""
    lock_path = path.with_name(f".{path.name}.lock")
    fd = os.open(lock_path, os.O_WRONLY | os.O_CREAT, _MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write(path: Path, config: dict[str, Any], *, exclusive: bool = False) -> None:
    text = json.dumps(config, indent=2, sort_keys=True) + "\n"
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _MODE)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if exclusive:
            # link() fails if the name exists: never overwrite a keyring on 'new'.
            os.link(tmp, path)
            os.unlink(tmp)
        else:
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    if stat.S_IMODE(path.stat().st_mode) != _MODE:
        raise ConfigurationError(f"could not set mode 0600 on {path}")
