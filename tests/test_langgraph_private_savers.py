"""Pins on the private names of langgraph's stock savers that the sealed savers rely on.

Every one is listed, with its reason, in secure_serde/_langgraph.py
(`POSTGRES_SAVER_HOOKS`, `SQLITE_SAVER_PRIVATES`). These tests fail loudly
when an upgrade renames one, changes its signature, stops calling it from
the public method we rely on, or changes the body of a hook whose logic
the bound path re-implements; and when secure_serde starts touching a
private name anywhere but that one module.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import sqlite3
import textwrap
import tomllib
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import closing
from contextvars import ContextVar
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any

import pytest
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver as StockSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver as StockAsyncSaver
from langgraph.checkpoint.postgres.base import BasePostgresSaver, _build_delta_stage2_sql
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver as StockSqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver as StockAsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

import secure_serde
from secure_serde import EncryptedSerializer
from secure_serde import _langgraph as lg
from secure_serde._migration import Migration
from secure_serde.ciphers import EnvKeyCipher
from secure_serde.savers._v03_postgres import AsyncPostgresSaver, PostgresSaver
from secure_serde.savers._v03_sqlite import AsyncSqliteSaver, SqliteSaver

REPO = Path(__file__).resolve().parents[1]
PACKAGE = Path(secure_serde.__file__).parent
KEY = b"private-hooks-key-0123456789abcd"

# The stock classes whose private names count as langgraph's.
STOCK_CLASSES: tuple[type, ...] = (
    BaseCheckpointSaver,
    InMemorySaver,
    BasePostgresSaver,
    StockSaver,
    StockAsyncSaver,
    StockSqliteSaver,
    StockAsyncSqliteSaver,
    JsonPlusSerializer,
)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


STOCK_PRIVATE: frozenset[str] = frozenset(
    name for cls in STOCK_CLASSES for name in dir(cls) if _private(name)
) | frozenset(  # instance attributes the stock savers set, not visible on the class
    {"_has_task_path", "_unpack_ext_hook", "_allowed_msgpack_modules"}
)


def _params(function: Any) -> tuple[str, ...]:
    return tuple(inspect.signature(function).parameters)


def _self_attributes(function: Any) -> set[str]:
    """Every ``self.<name>`` a function's body reads or calls."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    }


# --- the registry matches the stock savers ---------------------------------------------------

HOOK_IDS = [hook.name for hook in lg.POSTGRES_SAVER_HOOKS]


@pytest.mark.parametrize("hook", lg.POSTGRES_SAVER_HOOKS, ids=HOOK_IDS)
def test_postgres_hook_exists_with_its_signature(hook: lg.PrivateName) -> None:
    for stock in (StockSaver, StockAsyncSaver):
        assert _params(getattr(stock, hook.name)) == hook.params, (stock, hook.name)
    assert hook.why


@pytest.mark.parametrize("hook", lg.POSTGRES_SAVER_HOOKS, ids=HOOK_IDS)
def test_stock_public_methods_still_reach_the_hook(hook: lg.PrivateName) -> None:
    for stock, callers in ((StockSaver, hook.callers), (StockAsyncSaver, hook.async_callers)):
        assert callers
        for caller in callers:
            assert hook.name in _self_attributes(getattr(stock, caller)), (stock, caller)


def test_sqlite_private_flag_is_set_by_setup_and_read_by_the_reads() -> None:
    (flag,) = lg.SQLITE_SAVER_PRIVATES
    for stock, callers in (
        (StockSqliteSaver, flag.callers),
        (StockAsyncSqliteSaver, flag.async_callers),
    ):
        assert getattr(stock, flag.name) is True
        assert flag.name in _self_attributes(stock.setup)
        for caller in callers:
            assert flag.name in _self_attributes(getattr(stock, caller)), (stock, caller)


