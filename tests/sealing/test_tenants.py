"""Per-tenant keys over real inner savers and real key stores: isolation, shredding, backups."""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint

from secure_serde import (
    ConfigurationError,
    DecryptionError,
    SealedSaver,
    ShreddedError,
    TenantKeys,
    TenantRequiredError,
    UnknownTenantError,
)
from secure_serde.sealing._walks import overrides
from tests.fixtures_services import PostgresServer, pg_dump
from tests.sealing.tenants_support import (
    INNERS,
    KEY_STORES,
    chat_graph,
    config,
    inner_saver,
    new_database,
    sealed,
)


@pytest.fixture
def make_db(postgres_server: PostgresServer) -> Iterator[Any]:
    """Creates fresh PostgreSQL databases (the checkpoint store, the key store: never one)."""
    with contextlib.ExitStack() as made:
        yield lambda: made.enter_context(new_database(postgres_server, "tenants"))


def _where(kind: str, tmp_path: Path, make_db: Any) -> str:
    if kind == "sqlite":
        return str(tmp_path / "checkpoints.sqlite")
    if kind == "postgres":
        return str(make_db())
    return ""


@pytest.fixture(params=KEY_STORES)
def keys(request: pytest.FixtureRequest, tmp_path: Path, make_db: Any) -> Iterator[TenantKeys]:
    location = str(tmp_path / "keys.sqlite") if request.param == "sqlite" else make_db()
    opened = TenantKeys.open(location)
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(params=INNERS)
def inner(
    request: pytest.FixtureRequest, tmp_path: Path, make_db: Any
) -> Iterator[BaseCheckpointSaver[Any]]:
    with inner_saver(request.param, _where(request.param, tmp_path, make_db)) as made:
        yield made


def _said(saver: SealedSaver, tenant: str, thread: str) -> list[str]:
    state = chat_graph(saver).get_state(config(tenant, thread))
    return list(state.values.get("said", []))


def _turn(saver: SealedSaver, tenant: str, thread: str, text: str) -> None:
    chat_graph(saver).invoke({"said": [text]}, config(tenant, thread))


def test_same_thread_ids_in_two_tenants_stay_apart(
    inner: BaseCheckpointSaver[Any], keys: TenantKeys
) -> None:
    saver = sealed(inner, keys)
    _turn(saver, "acme", "t1", "a secret of acme")
    _turn(saver, "globex", "t1", "a secret of globex")
    _turn(saver, "acme", "t1", "more of acme")
    assert _said(saver, "acme", "t1") == [
        "a secret of acme",
        "echo 1",
        "more of acme",
        "echo 3",
    ]
    assert _said(saver, "globex", "t1") == ["a secret of globex", "echo 1"]
    # The inner saver holds the two threads apart, and neither under its plain id or tenant.
    threads = {str(t.config["configurable"]["thread_id"]) for t in inner.list(None)} - {
        "__secure_serde_store__"
    }
    assert len(threads) == 2
    assert not any(t == "t1" or "acme" in t or "globex" in t for t in threads)
    assert {t.config["configurable"]["thread_id"] for t in saver.for_tenant("acme").list(None)} == {
        "t1"
    }


def test_a_row_of_one_tenant_moved_into_anothers_thread_is_refused(
    inner: BaseCheckpointSaver[Any], keys: TenantKeys
) -> None:
    saver = sealed(inner, keys)
    _turn(saver, "globex", "t1", "globex first")
    _turn(saver, "acme", "t1", "acme later")
    acme_thread, globex_thread = (
        next(
            str(t.config["configurable"]["thread_id"])
            for t in inner.list(None)
            if t.metadata.get("__secure_serde_tenant__") == token
        )
        for token in (_token(saver, "acme"), _token(saver, "globex"))
    )
    planted = next(iter(inner.list({"configurable": {"thread_id": acme_thread}})))
    versions = dict(planted.checkpoint["channel_versions"])
    inner.put(
        {"configurable": {"thread_id": globex_thread, "checkpoint_ns": ""}},
        planted.checkpoint,
        planted.metadata,
        versions,
    )
    with pytest.raises(DecryptionError):
        _said(saver, "globex", "t1")
    assert _said(saver, "acme", "t1") == ["acme later", "echo 1"]


