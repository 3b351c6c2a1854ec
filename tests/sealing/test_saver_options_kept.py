"""Options that outlive a change of serializer (ported from 0.3's saver tests), on SQLite.

``with_allowlist`` (which LangGraph calls when it compiles a graph under strict msgpack) gives
a clone that keeps every `SealedSaver` option: indexed and plaintext metadata, tenants. A
keyring rotation, before any rewrap or reindex, leaves indexed filters working on the rows
written under the old primary key and on the rows written under the new one.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from secure_serde import EncryptedSerializer, SealedSaver
from secure_serde.ciphers import EnvKeyCipher
from tests.passes.sealed_support import serde_a, serde_rotated
from tests.serdes_support import sealed_sqlite

KEY = b"sealing-options-kept-key-0123456"
OPTIONS: dict[str, Any] = {"indexed_metadata": ["user"], "plaintext_metadata": ["tenant"]}


def put(saver: SealedSaver, thread_id: str, **metadata: Any) -> None:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"notes": [f"note of {thread_id}"]}
    checkpoint["channel_versions"] = {"notes": "1"}
    config: RunnableConfig = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    saver.put(config, checkpoint, cast(CheckpointMetadata, metadata), {"notes": "1"})


def stored_metadata(db: Path, thread_id: str) -> str:
    with closing(sqlite3.connect(db)) as conn:
        row = conn.execute("SELECT metadata FROM checkpoints WHERE thread_id = ?", (thread_id,))
        return str(bytes(row.fetchone()[0]), "utf-8")


def threads(saver: SealedSaver, **filter: Any) -> list[str]:
    return sorted(t.config["configurable"]["thread_id"] for t in saver.list(None, filter=filter))


def test_with_allowlist_keeps_the_metadata_options(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite"
    # An explicit inner allowlist, so a merged one makes a new serializer, hence a clone.
    inner = JsonPlusSerializer(allowed_msgpack_modules=[("tests.canary_support", "Expected")])
    with sealed_sqlite(db, EncryptedSerializer(EnvKeyCipher(KEY), inner), **OPTIONS) as saver:
        put(saver, "before", user="alice", tenant="acme", secret="s-1")
        clone = saver.with_allowlist([("tests.canary_support", "ChildState")])
        assert clone is not saver
        assert type(clone) is type(saver)
        assert isinstance(clone.serde, EncryptedSerializer)
        assert clone.serde.serde is not inner
        put(clone, "after", user="alice", tenant="acme", secret="s-2")
        assert threads(clone, user="alice") == ["after", "before"]
        assert threads(clone, tenant="acme") == ["after", "before"]
        assert clone.get_tuple({"configurable": {"thread_id": "after"}}) is not None
    after = stored_metadata(db, "after")
    assert '"tenant": "acme"' in after  # plaintext, as the option says
    assert "alice" not in after  # indexed: sealed, with a token
    assert "s-2" not in after


def test_with_allowlist_keeps_the_tenant_options(tmp_path: Path) -> None:
    def tenant(config: RunnableConfig) -> Any:
        return config["configurable"].get("tenant_id")

    with sealed_sqlite(tmp_path / "store.sqlite", EncryptedSerializer(EnvKeyCipher(KEY))) as saver:
        tenants = object()
        saver._tenant_keys, saver._tenant_of = tenants, tenant  # what TenantSaver sets
        clone = saver.with_allowlist([("tests.canary_support", "ChildState")])
    assert clone is not saver
    assert (clone._tenant_keys, clone._tenant_of) == (tenants, tenant)
    assert (clone._indexed, clone._plaintext) == (saver._indexed, saver._plaintext)


def test_indexed_filters_work_across_a_keyring_rotation_before_rewrap(tmp_path: Path) -> None:
    db = tmp_path / "store.sqlite"
    with sealed_sqlite(db, serde_a(), indexed_metadata=["user"]) as saver:
        put(saver, "old-alice", user="alice")
        put(saver, "old-bob", user="bob")
    # Key b becomes the primary, a stays readable; nothing is rewrapped or reindexed.
    with sealed_sqlite(db, serde_rotated(), indexed_metadata=["user"]) as saver:
        assert threads(saver, user="alice") == ["old-alice"]
        put(saver, "new-alice", user="alice")
        assert threads(saver, user="alice") == ["new-alice", "old-alice"]
        assert threads(saver, user="bob") == ["old-bob"]
        assert threads(saver, user="carol") == []
