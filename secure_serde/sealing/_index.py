"""Blind-index tokens: metadata filters that work on any saver without the values.

For each indexed key, the inner saver stores a token in place of the value::

    "ssix2:" + key id + ":" + digest      (a store's index keys, identity format 2)
    "ssix1:" + digest                      (the one key of an identity format 1)

where digest is the first 16 bytes of HMAC-SHA256(index key, len(key) | key |
canonical JSON of the value), in URL-safe base64, and the key id is the first
4 bytes of HMAC-SHA256(index key, "secure_serde/index-key-id"), in hex. A
filter ``{key: value}`` becomes ``{key: token}``, which every saver can match
by equality. The index keys are random, kept sealed in the store identity
(secure_serde/sealing/_identity.py), so they do not change when the data
key's source does (env key, keyring, KMS). An identity holds one current key
(every token is written under it) and, during a re-index, older keys kept
for reading (`IndexKeys`); a token is checked under the key its id names.

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

from secure_serde._errors import BlindIndexError, ConfigurationError, UnserializableValueError
from secure_serde.crypto import SecretHolder

__all__ = [
    "TOKEN_PREFIX",
    "TOKEN_PREFIX_V2",
    "BlindIndex",
    "FilterPlan",
    "IndexGeneration",
    "IndexKeys",
    "canonical",
]

TOKEN_PREFIX: Final = "ssix1:"  # noqa: S105 - a format marker, not a secret
TOKEN_PREFIX_V2: Final = "ssix2:"  # noqa: S105 - a format marker, not a secret
_KEY_ID_LABEL: Final = b"secure_serde/index-key-id"
_KEY_ID_SIZE: Final = 4
_TOKEN_SIZE: Final = 16
INDEX_KEY_SIZE: Final = 32
_CACHED_TYPES: Final = frozenset({str, int, bool, type(None)})
_CACHED_LEN: Final = 256
_CACHED_TOKENS: Final = 4096
# Metadata values are compared and tokenized through their canonical JSON; deeper values are
# refused (typed) well before Python's recursion limit.
MAX_DEPTH: Final = 100


def canonical(value: Any) -> str:
    """The JSON text two equal metadata values share (integral floats as ints, keys sorted)."""
    kind = type(value)
    # The scalars metadata mostly holds, without the encoder's set-up: the same text
    # json.dumps gives them (tests/sealing/test_mutants_sealing.py pins the equality).
    if kind is str:
        return _json_str(value)
    if kind is int:
        return int.__repr__(value)
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    try:
        return json.dumps(_normal(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except TypeError as exc:  # json's message names the type, never the value
        raise UnserializableValueError(f"an indexed metadata value is not JSON: {exc}") from exc


_json_str: Final = json.encoder.encode_basestring  # what json.dumps(str, ensure_ascii=False) uses


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
    __slots__ = ("_keyed",)

    def __init__(self, index_key: bytes) -> None:
        if len(index_key) != INDEX_KEY_SIZE:
            raise ConfigurationError("the store's index key is not 32 bytes")
        self._keyed = HMAC(index_key, hashes.SHA256())

    def digest(self, key: str, value: Any) -> str:
        raw_key = key.encode("utf-8", "surrogatepass")
        mac = self._keyed.copy()
        mac.update(struct.pack(">I", len(raw_key)) + raw_key)
        mac.update(canonical(value).encode("utf-8", "surrogatepass"))
        digest = mac.finalize()[:_TOKEN_SIZE]
        return base64.urlsafe_b64encode(digest).decode("ascii").rstrip("=")

    def token(self, key: str, value: Any) -> str:
        return TOKEN_PREFIX + self.digest(key, value)

    def key_id(self) -> str:
        mac = self._keyed.copy()
        mac.update(_KEY_ID_LABEL)
        return mac.finalize()[:_KEY_ID_SIZE].hex()

    def __repr__(self) -> str:
        return "<BlindIndex>"


class IndexGeneration:
    """One index key and the token format written under it.

    ``legacy``: the key of an identity format 1, whose tokens are
    ``"ssix1:"`` (no key id); every other key writes ``"ssix2:<id>:"``.

    Tokens of small scalar values are kept in a bounded cache: every put
    writes them and every read recomputes them to check the stored ones, and
    most rows repeat their values (source, run_id, user ids). The cache is
    keyed by the value's exact type, so ``True``, ``1`` and ``1.0`` never
    share an entry (equal in Python, different JSON). Only a `BlindIndex`
    itself is cached: a subclass may refuse a token (a shredded tenant's
    index does), and must be asked every time.
    """

    __slots__ = ("_tokens", "index", "key_id", "legacy")

    def __init__(self, index: BlindIndex, key_id: str, *, legacy: bool) -> None:
        self.index = index
        self.key_id = key_id
        self.legacy = legacy
        self._tokens: dict[tuple[str, type, Any], str] | None = (
            {} if type(index) is BlindIndex else None
        )

    def token(self, key: str, value: Any) -> str:
        kind, cache = type(value), self._tokens
        if cache is None or kind not in _CACHED_TYPES or (kind is str and len(value) > _CACHED_LEN):
            return self._token(key, value)
        token = cache.get((key, kind, value))
        if token is None:
            if len(cache) >= _CACHED_TOKENS:
                cache.clear()  # no eviction order to keep across threads
            token = cache[(key, kind, value)] = self._token(key, value)
        return token

    def _token(self, key: str, value: Any) -> str:
        if self.legacy:
            return self.index.token(key, value)
        return f"{TOKEN_PREFIX_V2}{self.key_id}:{self.index.digest(key, value)}"

    def __repr__(self) -> str:
        return f"<IndexGeneration {self.key_id}{' (ssix1)' if self.legacy else ''}>"


class IndexKeys:
    """A store's index keys: the current one first, then those kept for reading."""

    __slots__ = ("_by_id", "_legacy", "generations")

    def __init__(self, generations: Iterable[IndexGeneration]) -> None:
        self.generations = tuple(generations)
        if not self.generations:
            raise ConfigurationError("a store needs an index key")
        self._by_id = {g.key_id: g for g in self.generations if not g.legacy}
        legacy = [g for g in self.generations if g.legacy]
        if len(legacy) > 1 or len(self._by_id) + len(legacy) != len(self.generations):
            raise ConfigurationError("a store's index keys must have distinct ids")
        self._legacy = legacy[0] if legacy else None

    @classmethod
    def single(cls, index: BlindIndex) -> IndexKeys:
        """One key, writing format-1 tokens (an identity format 1, a tenant's index)."""
        return cls([IndexGeneration(index, "", legacy=True)])

    @property
    def current(self) -> IndexGeneration:
        return self.generations[0]

    def token(self, key: str, value: Any) -> str:
        return self.current.token(key, value)

    def generation_of(self, key: str, token: Any) -> IndexGeneration:
        """The key a stored token claims to be under, or `BlindIndexError` (unknown key id)."""
        if isinstance(token, str) and token.startswith(TOKEN_PREFIX_V2):
            key_id, colon, _ = token[len(TOKEN_PREFIX_V2) :].partition(":")
            found = self._by_id.get(key_id) if colon else None
            if found is None:
                raise BlindIndexError(
                    f"the index token of {key!r} is under an index key this store does not"
                    " hold (an unknown key id): it was planted, or its key was dropped",
                    key=key,
                )
            return found
        if isinstance(token, str) and token.startswith(TOKEN_PREFIX):
            if self._legacy is None:
                raise BlindIndexError(
                    f"the index token of {key!r} is a format-1 token, and this store holds no"
                    " format-1 index key",
                    key=key,
                )
            return self._legacy
        raise BlindIndexError(f"the stored value of {key!r} is not an index token", key=key)

    def __repr__(self) -> str:
        return f"<IndexKeys {[g.key_id for g in self.generations]}>"


