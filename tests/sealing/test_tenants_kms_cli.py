"""Per-tenant keys under KMS (calls counted on moto over HTTP), the CLI shred, and rewrap."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from secure_serde import EncryptedSerializer, SealedSaver, ShreddedError, TenantKeys
from secure_serde.ciphers import EnvKeyCipher, KeyRotationCipher, KmsEnvelopeCipher
from secure_serde.cli import main
from tests.ciphers.kms_support import KmsCallCounter, new_cmk
from tests.sealing.tenants_support import chat_graph, config, inner_saver

TENANTS = 5


def _kms_saver(inner: Any, keys: TenantKeys, client: Any, cmk: str) -> SealedSaver:
    serde = EncryptedSerializer(KmsEnvelopeCipher(cmk, client=client))
    saver = SealedSaver(inner, serde=serde, tenant_keys=keys)
    saver.setup()
    return saver


def _work(saver: SealedSaver, turns: int) -> None:
    graph = chat_graph(saver)
    for tenant in range(TENANTS):
        for turn in range(turns):
            graph.invoke({"said": [f"{turn}"]}, config(f"tenant-{tenant}", f"thread-{turn % 2}"))
            graph.get_state(config(f"tenant-{tenant}", f"thread-{turn % 2}"))


def test_kms_calls_grow_with_tenants_not_operations(tmp_path: Path, kms_client: Any) -> None:
    cmk = new_cmk(kms_client)
    counter = KmsCallCounter(kms_client)
    keys = TenantKeys.open(str(tmp_path / "keys.sqlite"))
    with inner_saver("sqlite", tmp_path / "checkpoints.sqlite") as inner:
        saver = _kms_saver(inner, keys, kms_client, cmk)
        _work(saver, turns=2)
        first = counter.total
        # The store identity and the tenants' wrapped keys share the cipher's cached data key.
        assert 1 <= first <= 2 + TENANTS
        counter.reset()
        _work(saver, turns=6)
        assert counter.total == 0, counter.calls
    keys.close()
    # A new process: fresh caches, one unwrap per tenant at most, whatever the operations.
    reopened = TenantKeys.open(str(tmp_path / "keys.sqlite"))
    with inner_saver("sqlite", tmp_path / "checkpoints.sqlite") as inner:
        counter.reset()
        saver = _kms_saver(inner, reopened, kms_client, cmk)
        for tenant in range(TENANTS):
            for _ in range(5):
                state = chat_graph(saver).get_state(config(f"tenant-{tenant}", "thread-0"))
                assert state.values["said"][0] == "0"
        assert 1 <= counter.calls["Decrypt"] <= 1 + TENANTS, counter.calls
        assert counter.total == counter.calls["Decrypt"]
        reopened.shred("tenant-0")
        with pytest.raises(ShreddedError):
            chat_graph(saver).get_state(config("tenant-0", "thread-0"))
    reopened.close()


def _write_two_tenants(location: str) -> None:
    keys = TenantKeys.open(location)
    with inner_saver("memory", "") as inner:
        saver = SealedSaver(
            inner,
            serde=EncryptedSerializer(EnvKeyCipher(b"cli-tests-primary-key-0123456789")),
            tenant_keys=keys,
        )
        for tenant in ("acme", "globex"):
            chat_graph(saver).invoke({"said": ["x"]}, config(tenant, "t1"))
    keys.close()


def _state(location: str, tenant: str) -> str:
    keys = TenantKeys.open(location)
    try:
        row = keys.status(tenant)
        assert row is not None
        return "shredded" if row.wrapped is None else "live"
    finally:
        keys.close()


def test_cli_shred_asks_unless_yes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    location = str(tmp_path / "keys.sqlite")
    _write_two_tenants(location)
    monkeypatch.setattr("sys.stdin", io.StringIO("globex\n"))
    assert main(["tenants", "shred", "--keys", location, "acme"]) == 1
    assert _state(location, "acme") == "live"
    monkeypatch.setattr("sys.stdin", io.StringIO("acme\n"))
    assert main(["tenants", "shred", "--keys", location, "acme"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["tenant"] == "acme"
    assert out["already_shredded"] is False
    assert _state(location, "acme") == "shredded"
    assert _state(location, "globex") == "live"
    assert main(["tenants", "shred", "--keys", location, "acme", "--yes"]) == 0
    assert json.loads(capsys.readouterr().out.strip())["already_shredded"] is True
    assert main(["tenants", "shred", "--keys", location, "initech", "--yes"]) == 2
    assert "no key for tenant 'initech'" in capsys.readouterr().err
    assert main(["tenants", "shred", "--keys", location, "globex", "--thread", "t1", "--yes"]) == 0
    assert json.loads(capsys.readouterr().out.strip())["thread"] == "t1"
    assert _state(location, "globex") == "live"


def test_rewrap_moves_tenant_keys_to_the_new_primary(tmp_path: Path) -> None:
    old_key, new_key = b"rewrap-tests-old-key-0123456789a", b"rewrap-tests-new-key-0123456789b"
    before = EncryptedSerializer(KeyRotationCipher({"old": old_key}, "old"))
    after = EncryptedSerializer(KeyRotationCipher({"old": old_key, "new": new_key}, "new"))
    only_new = EncryptedSerializer(KeyRotationCipher({"new": new_key}, "new"))
    keys = TenantKeys.open(str(tmp_path / "keys.sqlite"))
    with inner_saver("memory", "") as inner:
        saver = SealedSaver(inner, serde=before, tenant_keys=keys)
        for tenant in ("acme", "globex", "initech"):
            chat_graph(saver).invoke({"said": [tenant]}, config(tenant, "t1"))
        keys.shred("initech")
        dry = keys.rewrap(after, dry_run=True)
        assert (dry.examined, dry.rewrapped, dry.shredded, dry.failed) == (3, 2, 1, ())
        assert keys.rewrap(after, dry_run=True).rewrapped == 2  # nothing was written
        done = keys.rewrap(after)
        assert (done.rewrapped, done.current) == (2, 0)
        again = keys.rewrap(after)
        assert (again.rewrapped, again.current) == (0, 2)
        # Every tenant still reads under the rotated keyring.
        rotated = TenantKeys.open(str(tmp_path / "keys.sqlite"))
        reader = SealedSaver(inner, serde=after, tenant_keys=rotated)
        assert chat_graph(reader).get_state(config("acme", "t1")).values["said"][0] == "acme"
        rotated.close()
        fresh = TenantKeys.open(str(tmp_path / "keys.sqlite"))
        assert fresh.rewrap(only_new).current == 2
        fresh.close()
    keys.close()
