"""Checkpoints before v4 read as on stock savers: pending sends rebuilt from the parent's writes.

``empty_checkpoint()`` and ``create_checkpoint()`` still make ``v=2``. The stock savers rebuild
such a checkpoint's ``__pregel_tasks`` from its parent's writes; 0.3's sealed PostgresSaver
failed langgraph's own ``test_pending_sends_migration`` with a bare ``DecryptionError``, and a
first cut of the wrapper deadlocked on the stock PostgresSaver's connection lock doing it inside
``list``. Here the wrapper and the stock saver, on the same PostgreSQL, return the same values.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, create_checkpoint, empty_checkpoint
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.serde.types import TASKS
from langgraph.types import Send

from secure_serde import EncryptedSerializer, SealedSaver
from secure_serde.ciphers import EnvKeyCipher
from tests.fixtures_services import saver_connection

KEY = b"pending-sends-key-0123456789abcd"


def _scenario(saver: BaseCheckpointSaver[Any]) -> list[Any]:
    config: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    first = empty_checkpoint()
    config = saver.put(config, first, {"source": "input", "step": -1}, {})
    saver.put_writes(config, [(TASKS, Send("node", "a")), (TASKS, Send("node", "b"))], "task-1")
    second = create_checkpoint(first, None, 1)
    assert second["v"] < 4
    second["channel_values"] = {"x": "value"}
    second["channel_versions"] = {"x": "00000000000000000000000000000001.0"}
    saver.put(config, second, {"source": "loop", "step": 0}, {"x": second["channel_versions"]["x"]})
    head = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": ""}})
    assert head is not None
    listed = list(saver.list({"configurable": {"thread_id": "t"}}, limit=5))
    return [
        head.checkpoint["channel_values"],
        head.checkpoint["channel_versions"],
        [t.checkpoint["channel_values"] for t in listed],
    ]


def test_pending_sends_of_old_checkpoints_read_as_on_the_stock_saver(postgres_url: str) -> None:
    serde = EncryptedSerializer(EnvKeyCipher(KEY))
    with saver_connection(postgres_url) as a, saver_connection(postgres_url) as b:
        stock = PostgresSaver(a, serde=serde)
        stock.setup()
        expected = _scenario(stock)
        a.execute("DELETE FROM checkpoints")
        a.execute("DELETE FROM checkpoint_writes")
        a.execute("DELETE FROM checkpoint_blobs")
        sealed = SealedSaver(PostgresSaver(b), serde=serde)
        sealed.setup()
        assert _scenario(sealed) == expected
    values = expected[0]
    assert values[TASKS] == [Send("node", "a"), Send("node", "b")]
