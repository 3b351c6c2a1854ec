"""``import secure_serde`` stays light: heavy packages load only with the feature that needs them.

Every check runs in a new interpreter, because this test process has long since imported
everything. Timing is not tested here; benchmarks/bench_import.py measures it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# Each needs a feature the serializer on its own does not: PostgreSQL, KMS, the pickle presets.
HEAVY = ("psycopg", "psycopg_pool", "boto3", "botocore", "pandas", "numpy")

PACKAGES = (
    "secure_serde",
    "secure_serde.passes",
    "secure_serde.ciphers",
    "secure_serde.cli",
    "secure_serde.pickling",
    "secure_serde.savers",
    "secure_serde.stores",
)


def run_python(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if result.returncode != 0:
        pytest.fail(f"child interpreter failed:\n{result.stderr}")
    return result.stdout


def loaded_after(code: str) -> set[str]:
    """Every module in ``sys.modules`` after a new interpreter runs ``code``."""
    out = run_python(
        textwrap.dedent(code) + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))\n"
    )
    return set(json.loads(out.splitlines()[-1]))


def top_level(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


def test_serializer_round_trip_loads_no_heavy_package() -> None:
    loaded = loaded_after(
        """
        import secure_serde
        serde = secure_serde.EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 32)
        value = {"messages": ["hi"], "n": 1}
        assert serde.loads_typed(serde.dumps_typed(value)) == value
        """
    )
    assert "secure_serde.serde._serializer" in loaded  # the round trip really ran
    assert top_level(loaded) & set(HEAVY) == set()
    # Nor the stores, the rewrap engine, or pycryptodome (only legacy rows need it).
    assert not {m for m in loaded if m.startswith(("secure_serde.stores", "secure_serde.passes"))}
    assert "Crypto" not in top_level(loaded)


def test_package_root_imports_only_the_errors() -> None:
    loaded = loaded_after("import secure_serde")
    ours = {m for m in loaded if m.startswith("secure_serde")}
    assert ours == {"secure_serde", "secure_serde._errors", "secure_serde._lazy"}
    assert "langgraph" not in top_level(loaded)


def test_legacy_rows_still_load_pycryptodome_on_demand() -> None:
    # Written by langgraph's built-in (EAX, pycryptodome), read by ours.
    out = run_python(
        """
        import sys
        from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as Builtin
        row = Builtin.from_pycryptodome_aes(key=b"k" * 32).dumps_typed({"a": 1})
        for name in [m for m in sys.modules if m == "Crypto" or m.startswith("Crypto.")]:
            del sys.modules[name]
        import secure_serde.crypto._primitives as primitives
        assert primitives._PyAES is None
        from secure_serde import EncryptedSerializer
        print(EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 32).loads_typed(row))
        """
    )
    assert out.strip() == "{'a': 1}"


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_name_imports_from_a_fresh_interpreter(package: str) -> None:
    out = run_python(
        f"""
        import importlib, json
        package = importlib.import_module({package!r})
        names = list(package.__all__)
        found = {{}}
        for name in names:
            namespace = {{}}
            exec(f"from {package} import {{name}}", namespace)
            value = namespace[name]
            found[name] = [getattr(package, name) is value, name in dir(package)]
        print(json.dumps(found))
        """
    )
    found = json.loads(out)
    assert found, f"{package} has an empty __all__"
    for name, (same, listed) in found.items():
        assert same, f"{package}.{name} is not the object `from {package} import` gives"
        assert listed, f"{name} missing from dir({package})"


@pytest.mark.parametrize("package", PACKAGES)
def test_unknown_name_raises_attribute_error(package: str) -> None:
    out = run_python(
        f"""
        import importlib
        package = importlib.import_module({package!r})
        try:
            package.NoSuchName
        except AttributeError as exc:
            print("AttributeError", exc)
        try:
            exec("from {package} import NoSuchName", {{}})
        except ImportError:
            print("ImportError")
        """
    )
    assert out.split()[:1] == ["AttributeError"]
    assert "NoSuchName" in out
    assert out.strip().endswith("ImportError")


def test_cli_help_imports_no_subcommand_module() -> None:
    loaded = loaded_after(
        """
        from secure_serde.cli import main
        try:
            main(["--help"])
        except SystemExit:
            pass
        """
    )
    assert not {m for m in loaded if m.startswith("secure_serde.cli._")}
    assert "langgraph" not in top_level(loaded)
    assert top_level(loaded) & set(HEAVY) == set()


def test_cli_keygen_imports_only_its_own_module() -> None:
    loaded = loaded_after(
        """
        from secure_serde.cli import main
        assert main(["keygen"]) == 0
        """
    )
    cli_modules = {m for m in loaded if m.startswith("secure_serde.cli._")}
    assert cli_modules == {"secure_serde.cli._keygen"}
    assert top_level(loaded) & set(HEAVY) == set()


def test_cli_help_lists_what_the_full_parser_lists() -> None:
    # The summaries in cli/__init__.py are each subcommand's only help.
    out = run_python(
        """
        from secure_serde.cli import build_parser
        print(build_parser("").format_help() == build_parser().format_help())
        """
    )
    assert out.strip() == "True"


def test_rewrap_on_sqlite_loads_no_postgres_driver(tmp_path: Path) -> None:
    path = tmp_path / "checkpoints.sqlite"
    loaded = loaded_after(
        f"""
        import sqlite3
        from langgraph.checkpoint.sqlite import SqliteSaver
        from secure_serde import rewrap
        from secure_serde.stores import open_store
        SqliteSaver(sqlite3.connect({str(path)!r})).setup()
        with open_store({str(path)!r}) as store:
            names = [t.name for t in store.tables]
            assert names == ["checkpoints", "writes"], names
        """
    )
    assert "secure_serde.passes._rewrap" in loaded
    assert "secure_serde.stores._sqlite" in loaded
    assert top_level(loaded) & set(HEAVY) == set()


def test_sealed_sqlite_savers_need_no_postgres_driver(tmp_path: Path) -> None:
    """The README's demo installs only the sqlite extra: no psycopg may be imported on its path.

    A PostgreSQL driver imported at module level anywhere under the sealed SQLite savers
    (copy_thread shares a module with PostgreSQL) would fail the demo on a fresh machine.
    """
    path = tmp_path / "sealed.sqlite"
    loaded = loaded_after(
        f"""
        import sys
        sys.modules["psycopg"] = None  # as if not installed: importing it raises
        from langgraph.checkpoint.base import empty_checkpoint
        from secure_serde import EncryptedSerializer
        from secure_serde.ciphers import EnvKeyCipher
        from secure_serde.savers.sqlite import SqliteSaver
        serde = EncryptedSerializer(EnvKeyCipher(b"k" * 32))
        with SqliteSaver.from_conn_string({str(path)!r}, serde=serde) as saver:
            config = {{"configurable": {{"thread_id": "t", "checkpoint_ns": ""}}}}
            saver.put(config, empty_checkpoint(), {{"source": "input", "step": -1}}, {{}})
            saver.copy_thread("t", "t2")
            assert saver.get_tuple({{"configurable": {{"thread_id": "t2"}}}}) is not None
        del sys.modules["psycopg"]  # the placeholder, not a loaded module
        """
    )
    assert "secure_serde.savers.sqlite" in loaded
    assert top_level(loaded) & set(HEAVY) == set()


def test_sealed_postgres_savers_need_no_sqlite_packages(postgres_url: str) -> None:
    """The postgres extra alone: langgraph-checkpoint-sqlite and aiosqlite are never imported."""
    loaded = loaded_after(
        f"""
        import sys
        for name in ("langgraph.checkpoint.sqlite", "aiosqlite", "sqlite3"):
            sys.modules[name] = None  # as if not installed: importing it raises
        from langgraph.checkpoint.base import empty_checkpoint
        from secure_serde import EncryptedSerializer
        from secure_serde.ciphers import EnvKeyCipher
        from secure_serde.savers.postgres import PostgresSaver
        serde = EncryptedSerializer(EnvKeyCipher(b"k" * 32))
        with PostgresSaver.from_conn_string({postgres_url!r}, serde=serde) as saver:
            saver.setup()
            config = {{"configurable": {{"thread_id": "t", "checkpoint_ns": ""}}}}
            saver.put(config, empty_checkpoint(), {{"source": "input", "step": -1}}, {{}})
            saver.copy_thread("t", "t2")
            assert saver.get_tuple({{"configurable": {{"thread_id": "t2"}}}}) is not None
        for name in ("langgraph.checkpoint.sqlite", "aiosqlite", "sqlite3"):
            del sys.modules[name]  # the placeholders, not loaded modules
        """
    )
    assert "secure_serde.savers.postgres" in loaded
    assert "aiosqlite" not in loaded


@pytest.mark.parametrize(
    ("module", "missing", "extra"),
    [
        ("secure_serde.savers.postgres", "psycopg", "postgres"),
        ("secure_serde.savers.postgres", "langgraph.checkpoint.postgres", "postgres"),
        ("secure_serde.savers.sqlite", "langgraph.checkpoint.sqlite", "sqlite"),
        ("secure_serde.savers.sqlite", "aiosqlite", "sqlite"),
    ],
)
def test_a_missing_extra_is_named(module: str, missing: str, extra: str) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules[{missing!r}] = None
        try:
            import {module}
        except ModuleNotFoundError as exc:
            print(exc)
        else:
            print("imported")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert f"pip install 'secure-serde[{extra}]'" in done.stdout, done.stdout + done.stderr
