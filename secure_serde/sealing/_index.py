"""Blind-index tokens: metadata filters that work on any saver without the values.

For each indexed key, the inner saver stores ``"ssix1:" + token`` in place of
the value, where token is the first 16 bytes of HMAC-SHA256(index key,
len(key) | key | canonical JSON of the value), in URL-safe base64. A filter
``{key: value}`` becomes ``{key: token}``, which every saver can match by
equality. The index key is random, kept sealed in the store identity
(secure_serde/sealing/_identity.py), so it does not change when the data
key's source does (env key, keyring, KMS).

Tokens are deterministic by design: the store shows which rows share an
indexed value (SECURITY.md). They are not trusted: every row a filtered
``list`` returns is checked against its authenticated metadata.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.hmac import HMAC

from secure_serde._errors import BlindIndexError, ConfigurationError
from secure_serde._primitives import SecretHolder

__all__ = ["TOKEN_PREFIX", "BlindIndex", "FilterPlan", "canonical"]

TOKEN_PREFIX: Final = "ssix1:"  # noqa: S105 - a format marker, not a secret
_TOKEN_SIZE: Final = 16
INDEX_KEY_SIZE: Final = 32
# Metadata values are compared and tokenized through their canonical JSON; deeper values are
# refused (typed) well before Python's recursion limit.
MAX_DEPTH: Final = 100


def canonical(value: Any) -> str:
    """The JSON text two equal metadata values share (integral floats as ints, keys sorted)."""
    return json.dumps(_normal(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _normal(value: Any, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        raise BlindIndexError(
            f"a metadata value nested deeper than {MAX_DEPTH} levels cannot be indexed or matched",
            key="",
        )
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _normal(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normal(v, depth + 1) for v in value]
    return value


class BlindIndex(SecretHolder):
    """Keyed tokens for metadata values, under the store's index key."""

    __slots__ = ("_keyed",)

    def __init__(self, index_key: bytes) -> None:
        if len(index_key) != INDEX_KEY_SIZE:
            raise ConfigurationError("the store's index key is not 32 bytes")
        self._keyed = HMAC(index_key, hashes.SHA256())

    def token(self, key: str, value: Any) -> str:
        raw_key = key.encode("utf-8", "surrogatepass")
        mac = self._keyed.copy()
        mac.update(struct.pack(">I", len(raw_key)) + raw_key)
        mac.update(canonical(value).encode("utf-8", "surrogatepass"))
        digest = mac.finalize()[:_TOKEN_SIZE]
        return TOKEN_PREFIX + base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")

    def __repr__(self) -> str:
        return "<BlindIndex>"


@dataclass(frozen=True)
class FilterPlan:
    """A ``list(filter=)`` split into what the inner saver matches and what is checked here.

    ``inner`` goes to the inner saver (tokens for indexed keys, values for
    plaintext keys). ``checked`` holds every indexed key, each checked
    against the authenticated metadata of the rows the inner saver returns
    (a mismatch is a forged token). ``residual`` holds the other keys: the
    inner saver cannot see them, so rows are matched here, and the inner
    saver's ``limit`` no longer applies.
    """

    inner: dict[str, Any] | None
    checked: dict[str, Any]
    residual: dict[str, Any]


def plan_filter(
    filter: Mapping[str, Any] | None,
    index: BlindIndex,
    indexed: Iterable[str],
    plaintext: Iterable[str],
) -> FilterPlan:
    if not filter:
        return FilterPlan(None, {}, {})
    indexed_keys, plain_keys = frozenset(indexed), frozenset(plaintext)
    inner: dict[str, Any] = {}
    checked: dict[str, Any] = {}
    residual: dict[str, Any] = {}
    for key, value in filter.items():
        if key in indexed_keys:
            inner[key] = index.token(key, value)
            checked[key] = value
        elif key in plain_keys:
            # The store's own match is not trusted either (a duplicate JSON key reads one
            # way in the store's JSON functions and another way in json.loads).
            inner[key] = value
            checked[key] = value
        else:
            residual[key] = value
    return FilterPlan(inner or None, checked, residual)


def matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether authenticated metadata holds every ``key: value`` (values compared canonically)."""
    for key, value in wanted.items():
        if key not in metadata or canonical(metadata[key]) != canonical(value):
            return False
    return True