def _token(saver: SealedSaver, tenant: str) -> str:
    token = saver.for_tenant(tenant)._ready().token  # type: ignore[attr-defined]
    assert isinstance(token, str)
    return token


def test_shredding_a_tenant_leaves_the_others_whole(
    inner: BaseCheckpointSaver[Any], keys: TenantKeys, caplog: pytest.LogCaptureFixture
) -> None:
    saver = sealed(inner, keys)
    for tenant in ("acme", "globex"):
        _turn(saver, tenant, "t1", f"{tenant} one")
        _turn(saver, tenant, "t2", f"{tenant} two")
    with caplog.at_level(logging.INFO, logger="secure_serde"):
        result = keys.shred("acme")
    assert not result.already
    assert "shredded the key of tenant 'acme'" in caplog.text
    for thread in ("t1", "t2"):
        with pytest.raises(ShreddedError) as raised:
            _said(saver, "acme", thread)
        assert not isinstance(raised.value, DecryptionError)
        assert raised.value.tenant_id == "acme"
        assert _said(saver, "globex", thread) == [
            f"globex {'one' if thread == 't1' else 'two'}",
            "echo 1",
        ]
    with pytest.raises(ShreddedError):
        _turn(saver, "acme", "t3", "a new thread after the shred")
    with pytest.raises(ShreddedError):
        list(saver.for_tenant("acme").list(None))
    # A new process (fresh caches) sees the same.
    fresh = sealed(inner, keys)
    with pytest.raises(ShreddedError):
        _said(fresh, "acme", "t1")
    assert _said(fresh, "globex", "t2") == ["globex two", "echo 1"]
    again = keys.shred("acme")
    assert again.already
    assert again.shredded_at == result.shredded_at
    with pytest.raises(UnknownTenantError):
        keys.shred("initech")
    status = keys.status("acme")
    assert status is not None
    assert status.wrapped is None
    assert status.shredded


def test_shredding_a_thread_erases_that_thread_only(
    inner: BaseCheckpointSaver[Any], keys: TenantKeys
) -> None:
    saver = sealed(inner, keys)
    for tenant in ("acme", "globex"):
        for thread in ("t1", "t2"):
            _turn(saver, tenant, thread, f"{tenant} {thread}")
    keys.shred_thread("acme", "t1")
    with pytest.raises(ShreddedError) as raised:
        _said(saver, "acme", "t1")
    assert raised.value.thread_id == "t1"
    assert _said(saver, "acme", "t2") == ["acme t2", "echo 1"]
    assert _said(saver, "globex", "t1") == ["globex t1", "echo 1"]
    assert keys.shred_thread("acme", "t1").already
    with pytest.raises(UnknownTenantError):
        keys.shred_thread("acme", "never-written")


def test_calls_without_a_tenant_are_refused(
    inner: BaseCheckpointSaver[Any], keys: TenantKeys
) -> None:
    saver = sealed(inner, keys)
    _turn(saver, "acme", "t1", "hello")
    with pytest.raises(TenantRequiredError):
        saver.get_tuple({"configurable": {"thread_id": "t1"}})
    with pytest.raises(TenantRequiredError):
        chat_graph(saver).invoke({"said": ["x"]}, {"configurable": {"thread_id": "t9"}})
    with pytest.raises(TenantRequiredError):
        saver.list(None)
    with pytest.raises(TenantRequiredError):
        saver.list({"configurable": {"thread_id": "t1"}})
    with pytest.raises(TenantRequiredError):
        saver.delete_thread("t1")
    with pytest.raises(TenantRequiredError):
        saver.copy_thread("t1", "t2")
    # prune and delete_for_runs exist where the inner saver has them; refused here too.
    if overrides(inner, "prune"):
        with pytest.raises(TenantRequiredError):
            saver.prune(["t1"])
    if overrides(inner, "delete_for_runs"):
        with pytest.raises(TenantRequiredError):
            saver.delete_for_runs(["r"])
    with pytest.raises(TenantRequiredError):
        saver.get_tuple({"configurable": {"thread_id": "t1", "tenant_id": 7}})
    scoped = saver.for_tenant("acme")
    with pytest.raises(TenantRequiredError):
        scoped.get_tuple(config("globex", "t1"))
    # The scoped view does what the unscoped one refuses.
    scoped.copy_thread("t1", "t1-copy")
    assert _said(saver, "acme", "t1-copy") == ["hello", "echo 1"]
    scoped.delete_thread("t1")
    assert saver.get_tuple(config("acme", "t1")) is None
    assert [t.config["configurable"]["thread_id"] for t in scoped.list(None)] == ["t1-copy"] * 3


