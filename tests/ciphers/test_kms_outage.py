"""KMS outages: a moto server of its own is stopped mid-run and started again on the same port.

These tests start a separate `ThreadedMotoServer` so the session's shared
one keeps serving the other tests. What survives the restart: moto keeps
its keys in this process's memory, not in the server thread, so a server
started again on the same port serves the same CMKs, as AWS KMS does after
an outage. (A moto server running as its own process would lose them; the
data keys this process had cached would still read, but nothing else.)
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from botocore.config import Config
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from moto.server import ThreadedMotoServer

from secure_serde import (
    DecryptionError,
    EncryptedSerializer,
    EncryptionError,
    KmsDecryptionError,
    KmsEncryptionError,
)
from secure_serde.ciphers import KmsEnvelopeCipher
from tests.ciphers.kms_support import (
    KmsCallCounter,
    ManualClock,
    kms_client,
    new_cmk,
    point_boto3_at,
)
from tests.graphs_support import build_chat_graph, reply_text, transcript


class RestartableKms:
    """A moto server on a fixed loopback port that can be stopped and started again."""

    def __init__(self) -> None:
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        self._running = True
        self.host, self.port = self._server.get_host_and_port()
        self.endpoint = f"http://{self.host}:{self.port}"

    def stop(self) -> None:
        self._server.stop()
        self._running = False

    def start(self) -> None:
        self._server = ThreadedMotoServer(ip_address=self.host, port=self.port, verbose=False)
        self._server.start()
        self._running = True

    def close(self) -> None:
        if self._running:
            self.stop()


@pytest.fixture
def kms_server() -> Iterator[RestartableKms]:
    server = RestartableKms()
    try:
        yield server
    finally:
        server.close()


def _say(thread: str, turn: int) -> str:
    return f"{thread} says {turn}"


def _turn(graph: Any, thread: str, turn: int) -> None:
    graph.invoke(
        {"messages": [HumanMessage(content=_say(thread, turn))]},
        {"configurable": {"thread_id": thread}},
    )


def _expected(thread: str, turns: int) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for turn in range(turns):
        out += [("human", _say(thread, turn)), ("ai", reply_text(turn + 1, _say(thread, turn)))]
    return out


def _rows(conn: sqlite3.Connection) -> tuple[int, int]:
    checkpoints = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
    writes = conn.execute("SELECT count(*) FROM writes").fetchone()[0]
    return int(checkpoints), int(writes)


def test_a_graph_rides_out_a_kms_outage(tmp_path: Path, kms_server: RestartableKms) -> None:
    client = kms_client(kms_server.endpoint, attempts=2, timeout=1)
    counter = KmsCallCounter(client)
    cmk = new_cmk(client)
    clock = ManualClock()
    cipher = KmsEnvelopeCipher(cmk, client=client, max_age=300, decrypt_ttl=600, clock=clock)
    other_process = KmsEnvelopeCipher(cmk, client=client)
    threads = ("a", "b", "c")
    path = tmp_path / "outage.sqlite"
    with closing(sqlite3.connect(path, check_same_thread=False)) as conn:
        graph = build_chat_graph(SqliteSaver(conn, serde=EncryptedSerializer(cipher)))
        # A thread written by another process, under a data key this one never saw.
        other = build_chat_graph(SqliteSaver(conn, serde=EncryptedSerializer(other_process)))
        _turn(other, "other", 0)
        for turn in range(2):
            for thread in threads:
                _turn(graph, thread, turn)
        counter.reset()

        kms_server.stop()
        clock.advance(200)
        # Within the cache age: writes and reads of cached keys go on, with no request at all.
        for thread in threads:
            _turn(graph, thread, 2)
        for thread in threads:
            state = graph.get_state({"configurable": {"thread_id": thread}})
            assert transcript(state.values["messages"]) == _expected(thread, 3)
            assert len(list(graph.get_state_history({"configurable": {"thread_id": thread}}))) == 9
        assert counter.total == 0
        assert sum(counter.attempts.values()) == 0

        # The first read of an uncached data key fails, typed, after the client's 2 attempts.
        with pytest.raises(KmsDecryptionError) as read_error:
            graph.get_state({"configurable": {"thread_id": "other"}})
        assert isinstance(read_error.value, DecryptionError)
        assert (read_error.value.operation, read_error.value.key_arn) == ("Decrypt", cmk)
        assert read_error.value.error_code == "EndpointConnectionError"
        assert counter.attempts == {"Decrypt": 2}

        # Past the cache age, the next write needs KMS: it fails before anything is stored.
        clock.advance(101)
        before = _rows(conn)
        with pytest.raises(KmsEncryptionError) as write_error:
            _turn(graph, "a", 3)
        assert isinstance(write_error.value, EncryptionError)
        assert (write_error.value.operation, write_error.value.key_arn) == (
            "GenerateDataKey",
            cmk,
        )
        assert cmk in str(write_error.value)
        assert _rows(conn) == before
        state = graph.get_state({"configurable": {"thread_id": "a"}})
        assert transcript(state.values["messages"]) == _expected("a", 3)

        # KMS is back: the failed turn is retried and the graph resumes with nothing lost.
        kms_server.start()
        counter.reset()
        _turn(graph, "a", 3)
        for thread in ("b", "c"):
            _turn(graph, thread, 3)
        for thread in threads:
            state = graph.get_state({"configurable": {"thread_id": thread}})
            assert transcript(state.values["messages"]) == _expected(thread, 4)
        state = graph.get_state({"configurable": {"thread_id": "other"}})
        assert transcript(state.values["messages"]) == _expected("other", 1)
        assert counter.calls == {"GenerateDataKey": 1, "Decrypt": 1}

        # A cold process reads every checkpoint ever written, before and after the outage.
        cold = KmsEnvelopeCipher(cmk, client=client)
        reader = build_chat_graph(SqliteSaver(conn, serde=EncryptedSerializer(cold)))
        for thread in threads:
            history = list(reader.get_state_history({"configurable": {"thread_id": thread}}))
            assert len(history) == 12
            assert transcript(history[0].values["messages"]) == _expected(thread, 4)


@pytest.mark.parametrize(
    ("config", "attempts"), [(None, 3), (Config(retries={"total_max_attempts": 2}), 2)]
)
def test_the_client_the_cipher_builds_retries_as_configured(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kms_server: RestartableKms,
    config: Any,
    attempts: int,
) -> None:
    point_boto3_at(monkeypatch, kms_server.endpoint, tmp_path)
    cmk = new_cmk(kms_client(kms_server.endpoint))
    cipher = KmsEnvelopeCipher(cmk, botocore_config=config)
    counter = KmsCallCounter(cipher.client)
    name, blob = cipher.encrypt(b"before")  # the default session reaches moto
    assert counter.calls == {"GenerateDataKey": 1}
    kms_server.stop()
    cipher.clear()
    counter.reset()
    with pytest.raises(KmsEncryptionError) as info:
        cipher.encrypt(b"during")
    assert info.value.error_code == "EndpointConnectionError"
    assert counter.calls == {"GenerateDataKey": 1}
    assert counter.attempts == {"GenerateDataKey": attempts}
    with pytest.raises(KmsDecryptionError):
        cipher.decrypt(name, blob)
    kms_server.start()
    assert cipher.decrypt(name, blob) == b"before"