@dataclass(frozen=True)
class FilterPlan:
    """A ``list(filter=)`` (or a store's ``search(filter=)``) split by who matches what.

    ``inner`` goes to the inner saver or store (tokens for indexed keys,
    values for plaintext keys, the filter as given for searchable fields).
    ``checked`` holds every indexed key, each checked against the
    authenticated metadata or value of what the inner one returns (a
    mismatch is a forged or moved token). ``residual`` holds the other keys:
    the inner one cannot see them, so rows are matched here, and its
    ``limit`` (and ``offset``) no longer apply.
    """

    inner: dict[str, Any] | None
    checked: dict[str, Any]
    residual: dict[str, Any]


def plan_filter(
    filter: Mapping[str, Any] | None,
    index: BlindIndex | IndexGeneration,
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


def plan_filters(
    filter: Mapping[str, Any] | None,
    keys: IndexKeys,
    indexed: Iterable[str],
    plaintext: Iterable[str],
) -> list[FilterPlan]:
    """One plan per index key the identity holds (one, except during a re-index), deduplicated.

    Rows are tokenized under one key each, so a filter on indexed keys asks the
    inner saver once per key; a filter on no indexed key gives one plan.
    """
    plans: list[FilterPlan] = []
    for generation in keys.generations:
        plan = plan_filter(filter, generation, indexed, plaintext)
        if plan not in plans:
            plans.append(plan)
    return plans


def matches(metadata: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether authenticated metadata holds every ``key: value`` (values compared canonically)."""
    for key, value in wanted.items():
        if key not in metadata or canonical(metadata[key]) != canonical(value):
            return False
    return True
