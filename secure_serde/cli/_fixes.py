"""Which command fixes the rows a pass could not read or vouch for: audit, rewrap and adopt.

Every finding the CLI prints is followed by what fixes it. A fix is a
command line that runs as printed (`command` quotes it), with the reason as
a shell comment after ``#``; where no command can repair a row (it was
changed outside the application), the line says so and names the command
to run once it is restored. ``NEW_STORE`` stands for the new store `adopt`
copies into, which only the operator can name. What fixes each kind of audit
finding is in its table (`_audit._problems`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

from secure_serde.cli._pretty import command

__all__ = ["NEW_STORE", "adopt_fixes", "row_error_fixes"]

NEW_STORE: Final = "NEW_STORE"
# The error classes of a key this configuration lacks (or retired): configuring it fixes them.
_KEY_ERRORS: Final = frozenset({"UnknownKeyError", "UnknownCipherError", "RetiredKeyError"})
_CONFIGURE_KEY: Final = (
    "configure the key the rows name (SECURE_SERDE_KEYRING_FILE, or"
    " SECURE_SERDE_KMS_DECRYPT_KEYS for a KMS key; `secure-serde keyring show FILE` lists"
    " a keyring's key ids)"
)


def row_error_fixes(
    errors: Collection[str], store: str, *, rerun: str, look: str | None = None
) -> list[str]:
    """One ``fix (...)`` line per kind of row that could not be read, by error class name.

    ``rerun`` is the command to run once the cause is fixed (rewrap or
    audit, as printed by `command`); ``look`` one that shows the first such
    row, if there is one.
    """
    fixes = []
    if "PlaintextRefusedError" in errors:
        fixes.append(
            f"fix (PlaintextRefusedError): {command('rewrap', store, '--allow-plaintext')}"
            "  # seals unencrypted rows the strict decoder accepts"
        )
    if "PickleRefusedError" in errors:
        fixes.append(
            f"fix (PickleRefusedError): {command('rewrap', store, '--allow-legacy-pickle')}"
            "  # only for a store nobody untrusted could write; unencrypted pickles stay refused"
        )
    keys = sorted(_KEY_ERRORS.intersection(errors))
    if keys:
        fixes.append(f"fix ({', '.join(keys)}): {_CONFIGURE_KEY}, then {rerun}")
    if "BlindIndexError" in errors:
        fixes.append(
            "fix (BlindIndexError): run the application's SealedSaver.reindex() (docs/keys.md),"
            f" then {rerun}"
        )
    named = _KEY_ERRORS | {"PlaintextRefusedError", "PickleRefusedError", "BlindIndexError"}
    others = sorted(e for e in errors if e not in named)
    if others:
        where = f" ({look} shows the first)" if look else ""
        fixes.append(
            f"fix ({', '.join(others)}): the rows were changed outside the application"
            f" (tampered, planted or relabelled): restore them from a backup or delete"
            f" them{where}, then {rerun}"
        )
    return fixes


def adopt_fixes(kinds: Collection[str], source: str) -> list[str]:
    """One ``fix (...)`` line per kind of row adopt refused (`Unvouched.reason`)."""
    fixes = []
    switchable = sorted({"plaintext", "legacy", "unauthenticated"}.intersection(kinds))
    if switchable:
        rerun = command("adopt", source, NEW_STORE, "--accept-unvouched")
        fixes.append(
            f"fix ({', '.join(switchable)}): {rerun}  # copies them too, each listed; only if"
            " nobody untrusted could write the source"
        )
    if "misplaced" in kinds:
        fixes.append(
            "fix (misplaced): the rows were changed outside the application (moved, copied or"
            " tampered with): restore them from a backup, or leave them behind"
        )
    if "parent refused" in kinds:
        fixes.append("fix (parent refused): follows its parent checkpoint's fix")
    return fixes