# The stock bodies the bound path re-implements (savers/_postgres_bound.py),
# as a digest of their syntax tree (formatting and comments do not count).
# A new digest means langgraph changed the logic: re-read the stock hook,
# bring the copy in line, then record the digest printed by the failure.
COPIED_BODIES: dict[tuple[str, str], str] = {
    ("BasePostgresSaver", "_dump_blobs"): "f4b564f4339f3861",
    ("BasePostgresSaver", "_dump_writes"): "8ba3f233b0372f8c",
    ("PostgresSaver", "_load_checkpoint_tuple"): "149c88a14700b430",
    ("AsyncPostgresSaver", "_load_checkpoint_tuple"): "d325a1bac338c77c",
    ("BasePostgresSaver", "_build_delta_channels_writes_history"): "1a8914f9f3259a74",
}


def body_digest(function: Any) -> str:
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    return hashlib.sha256(ast.dump(tree).encode()).hexdigest()[:16]


def test_copied_hook_bodies_are_the_ones_we_copied() -> None:
    classes = {c.__name__: c for c in (BasePostgresSaver, StockSaver, StockAsyncSaver)}
    copied = {hook.name for hook in lg.POSTGRES_SAVER_HOOKS if hook.copied}
    assert {name for _, name in COPIED_BODIES} == copied
    found = {
        (owner, name): body_digest(vars(classes[owner])[name]) for owner, name in COPIED_BODIES
    }
    assert found == COPIED_BODIES, "langgraph changed a hook body we re-implement: " + repr(found)


def test_delta_rows_say_their_kind_as_we_read_it() -> None:
    sql = _build_delta_stage2_sql(channels_with_chain=["a"], channels_with_seed=["b"])
    assert "'w'::text AS _kind" in sql
    assert "'b'::text AS _kind" in sql
    assert lg.delta_row_is_write({"_kind": "w"}) is True
    assert lg.delta_row_is_write({"_kind": "b"}) is False


# --- secure_serde touches them only through _langgraph.py ------------------------------------


def _decorated_with_hook(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "postgres_hook" for d in function.decorator_list)


def _is_super_call(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "super"
    )


