"""At rest, a sealed store holds no value in the clear; with opt-in, only the named fields.

The canary scan reads everything the storage keeps (the SQLite file, a pg_dump of the
database, InMemoryStore's dicts), after the same puts through the bare store and through
SealedStore: the bare store shows every canary (which validates the scan), the sealed one none.
Semantic search runs on a deterministic fake embedding that records every text it is given:
by default the inner store is handed no text at all; with ``searchable_fields`` it gets exactly
those fields, and ``search(query=...)`` ranks as on the bare store.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from secure_serde import ConfigurationError
from tests.sealing.store_support import LANES, RESERVED, EnvFactory, envs

CANARIES = {
    "sealed field": "CANARY-ssn-123-45-6789",
    "indexed field": "CANARY-kind-diagnosis",
    "nested": "CANARY-card-4111111111111111",
    "list": "CANARY-allergy-peanut",
}
VALUE: dict[str, Any] = {
    "ssn": CANARIES["sealed field"],
    "kind": CANARIES["indexed field"],
    "profile": {"card": CANARIES["nested"], "n": 7},
    "allergies": ["none", CANARIES["list"]],
}


@pytest.fixture(params=LANES)
def make_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[EnvFactory]:
    with envs(request.param, tmp_path, request) as make:
        yield make


def test_no_canary_at_rest_in_a_sealed_store(make_env: EnvFactory) -> None:
    seen: dict[bool, set[str]] = {}
    for sealed in (False, True):
        env = make_env()
        store = env.store(sealed=sealed, indexed=("kind",))
        for i in range(3):
            env.call(store, "put", ("patients", f"p{i}"), "record", VALUE)
        env.call(store, "put", ("patients", "p0"), "note", {"text": CANARIES["sealed field"]})
        assert env.call(store, "get", ("patients", "p1"), "record").value == VALUE
        found = env.call(store, "search", ("patients",), filter={"kind": VALUE["kind"]})
        assert len(found) == 3
        dump = env.at_rest()
        seen[sealed] = {name for name, c in CANARIES.items() if c.encode() in dump}
        if sealed:
            # Only the cell, the token and the readable coordinates reach the rows.
            for (namespace, _), row in env.rows().items():
                if namespace != RESERVED:
                    assert set(row) <= {"__secure_serde__", "kind"}
                    assert row.get("kind", "ssix1:").startswith("ssix1:")
    assert seen[False] == set(CANARIES), "the scan must see the bare store's values"
    assert seen[True] == set()


class RecordingEmbeddings:
    """A deterministic fake embedding (hashed character trigrams) that records every text."""

    def __init__(self, dims: int = 32) -> None:
        self.dims = dims
        self.texts: list[str] = []

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return [self._one(t) for t in texts]

    def _one(self, text: str) -> list[float]:
        vector = [0.0] * self.dims
        padded = f"  {text.lower()}  "
        for i in range(len(padded) - 2):
            digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=2).digest()
            vector[int.from_bytes(digest, "big") % self.dims] += 1.0
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]


DOCS = [
    ("d1", {"text": "green tea in the morning", "diagnosis": "CANARY-diag-asthma", "kind": "a"}),
    ("d2", {"text": "strong black coffee", "diagnosis": "CANARY-diag-diabetes", "kind": "b"}),
    ("d3", {"text": "jasmine tea after lunch", "diagnosis": "CANARY-diag-migraine", "kind": "a"}),
    ("d4", {"text": "hiking in the mountains", "diagnosis": "CANARY-diag-gout", "kind": "b"}),
]
# PostgresStore's index needs the pgvector extension and SqliteStore's needs sqlite-vec loaded as
# an extension (this interpreter's sqlite3 cannot load extensions): InMemoryStore runs the check.
SEMANTIC_LANES = ("memory",)


@pytest.fixture(params=SEMANTIC_LANES)
def semantic_lane(request: pytest.FixtureRequest) -> str:
    lane: str = request.param
    return lane


def _run_semantic(
    lane: str, tmp_path: Path, request: Any, *, sealed: bool, searchable: tuple[str, ...]
) -> tuple[RecordingEmbeddings, list[Any], bytes]:
    embed = RecordingEmbeddings()
    key = "fields" if lane == "memory" else "text_fields"
    index = {"dims": embed.dims, "embed": embed, key: ["text"]}
    with envs(lane, tmp_path / f"{sealed}{len(searchable)}", request) as make:
        env = make(index)
        store = env.store(sealed=sealed, indexed=("kind",), searchable=searchable)
        for key_, value in DOCS:
            env.call(store, "put", ("notes",), key_, value)
        env.call(
            store, "put", ("notes",), "d5", {"text": "tea unindexed", "kind": "a"}, index=False
        )
        results = [
            [
                (i.key, i.value, round(i.score or 0.0, 6))
                for i in env.call(store, "search", ("notes",), **q)
            ]
            for q in (
                {"query": "tea"},
                {"query": "coffee", "limit": 2},
                {"query": "tea", "filter": {"kind": "a"}},
                {"query": "mountain", "filter": {"diagnosis": "CANARY-diag-gout"}},
                {"query": "tea", "limit": 2, "offset": 1},
            )
        ]
        return embed, results, env.at_rest()


@pytest.fixture
def tmp_dir(tmp_path: Path) -> Path:
    (tmp_path / "s").mkdir()
    return tmp_path / "s"


def test_searchable_fields_rank_as_the_bare_store_and_are_all_that_is_embedded(
    semantic_lane: str, tmp_dir: Path, request: pytest.FixtureRequest
) -> None:
    bare_embed, bare, bare_dump = _run_semantic(
        semantic_lane, tmp_dir, request, sealed=False, searchable=()
    )
    embed, sealed, dump = _run_semantic(
        semantic_lane, tmp_dir, request, sealed=True, searchable=("text",)
    )
    assert sealed == bare
    assert bare[0][0][0] in ("d1", "d3")  # the fake embedding ranks: tea first
    documents = {value["text"] for _, value in DOCS}
    assert set(embed.texts) - {"tea", "coffee", "mountain"} == documents
    # The opted-in field is readable at rest, as the docs warn; nothing else is.
    assert all(text.encode() in dump for text in documents)
    assert not [c for _, v in DOCS if (c := v["diagnosis"]).encode() in dump]
    assert all(v["diagnosis"].encode() in bare_dump for _, v in DOCS)
    assert bare_embed.texts == embed.texts


def test_by_default_the_inner_store_is_handed_no_text(
    semantic_lane: str, tmp_dir: Path, request: pytest.FixtureRequest
) -> None:
    embed, results, dump = _run_semantic(
        semantic_lane, tmp_dir, request, sealed=True, searchable=()
    )
    assert set(embed.texts) <= {"tea", "coffee", "mountain"}  # queries only, never a document
    for _, value in DOCS:
        assert value["text"].encode() not in dump
        assert value["diagnosis"].encode() not in dump
    assert sorted(k for k, _, _ in results[0]) == ["d1", "d2", "d3", "d4", "d5"][: len(results[0])]


def test_put_index_naming_a_sealed_field_is_refused(tmp_path: Path, request: Any) -> None:
    embed = RecordingEmbeddings()
    with envs("memory", tmp_path, request) as make:
        env = make({"dims": embed.dims, "embed": embed, "fields": ["text"]})
        store = env.store(sealed=True, searchable=("text",))
        with pytest.raises(ConfigurationError, match="searchable_fields"):
            store.put(("n",), "k", {"text": "x", "secret": "y"}, index=["secret"])
        with pytest.raises(ConfigurationError):
            store.put(("n",), "k", {"text": "x"}, index=["$"])
        store.put(("n",), "k", {"text": "x", "meta": {"a": "b"}}, index=["text"])
        assert embed.texts == ["x"]
