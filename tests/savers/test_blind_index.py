"""The blind-index primitive alone: canonical values, key separation, tokens, refusals."""

from __future__ import annotations

import base64
import copy
import pickle

import pytest
from cryptography.hazmat.primitives import hashes, hmac

from secure_serde import (
    BlindIndexError,
    ConfigurationError,
    EncryptedSerializer,
    SecretPicklingError,
)
from secure_serde._keys import Key
from secure_serde._primitives import hkdf_sha256
from secure_serde.ciphers import EnvKeyCipher, KeyRotationCipher
from secure_serde.savers._blind_index import BlindIndexKeys, canonical_value

KEY_A = b"blind-index-key-a-0123456789abcd"
KEY_B = b"blind-index-key-b-0123456789abcd"


def test_canonical_values() -> None:
    assert canonical_value(1) == canonical_value(1.0) == b"1"
    assert canonical_value(True) == b"true" != canonical_value(1)
    assert canonical_value("1") == b'"1"'
    assert canonical_value("\ud800") == b'"\xed\xa0\x80"'  # a lone surrogate still encodes
    assert canonical_value({"b": 1, "a": [1.5, None]}) == b'{"a":[1.5,null],"b":1}'
    assert canonical_value("é") == '"é"'.encode()
    for bad in (float("nan"), float("inf"), b"bytes", {1: "x"}, object()):
        with pytest.raises(ConfigurationError):
            canonical_value(bad)


def test_token_is_hmac_under_a_derived_key_never_the_data_key() -> None:
    keys = BlindIndexKeys([Key.derive(KEY_A)])
    token = keys.token("user_id", "u1")
    key_id, _, mac = token.partition(":")
    assert key_id == Key.derive(KEY_A).key_id_hex
    derived = hkdf_sha256(KEY_A, b"secure_serde/v1/blind-index-hmac", 32)
    aead_key = hkdf_sha256(KEY_A, b"secure_serde/v1/aes-256-gcm", 32)
    assert derived not in (aead_key, KEY_A)
    h = hmac.HMAC(derived, hashes.SHA256())
    h.update(b"secure_serde/blind-index/v1\x00" + (7).to_bytes(4, "big") + b"user_id" + b'"u1"')
    assert mac == base64.urlsafe_b64encode(h.finalize()[:16]).rstrip(b"=").decode()
    # The name is in the MAC: the same value under two keys does not link.
    assert keys.token("tenant", "u1") != token
    assert keys.token("user_id", "u2") != token


def test_keys_come_from_the_keyring_primary_first() -> None:
    rotation = EncryptedSerializer(KeyRotationCipher({"a": KEY_A, "b": KEY_B}, "b"))
    keys = BlindIndexKeys.from_serde(rotation)
    assert keys is not None
    assert keys.key_ids == (Key.derive(KEY_B).key_id_hex, Key.derive(KEY_A).key_id_hex)
    retired = EncryptedSerializer(KeyRotationCipher({"a": KEY_A, "b": KEY_B}, "b", retired=["a"]))
    only_b = BlindIndexKeys.from_serde(retired)
    assert only_b is not None
    assert only_b.key_ids == (Key.derive(KEY_B).key_id_hex,)
    # A token under the retired key no longer verifies.
    old = BlindIndexKeys([Key.derive(KEY_A)]).token("user_id", "u1")
    with pytest.raises(BlindIndexError, match="unknown or retired"):
        only_b.verify("user_id", "u1", old)
    assert BlindIndexKeys.from_serde(object()) is None


def test_verify_refuses_other_values_and_malformed_tokens() -> None:
    keys = BlindIndexKeys.from_serde(EncryptedSerializer(EnvKeyCipher(KEY_A)))
    assert keys is not None
    good = keys.token("user_id", "u1")
    keys.verify("user_id", "u1", good)
    keys.verify("user_id", 7.0, keys.token("user_id", 7))
    flipped = good[:-1] + ("B" if good[-1] == "A" else "A")
    for token in (keys.token("user_id", "u2"), "x", 5, None, flipped, good + "A"):
        with pytest.raises(BlindIndexError) as caught:
            keys.verify("user_id", "u1", token)
        assert caught.value.key == "user_id"


def test_index_keys_stay_secret() -> None:
    keys = BlindIndexKeys.from_keys(KEY_A)
    assert "blind-index-key" not in repr(keys)
    with pytest.raises(SecretPicklingError):
        pickle.dumps(keys)
    assert copy.deepcopy(keys) is keys
