"""KMS across forked rewrap workers (issue 9): each worker builds its own client, or rewrap refuses.

A boto3 client's pooled HTTP connections must not be shared between
processes. The Python `rewrap(..., workers > 1)` used to fork workers that
all used the parent's client; now each worker calls
`KmsEnvelopeCipher.renew_client` first, and a cipher built on the caller's
own client (which the cipher cannot rebuild) is refused before anything is
written. Real PostgreSQL, real HTTP to the suite's moto server.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.connection import Connection
from typing import Any

import pytest

from secure_serde import ConfigurationError, EncryptedSerializer, rewrap
from secure_serde.ciphers import KmsEnvelopeCipher
from secure_serde.stores import PostgresStore
from tests.ciphers.kms_support import new_cmk
from tests.cli.cli_support import run_main
from tests.passes.rewrap_support import (
    KEY_A,
    clone_postgres_threads,
    header_key_ids,
    histories,
    postgres_graph,
    rotation_serde,
    run_turns,
)


@pytest.fixture
def boto_env(kms_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """boto3's default session pointed at the moto server, as an operator would configure it."""
    for name, value in {
        "AWS_ENDPOINT_URL_KMS": kms_endpoint,
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


class _SharedCallCount:
    """Counts the KMS calls one client makes, in whichever forked process makes them."""

    def __init__(self, client: Any) -> None:
        self._count = multiprocessing.get_context("fork").Value("i", 0)
        client.meta.events.register("before-call.kms.*", self._on_call)

    def _on_call(self, **_: Any) -> None:
        with self._count.get_lock():
            self._count.value += 1

    @property
    def value(self) -> int:
        return int(self._count.value)


def _seed(url: str) -> dict[str, list[Any]]:
    with postgres_graph(url, rotation_serde({"a": KEY_A}, "a")) as graph:
        run_turns(graph, "seed", 2)
        seeded = histories(graph, ["seed"])
    clone_postgres_threads(url, 12)
    return seeded


def _kms_rows(url: str) -> int:
    with PostgresStore(url) as store:
        return sum(1 for c in store.iter_cells() if (c.type_tag or "").endswith("+kms"))


def test_workers_refuse_a_kms_cipher_on_the_callers_client(
    postgres_url: str, kms_client: Any
) -> None:
    _seed(postgres_url)
    before = header_key_ids(postgres_url)
    target = EncryptedSerializer(
        KmsEnvelopeCipher(new_cmk(kms_client), client=kms_client),
        decrypt_only=[rotation_serde({"a": KEY_A}, "a").cipher],
    )
    with pytest.raises(ConfigurationError, match="client=None") as info:
        rewrap(postgres_url, target, workers=2)
    assert "workers=1" in str(info.value)
    assert header_key_ids(postgres_url) == before  # refused before any worker wrote
    # One process may use the caller's client.
    assert rewrap(postgres_url, target, workers=1).ok


def test_each_worker_builds_its_own_kms_client(
    postgres_url: str, kms_client: Any, boto_env: None
) -> None:
    seeded = _seed(postgres_url)
    cipher = KmsEnvelopeCipher(new_cmk(kms_client))  # built from boto3's default session
    cipher.encrypt(b"warm: the parent's pool now holds a live connection")
    inherited = _SharedCallCount(cipher.client)
    target = EncryptedSerializer(cipher, decrypt_only=[rotation_serde({"a": KEY_A}, "a").cipher])
    report = rewrap(postgres_url, target, workers=2)
    assert report.ok
    assert report.workers == 2
    assert report.rewrapped > 0
    # Every KMS call went through the workers' own clients: the parent's
    # client, inherited by both workers, made none (its hook counts in
    # shared memory, so calls made in a child would show here).
    assert inherited.value == 0
    cipher.clear()
    cipher.encrypt(b"the parent's own client still works, and is counted")
    assert inherited.value == 1
    assert _kms_rows(postgres_url) == report.rewrapped
    with postgres_graph(postgres_url, EncryptedSerializer(cipher)) as graph:
        assert histories(graph, ["seed"]) == seeded


def _child(cipher: KmsEnvelopeCipher, parent_client_id: int, conn: Connection) -> None:
    try:
        cipher.renew_client()
        name, blob = cipher.encrypt(b"from the child")
        conn.send((id(cipher.client) != parent_client_id, cipher.decrypt(name, blob)))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the test
        conn.send((False, repr(exc).encode()))
    finally:
        conn.close()


def test_renew_client_gives_a_forked_process_a_working_client_of_its_own(
    kms_client: Any, boto_env: None
) -> None:
    cipher = KmsEnvelopeCipher(new_cmk(kms_client))
    assert cipher.owns_client
    cipher.encrypt(b"warm")
    ctx = multiprocessing.get_context("fork")
    receiver, sender = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(cipher, id(cipher.client), sender))
    process.start()
    sender.close()
    assert receiver.poll(60)
    assert receiver.recv() == (True, b"from the child")
    process.join(30)
    assert process.exitcode == 0


def test_renew_client_refuses_the_callers_client(kms_client: Any) -> None:
    cipher = KmsEnvelopeCipher(new_cmk(kms_client), client=kms_client)
    assert not cipher.owns_client
    with pytest.raises(ConfigurationError, match="client=None"):
        cipher.renew_client()
    assert cipher.client is kms_client


def test_the_cli_rewraps_a_postgres_store_to_kms_with_workers(
    postgres_url: str,
    kms_client: Any,
    boto_env: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seeded = _seed(postgres_url)
    cmk = new_cmk(kms_client)
    monkeypatch.delenv("SECURE_SERDE_KEYRING_FILE", raising=False)
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY_A)
    monkeypatch.setenv("SECURE_SERDE_KMS_KEY", cmk)
    code, out, err = run_main(capsys, "rewrap", postgres_url, "--workers", "2", "--no-progress")
    assert (code, err) == (0, "")
    assert "with 2 workers" in out
    assert _kms_rows(postgres_url) > 0
    assert header_key_ids(postgres_url) == {"plain": _kms_rows(postgres_url)}
    reader = EncryptedSerializer(KmsEnvelopeCipher(cmk, client=kms_client))
    with postgres_graph(postgres_url, reader) as graph:
        assert histories(graph, ["seed"]) == seeded
