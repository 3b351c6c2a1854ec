"""`KeyringFile`: a keyring file (`KeyRotationCipher.from_env` reads it) edited one stage at a time.

Tink's order, one edit per stage: ``add`` a key (it only decrypts), deploy
the file everywhere, ``promote`` it (it encrypts), rewrap, ``retire`` the
old key (its rows are named, not read), then ``drop`` it. Every edit is
validated by building the `KeyRotationCipher` the file describes, and
written atomically at mode 0600 under an exclusive lock, so a crash or a
concurrent edit never leaves a half-written keyring. An edit follows
symbolic links to the regular file and replaces that file beside itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from secure_serde._errors import ConfigurationError, KeyringFileError
from secure_serde._scrub import scrubbed
from secure_serde.ciphers._env import EnvKeyCipher
from secure_serde.ciphers._rotation import (
    ENV_LABEL,
    KeyRotationCipher,
    check_keyring_fields,
    open_to,
    read_file,
    read_keyring_file,
)
from secure_serde.crypto import generate_encoded_key, shown_label

__all__ = ["KeyringEntry", "KeyringFile"]

_MODE: Final = 0o600


@dataclass(frozen=True)
class KeyringEntry:
    """One key of a keyring file; ``key`` only when revealed, and never in the repr."""

    label: str
    role: str  # "primary", "retired" or "decrypt only"
    key_id: str
    key: str | None = field(default=None, repr=False)


class KeyringFile:
    """The keyring file at ``path``: `create` it, `edit` it one stage at a time, list its keys."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @property
    def target(self) -> Path:
        """The file an edit replaces: ``path`` (maybe not there yet), or the file its links reach.

        Raises `KeyringFileError` for a dangling or looping link, or a target that is no file.
        """
        path = target = self.path
        try:
            if path.is_symlink():
                target = Path(os.path.realpath(path, strict=True))
        except OSError as exc:
            raise KeyringFileError(
                f"keyring file {path} is a symbolic link that cannot be followed to a file"
                f" ({exc.strerror or 'it cannot be followed'}): an edit changes the file a link"
                " points to, so create the keyring there, or point the link at it",
                path=str(path),
            ) from None
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

    @scrubbed
    def create(self, label: str) -> None:
        """Write a new file with one new key, ``label``, as the primary; never over a file."""
        path = self.path
        # An existing file that is no link is refused before `target` looks at what it is.
        target = path if os.path.lexists(path) and not path.is_symlink() else self.target
        if os.path.lexists(target):
            raise self._exists()
        config: dict[str, Any] = {"primary": label, "keys": {label: generate_encoded_key()}}
        self._validate(config)
        with self._locked(target):
            self._write(target, config, exclusive=True)

    @scrubbed  # the loaded file holds keys: no error leaves them in a frame local
    def edit(self, stage: str, label: str) -> str:
        """Apply ``stage`` (add, promote, retire or drop) to ``label``; the former primary's label.

        ``add`` on a path where no file is yet creates one whose primary is
        the ``env`` key (``LANGGRAPH_AES_KEY``): a drop-in deployment's first
        rotation.
        """
        if stage not in _STAGES:
            raise ConfigurationError(f"no keyring stage {stage!r}; one of {sorted(_STAGES)}")
        target = self.target
        with self._locked(target):
            fresh = stage == "add" and not os.path.lexists(target)
            # A second hard link would keep the old keys: an edit replaces one name.
            links = 0 if fresh or not os.path.exists(target) else os.stat(target).st_nlink
            if links > 1:
                raise KeyringFileError(
                    f"keyring file {self.path} has {links} hard links: an edit replaces one name,"
                    " and the others would keep the old keys (a dropped key would live on)."
                    " Remove the other links, or copy the file, then edit it",
                    path=str(self.path),
                )
            config = {"keys": {}} if fresh else read_keyring_file(self.path, private=False)[0]
            primary = config.get("primary", ENV_LABEL)
            _apply(config, stage, label)
            self._validate(config)
            self._write(target, config)
        return str(primary)

    @scrubbed
    def entries(self, *, reveal: bool = False) -> tuple[list[KeyringEntry], str | None]:
        """Each key by label, with its key id (and, with ``reveal``, the key), and the legacy key.

        ``reveal`` refuses, with `KeyringFileError`, a file that group or
        others may read or write, as ssh refuses such a private key.
        """
        path = self.path
        config, mode = read_keyring_file(path, private=False)
        if reveal and (who := open_to(mode)):
            raise KeyringFileError(
                f"keyring file {path} is open to {who} (mode {mode:04o}), so its keys are not"
                f" printed: a key file must be private to its owner, as ssh requires. Run"
                f" `chmod 600 {path}`, then show --reveal again",
                path=str(path),
            )
        self._validate(config)
        keys: dict[str, str] = config.get("keys", {})
        primary, retired = config.get("primary", ENV_LABEL), config.get("retired", [])
        found = []
        for label in sorted(keys):
            role = (
                "primary" if label == primary else "retired" if label in retired else "decrypt only"
            )
            key_id = EnvKeyCipher(keys[label], legacy_mode=None).key_id
            found.append(KeyringEntry(label, role, key_id, keys[label] if reveal else None))
        return found, config.get("legacy_key")

    def _exists(self) -> ConfigurationError:
        return ConfigurationError(f"{self.path} already exists; use 'keyring add' to extend it")

    @scrubbed
    def _validate(self, config: dict[str, Any]) -> KeyRotationCipher:
        """The cipher the file describes; refuses an edit that would not load."""
        check_keyring_fields(config, self.path)
        keys = dict(config.get("keys", {}))
        # As KeyRotationCipher.from_env: without a primary, LANGGRAPH_AES_KEY ("env") is it.
        primary = config.get("primary", ENV_LABEL)
        if ENV_LABEL in {primary, config.get("legacy_key"), *config.get("retired", [])}:
            # Stands in for LANGGRAPH_AES_KEY, which the application supplies.
            keys.setdefault(ENV_LABEL, generate_encoded_key())
        legacy = config.get("legacy_key")
        return KeyRotationCipher(
            keys,
            primary,
            retired=tuple(config.get("retired", ())),
            legacy_key=legacy if isinstance(legacy, str) else None,
        )

    @contextlib.contextmanager
    def _locked(self, target: Path) -> Iterator[None]:
        """An exclusive lock on a sidecar file beside the target, so two editors never interleave.

        Beside the target, not the link: editors that reach one file through
        different links take the same lock.
        """
        lock_path = target.with_name(f".{target.name}.lock")
        try:
            fd = os.open(lock_path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), _MODE)
        except OSError as exc:
            raise self._unwritable(target, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _unwritable(self, target: Path, exc: OSError) -> KeyringFileError:
        path = self.path
        where = f"{target.parent}" + (f" (where the link {path} leads)" if target != path else "")
        return KeyringFileError(
            f"cannot edit keyring file {path}: an edit writes a new file in {where} and renames"
            f" it over the old one, and that folder refused ({exc.strerror}). Edit the keyring"
            " where it is writable, then deploy it",
            path=str(path),
        )

    def _write(self, target: Path, config: dict[str, Any], *, exclusive: bool = False) -> None:
        """Replace ``target`` with ``config`` atomically, then check that ``path`` reads it."""
        text = json.dumps(config, indent=2, sort_keys=True) + "\n"
        folder = target.parent  # Path("name").parent is Path("."), never empty
        try:
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.", suffix=".tmp")
        except OSError as exc:
            raise self._unwritable(target, exc) from None
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
                # link() fails if the name exists: never overwrite a keyring on create.
                os.link(tmp, target)
                os.unlink(tmp)
            else:
                os.replace(tmp, target)
        except BaseException as exc:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            if isinstance(exc, FileExistsError):
                raise self._exists() from None
            raise
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        self._check_written(text)

    def _check_written(self, text: str) -> None:
        """Refuse to report success unless ``path`` now reads what was written, at mode 0600."""
        try:
            data, mode = read_file(self.path)
        except OSError:
            data, mode = b"", 0
        if data != text.encode("utf-8"):
            raise KeyringFileError(
                f"keyring file {self.path} does not read back what was just written (was a link"
                " re-pointed during the edit?): check the file before deploying it",
                path=str(self.path),
            )
        if mode != _MODE:
            raise ConfigurationError(f"could not set mode 0600 on {self.path}")


_STAGES: Final = ("add", "promote", "retire", "drop")


def _apply(config: dict[str, Any], stage: str, label: str) -> None:
    """Make one stage's change to ``config``, or raise `ConfigurationError` saying why not."""
    keys: dict[str, str] = config.get("keys", {})
    retired: list[str] = config.get("retired", [])
    known = label in keys or label == ENV_LABEL
    primary = label == config.get("primary", ENV_LABEL)
    for stages, refused, why in (
        ("add", known, "label {} is already taken"),
        ("promote retire", not known, "no key labelled {} in the file"),
        ("promote", label in retired, "key {} is retired; a retired key cannot encrypt"),
        ("retire", primary, "key {} is the primary; promote another key first"),
        ("drop", label not in retired, "retire key {} (and audit the store) before dropping it"),
    ):
        if refused and stage in stages.split():
            raise ConfigurationError(why.format(shown_label(label)))
    if stage == "add":
        config["keys"] = {**keys, label: generate_encoded_key()}
    elif stage == "promote":
        config["primary"] = label
    elif stage == "retire" and label not in retired:
        config["retired"] = [*retired, label]
    elif stage == "drop":
        retired.remove(label)
        keys.pop(label, None)
        if config.get("legacy_key") == label:
            config["legacy_key"] = None
