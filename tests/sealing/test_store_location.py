"""The store item location (kind 6 of secure_serde.crypto._binding): frozen bytes, injective."""

from __future__ import annotations

import itertools

from secure_serde.crypto import Location

STORE = bytes(range(16))


def test_the_encoding_is_frozen() -> None:
    encoded = Location.item(("users", "u1"), "m1").in_store(STORE).encode()
    assert encoded.hex() == (
        "53534c4f4302"  # "SSLOC" | version 2 (in a store)
        "06"  # kind 6: store item
        "05"  # five fields
        "0200000010"
        + STORE.hex()  # the store id (bytes)
        + "0100000000"  # thread id: empty
        + "0100000000"  # checkpoint namespace: empty
        + "0200000013"  # the namespace, 19 bytes:
        + "00000002"
        + "00000005"
        + b"users".hex()
        + "00000002"
        + b"u1".hex()
        + "0100000002"
        + b"m1".hex()  # the key
    )
    assert Location.item(("a",), "k").encode().startswith(b"SSLOC\x01\x06\x04")


def test_different_items_never_share_bytes() -> None:
    places = [
        (("a", "b"), "c"),
        (("a",), "b.c"),
        (("a.b",), "c"),
        (("ab",), "c"),
        (("a", "b", "c"), ""),
        (("a", "bc"), ""),
        (("a",), "bc"),
        (("a", ""), "bc"),
    ]
    encoded = {Location.item(ns, key).in_store(STORE).encode() for ns, key in places}
    assert len(encoded) == len(places)
    kinds = [Location.identity("a"), Location.blob("a", "", "b", "1"), Location.item(("a",), "b")]
    for x, y in itertools.combinations(kinds, 2):
        assert x.encode() != y.encode()