def private_touches(path: Path) -> list[str]:
    """Every private langgraph name ``path`` touches other than as a marked override."""
    tree = ast.parse(path.read_text())
    found: list[str] = []
    hooks: dict[int, str] = {}  # line span of each marked override -> its name
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in STOCK_PRIVATE:
            if _decorated_with_hook(node):
                for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                    hooks[line] = node.name
            else:
                found.append(f"{path.name}:{node.lineno} overrides {node.name}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("langgraph"):
            module_private = any(_private(part) for part in (node.module or "").split("."))
            names = [a.name for a in node.names if _private(a.name)]
            if module_private or names:
                found.append(f"{path.name}:{node.lineno} imports {node.module} {names}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in STOCK_PRIVATE:
            # super()._hook(...) inside the marked override of that same hook.
            if _is_super_call(node.value) and hooks.get(node.lineno) == node.attr:
                continue
            found.append(f"{path.name}:{node.lineno} reads .{node.attr}")
        elif isinstance(node, ast.Constant) and node.value in STOCK_PRIVATE:
            # getattr(saver, "_name"), row["_kind"]
            found.append(f"{path.name}:{node.lineno} names {node.value!r}")
    return found


def test_no_private_langgraph_name_outside_the_one_module() -> None:
    touches = [
        touch
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "_langgraph.py"
        for touch in private_touches(path)
    ]
    assert touches == []


def test_the_scan_sees_a_private_touch(tmp_path: Path) -> None:
    leaky = tmp_path / "leaky.py"
    leaky.write_text(
        "from langgraph.checkpoint.serde.jsonplus import _msgpack_default\n"
        "class S:\n"
        "    def _dump_blobs(self): ...\n"
        "def f(saver):\n"
        "    with saver._cursor() as cur:\n"
        "        return saver._has_task_path, getattr(saver, '_cursor')\n"
    )
    assert len(private_touches(leaky)) == 5


def _private_overrides(sealed: type, stock: type) -> dict[str, Any]:
    return {
        name: attr
        for klass in sealed.__mro__
        if klass.__module__.startswith("secure_serde")
        for name, attr in vars(klass).items()
        if _private(name) and hasattr(stock, name)
    }


def test_every_override_is_declared_and_marked() -> None:
    declared = {hook.name for hook in lg.POSTGRES_SAVER_HOOKS}
    for sealed, stock in ((PostgresSaver, StockSaver), (AsyncPostgresSaver, StockAsyncSaver)):
        overrides = _private_overrides(sealed, stock)
        assert set(overrides) == declared - {"_cursor"}  # _cursor is called, not overridden
        for name, attr in overrides.items():
            assert vars(attr)["__secure_serde_hook__"].name == name
    # The sealed SQLite savers override public methods only.
    assert _private_overrides(SqliteSaver, StockSqliteSaver) == {}
    assert _private_overrides(AsyncSqliteSaver, StockAsyncSqliteSaver) == {}


def test_an_undeclared_override_fails_at_class_definition() -> None:
    with pytest.raises(KeyError, match="_load_blobs"):

        class Leaky(PostgresSaver):
            @lg.postgres_hook
            def _load_blobs(self, blob_values: Any) -> dict[str, Any]:
                return {}


# --- each touched package is capped at its next major version --------------------------------

TOUCHED = ("langgraph-checkpoint", "langgraph-checkpoint-postgres", "langgraph-checkpoint-sqlite")


def test_touched_packages_are_capped_below_their_next_major() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        requirements += extra
    for package in TOUCHED:
        major = int(metadata.version(package).split(".")[0])
        specs = [r for r in requirements if r.split(">")[0].split("<")[0].strip() == package]
        assert specs, package
        for spec in specs:
            assert f",<{major + 1}" in spec, spec


# --- the hooks are really called, on a real database ------------------------------------------


def extend(state: list[str], writes: Sequence[list[str]]) -> list[str]:
    return [*state, *(item for write in writes for item in write)]


class LogState(TypedDict, total=False):
    log: Annotated[list[str], DeltaChannel(extend, snapshot_frequency=2)]
    step: int


def build_graph(checkpointer: Any) -> Any:
    def work(state: LogState) -> dict[str, Any]:
        n = state.get("step", 0) + 1
        return {"log": [f"step {n}"], "step": n}

    def route(state: LogState) -> str:
        return "work" if state["step"] < 4 else END

    builder = StateGraph(LogState)
    builder.add_node("work", work)
    builder.add_edge(START, "work")
    builder.add_conditional_edges("work", route)
    return builder.compile(checkpointer=checkpointer)


class Spy:
    """Records which private hook each public method of one saver reached.

    The current public method is a context variable: the graph runs puts on
    background threads and tasks, which copy the context they start from.
    """

    def __init__(self) -> None:
        self.public: ContextVar[str | None] = ContextVar("public", default=None)
        self.pairs: set[tuple[str, str]] = set()

    def hook(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            public = self.public.get()
            if public is not None:
                self.pairs.add((public, name))
            return method(*args, **kwargs)

        return call

    def sync(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            token = self.public.set(name)
            try:
                return method(*args, **kwargs)
            finally:
                self.public.reset(token)

        return call

    def sync_iter(self, name: str, method: Callable[..., Iterator[Any]]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Iterator[Any]:
            token = self.public.set(name)
            try:
                yield from method(*args, **kwargs)
            finally:
                self.public.reset(token)

        return call

    def coroutine(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        async def call(*args: Any, **kwargs: Any) -> Any:
            token = self.public.set(name)
            try:
                return await method(*args, **kwargs)
            finally:
                self.public.reset(token)

        return call

    def async_iter(
        self, name: str, method: Callable[..., AsyncIterator[Any]]
    ) -> Callable[..., Any]:
        async def call(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            token = self.public.set(name)
            try:
                async for item in method(*args, **kwargs):
                    yield item
            finally:
                self.public.reset(token)

        return call


def spy_on(saver: Any, *, asynchronous: bool) -> Spy:
    spy = Spy()
    for hook in lg.POSTGRES_SAVER_HOOKS:
        setattr(saver, hook.name, spy.hook(hook.name, getattr(saver, hook.name)))
    if asynchronous:
        for name in ("aput", "aput_writes", "aget_tuple", "aget_delta_channel_history"):
            setattr(saver, name, spy.coroutine(name, getattr(saver, name)))
        saver.alist = spy.async_iter("alist", saver.alist)
    else:
        for name in ("put", "put_writes", "get_tuple", "get_delta_channel_history"):
            setattr(saver, name, spy.sync(name, getattr(saver, name)))
        saver.list = spy.sync_iter("list", saver.list)
    return spy


def expected_pairs(*, asynchronous: bool) -> set[tuple[str, str]]:
    return {
        (caller, hook.name)
        for hook in lg.POSTGRES_SAVER_HOOKS
        for caller in (hook.async_callers if asynchronous else hook.callers)
    }


def test_sync_hooks_are_reached_on_a_real_database(postgres_url: str) -> None:
    serde = EncryptedSerializer(EnvKeyCipher(key=KEY))
    with PostgresSaver.from_conn_string(postgres_url, serde=serde) as saver:
        saver.setup()
        spy = spy_on(saver, asynchronous=False)
        graph = build_graph(saver)
        config: Any = {"configurable": {"thread_id": "t"}}
        assert graph.invoke({"step": 0}, config)["log"] == [f"step {n}" for n in range(1, 5)]
        assert len(list(saver.list(config, filter={"step": 2}))) == 1
        history = saver.get_delta_channel_history(config=config, channels=["log"])
        assert history["log"]["writes"] or "seed" in history["log"]
    assert expected_pairs(asynchronous=False) <= spy.pairs


async def test_async_hooks_are_reached_on_a_real_database(postgres_url: str) -> None:
    serde = EncryptedSerializer(EnvKeyCipher(key=KEY))
    async with AsyncPostgresSaver.from_conn_string(postgres_url, serde=serde) as saver:
        await saver.setup()
        spy = spy_on(saver, asynchronous=True)
        graph = build_graph(saver)
        config: Any = {"configurable": {"thread_id": "t"}}
        result = await graph.ainvoke({"step": 0}, config)
        assert result["log"] == [f"step {n}" for n in range(1, 5)]
        assert len([t async for t in saver.alist(config, filter={"step": 2})]) == 1
        history = await saver.aget_delta_channel_history(config=config, channels=["log"])
        assert history["log"]["writes"] or "seed" in history["log"]
    assert expected_pairs(asynchronous=True) <= spy.pairs


def test_sqlite_saver_reads_the_flag_on_a_pre_task_path_file(tmp_path: Path) -> None:
    """A read-only database from before ``writes.task_path`` (so written by the stock saver):
    setup() clears the flag, and the sealed saver's reads follow it, where the current
    column list would fail on this schema."""
    path = tmp_path / "old.sqlite"
    serde = EncryptedSerializer(EnvKeyCipher(key=KEY))
    config: Any = {"configurable": {"thread_id": "t"}}
    with StockSqliteSaver.from_conn_string(str(path)) as stock:
        stock.serde = serde
        build_graph(stock).invoke({"step": 0}, config)
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("SELECT count(*) FROM writes").fetchone()[0] > 0
        conn.execute("ALTER TABLE writes DROP COLUMN task_path")
        conn.commit()
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as read_only:
        # The stock saver's rows: unbound, and their metadata in plaintext.
        migration = Migration(unbound=True, plaintext_metadata=True)
        saver = SqliteSaver(read_only, serde=serde, migration=migration)
        saver.setup()
        assert lg.sqlite_has_task_path(saver) is False
        loaded = saver.get_tuple(config)
        assert loaded is not None
        assert loaded.checkpoint["channel_values"]["step"] == 4
        listed = list(saver.list(config))
        assert len(listed) > 4
        assert any(t.pending_writes for t in listed)