async def test_reindex_is_refused_on_the_routing_and_the_tenant_saver(
    inner: BaseCheckpointSaver[Any], keys: TenantKeys
) -> None:
    # Per-tenant tokens are keyed by the tenant's keys; reindex rotates the store's own
    # index key. A tenant's saver used to fail later, naming a missing store identity.
    saver = sealed(inner, keys)
    _turn(saver, "acme", "t1", "hello")
    before = [t.checkpoint["id"] for t in saver.list(config("acme", "t1"))]
    for target in (saver, saver.for_tenant("acme")):
        for dry_run in (True, False):
            with pytest.raises(ConfigurationError, match="per-tenant index keys"):
                target.reindex(dry_run=dry_run)
            with pytest.raises(ConfigurationError, match="per-tenant index keys"):
                await target.areindex(dry_run=dry_run)
    assert [t.checkpoint["id"] for t in saver.list(config("acme", "t1"))] == before
    assert _said(saver, "acme", "t1") == ["hello", "echo 1"]


def _restore_sqlite(copy: Path, target: Path) -> None:
    shutil.copyfile(copy, target)


def test_a_sqlite_copy_taken_before_the_shred_stays_unreadable(
    tmp_path: Path, keys: TenantKeys
) -> None:
    path = tmp_path / "checkpoints.sqlite"
    with inner_saver("sqlite", path) as inner:
        saver = sealed(inner, keys)
        _turn(saver, "acme", "t1", "acme before")
        _turn(saver, "globex", "t1", "globex before")
    backup = tmp_path / "backup.sqlite"
    shutil.copyfile(path, backup)
    keys.shred("acme")
    path.unlink()
    _restore_sqlite(backup, path)
    with inner_saver("sqlite", path) as inner:
        restored = sealed(inner, keys)
        with pytest.raises(ShreddedError):
            _said(restored, "acme", "t1")
        assert _said(restored, "globex", "t1") == ["globex before", "echo 1"]


def test_a_pg_dump_taken_before_the_shred_stays_unreadable(
    postgres_server: PostgresServer, make_db: Any, keys: TenantKeys
) -> None:
    url = make_db()
    with inner_saver("postgres", url) as inner:
        saver = sealed(inner, keys)
        _turn(saver, "acme", "t1", "acme before")
        _turn(saver, "globex", "t1", "globex before")
    dump = pg_dump(postgres_server, url)
    assert b"acme before" not in dump
    keys.shred("acme")
    restored_url = make_db()
    proc = subprocess.run(
        [str(postgres_server.bindir / "psql"), "-q", "-v", "ON_ERROR_STOP=1", restored_url],
        input=dump,
        capture_output=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    with inner_saver("postgres", restored_url) as inner:
        restored = sealed(inner, keys)
        with pytest.raises(ShreddedError):
            _said(restored, "acme", "t1")
        assert _said(restored, "globex", "t1") == ["globex before", "echo 1"]


def test_a_shred_racing_writes_loses_nothing_of_other_tenants(
    inner: BaseCheckpointSaver[Any], keys: TenantKeys
) -> None:
    saver = sealed(inner, keys)
    _turn(saver, "acme", "warm", "warm")
    errors: list[BaseException] = []
    turns = 6

    def write(tenant: str, thread: str) -> None:
        try:
            for i in range(turns):
                _turn(saver, tenant, thread, f"{tenant} {thread} {i}")
        except ShreddedError:
            if tenant != "acme":
                raise
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    workers = [
        threading.Thread(target=write, args=(tenant, f"w{n}"))
        for tenant in ("acme", "globex")
        for n in range(2)
    ]
    for worker in workers:
        worker.start()
    keys.shred("acme")
    for worker in workers:
        worker.join()
    assert errors == []
    for n in range(2):
        said = _said(saver, "globex", f"w{n}")
        assert [s for s in said if s.startswith("globex")] == [
            f"globex w{n} {i}" for i in range(turns)
        ]
        # Whatever acme wrote before the shred is unreadable (a thread it never reached is empty).
        try:
            left = _said(saver, "acme", f"w{n}")
        except ShreddedError:
            left = []
        assert left == []
    with pytest.raises(ShreddedError):
        _said(saver, "acme", "warm")


def test_real_graphs_for_two_tenants_in_parallel(
    inner: BaseCheckpointSaver[Any], keys: TenantKeys
) -> None:
    saver = sealed(inner, keys)
    results: dict[str, list[str]] = {}
    errors: list[BaseException] = []

    def run(tenant: str) -> None:
        try:
            for i in range(4):
                _turn(saver, tenant, "shared-id", f"{tenant} {i}")
            results[tenant] = _said(saver, tenant, "shared-id")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(t,)) for t in ("acme", "globex")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert errors == []
    for tenant in ("acme", "globex"):
        assert results[tenant][::2] == [f"{tenant} {i}" for i in range(4)]
        history = list(chat_graph(saver).get_state_history(config(tenant, "shared-id")))
        assert len(history) == 4 * 3


