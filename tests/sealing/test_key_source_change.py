"""Moving from an env key to KMS keeps indexed-metadata filters working.

0.3 derived the blind-index key from the data key, so after the move every indexed filter
failed with `BlindIndexError` unless the old env key was passed again as ``index_key=``. The
index key now lives, random and sealed, in the store identity: any serde that reads the
identity (the new KMS cipher, with the old env key kept for decryption) filters as before, and
rows written under either source match the same filter.
"""

from __future__ import annotations

from operator import add
from pathlib import Path
from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from typing_extensions import TypedDict

from secure_serde import EncryptedSerializer
from secure_serde.ciphers import EnvKeyCipher, KmsEnvelopeCipher
from tests.graphs_support import linear_graph
from tests.serdes_support import env_serde, sealed_sqlite

ENV_KEY = b"key-source-change-0123456789abcd"


class State(TypedDict):
    notes: Annotated[list[str], add]


def _note(state: State) -> dict[str, Any]:
    return {"notes": ["n"]}


def _run(db: Path, serde: EncryptedSerializer, thread: str, user: str) -> list[str]:
    """One turn for ``user`` on ``thread``, then the threads a filter on ``user`` finds."""
    with sealed_sqlite(db, serde, indexed_metadata=["user_id"]) as saver:
        graph = linear_graph(State, ("note", _note), checkpointer=saver)
        config: RunnableConfig = {"configurable": {"thread_id": thread, "user_id": user}}
        graph.invoke({"notes": []}, config)
        return sorted(
            {
                str(t.config["configurable"]["thread_id"])
                for t in saver.list(None, filter={"user_id": "alice"})
            }
        )


def test_env_key_to_kms_keeps_indexed_filters(tmp_path: Path, kms_client: Any) -> None:
    db = tmp_path / "store.sqlite"
    env = env_serde(ENV_KEY)
    assert _run(db, env, "before", "alice") == ["before"]
    arn = kms_client.create_key(Description="key-source-change")["KeyMetadata"]["Arn"]
    kms = EncryptedSerializer(
        KmsEnvelopeCipher(arn, client=kms_client), decrypt_only=[EnvKeyCipher(ENV_KEY)]
    )
    # The old rows match under the new key source, and so do the rows written under it.
    assert _run(db, kms, "after", "alice") == ["after", "before"]
    assert _run(db, kms, "other", "bob") == ["after", "before"]