async def test_async_graph_per_tenant(keys: TenantKeys) -> None:
    with inner_saver("memory", "") as inner:
        saver = sealed(inner, keys)
        graph = chat_graph(saver)
        await graph.ainvoke({"said": ["async acme"]}, config("acme", "t1"))
        await graph.ainvoke({"said": ["async globex"]}, config("globex", "t1"))
        state = await graph.aget_state(config("acme", "t1"))
        assert state.values["said"] == ["async acme", "echo 1"]
        keys.shred("globex")
        with pytest.raises(ShreddedError):
            await graph.aget_state(config("globex", "t1"))
        with pytest.raises(TenantRequiredError):
            await saver.adelete_thread("t1")
        with pytest.raises(TenantRequiredError):
            saver.alist(None)
        scoped = saver.for_tenant("acme")
        assert len([t async for t in scoped.alist(None)]) == 3
        await scoped.adelete_thread("t1")
        assert await saver.aget_tuple(config("acme", "t1")) is None


def test_a_wrapped_key_moved_to_another_tenant_does_not_unwrap(tmp_path: Path) -> None:
    import sqlite3

    location = tmp_path / "keys.sqlite"
    keys = TenantKeys.open(str(location))
    with inner_saver("memory", "") as inner:
        saver = sealed(inner, keys)
        _turn(saver, "acme", "t1", "acme")
        _turn(saver, "globex", "t1", "globex")
        keys.close()
        with sqlite3.connect(location) as db:
            wrapped = db.execute(
                "SELECT wrapped FROM secure_serde_tenant_keys WHERE tenant = 'acme' AND scope = ''"
            ).fetchone()[0]
            db.execute(
                "UPDATE secure_serde_tenant_keys SET wrapped = ? WHERE tenant = 'globex'"
                " AND scope = ''",
                (wrapped,),
            )
        db.close()
        reopened = TenantKeys.open(str(location))
        try:
            with pytest.raises(DecryptionError):
                _said(sealed(inner, reopened), "globex", "t1")
            assert _said(sealed(inner, reopened), "acme", "t1") == ["acme", "echo 1"]
        finally:
            reopened.close()


def test_nothing_secret_in_reprs(keys: TenantKeys) -> None:
    import pickle

    with inner_saver("memory", "") as inner:
        saver = sealed(inner, keys)
        _turn(saver, "acme", "t1", "x")
        assert "tenant_keys=TenantKeys(" in repr(saver)
        assert "acme" in repr(saver.for_tenant("acme"))
        with pytest.raises(TypeError):
            pickle.dumps(keys)
        status = keys.status("acme")
        assert status is not None
        assert "wrapped" not in repr(status)


def test_tenant_store_ids_are_injective() -> None:
    from secure_serde.sealing._tenant_inner import tenant_store_id

    store = bytes(16)
    ids = {tenant_store_id(store, t) for t in ("a", "ab", "a\x00", "b", "")}
    assert len(ids) == 5
    assert empty_checkpoint()["v"] >= 1  # the langgraph import above is used
