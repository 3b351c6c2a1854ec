"""No key or DSN password in error messages, on stderr or in reprs (issue 9, issue 14 point 6).

* A key pasted where a keyring names an id (``primary``, ``retired``,
  ``legacy_key``) is never echoed, from the API or the CLI.
* Every DSN form is redacted: URL userinfo, ``password=`` in a query
  string, libpq ``key=value`` strings (quoted or not).
* ``mysql://`` and other schemes are refused by name, with the supported
  forms, instead of "no SQLite file".
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from secure_serde import ConfigurationError
from secure_serde.ciphers import KEYRING_FILE_VAR, KeyRotationCipher
from secure_serde.stores import StoreError, open_store
from tests.cli.cli_support import run_console_script, run_main
from tests.fixtures_services import PostgresServer
from tests.secrets_support import assert_no_secret_locals, key_forms

KEY = "pasted-key-text-0123456789abcdef"  # 32 characters: a valid raw key
ENCODED = "base64:" + "UGFzdGVkIGtleSB0ZXh0IGluIGJhc2U2NCBmb3JtISE="  # 32 bytes
PASSWORD = "hunter2-S3cret"


# -- keyring values that are keys -----------------------------------------------------------------


@pytest.mark.parametrize("pasted", [KEY, ENCODED, ENCODED + "\n", KEY.encode()])
@pytest.mark.parametrize("field", ["primary", "retired", "legacy_key", "id"])
def test_a_key_pasted_where_an_id_belongs_is_never_echoed(pasted: Any, field: str) -> None:
    keys: dict[Any, Any] = {"a": "other-key-0123456789abcdefghijkl"}
    kwargs: dict[str, Any] = {"primary": "a"}
    if field == "id":
        keys[pasted] = "third-key-0123456789abcdefghijkl"
    elif field == "retired":
        kwargs["retired"] = [pasted]
    else:
        kwargs[field] = pasted
    with pytest.raises(ConfigurationError) as info:
        KeyRotationCipher(keys, **kwargs)
    assert_no_secret_locals(info.value, *key_forms(pasted))
    text = str(info.value)
    shown = pasted.decode() if isinstance(pasted, bytes) else pasted
    assert shown.strip() not in text
    assert shown.strip()[7:] not in text  # nor the base64 body alone
    assert "not shown" in text


def test_ids_that_cannot_be_keys_are_still_named() -> None:
    with pytest.raises(ConfigurationError, match="primary '2025-07' is not in keys") as info:
        KeyRotationCipher({"2025-06": KEY}, "2025-07")
    assert "'2025-06'" in str(info.value)  # the ids there are, to spot the typo


@pytest.fixture
def empty_store(tmp_path: Path) -> Path:
    """A SQLite file with langgraph's checkpoint tables and no rows."""
    path = tmp_path / "store.sqlite"
    with sqlite3.connect(path) as conn:
        SqliteSaver(conn).setup()
    conn.close()
    return path


@pytest.mark.parametrize("field", ["primary", "retired", "legacy_key"])
@pytest.mark.parametrize("command", ["audit", "inspect", "rewrap"])
def test_the_cli_never_prints_a_key_from_a_keyring_file(
    field: str,
    command: str,
    empty_store: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config: dict[str, Any] = {"keys": {"a": "other-key-0123456789abcdefghijkl"}, "primary": "a"}
    config[field] = [ENCODED] if field == "retired" else ENCODED
    keyring = tmp_path / "keyring.json"
    keyring.write_text(json.dumps(config))
    keyring.chmod(0o600)
    monkeypatch.delenv("LANGGRAPH_AES_KEY", raising=False)
    monkeypatch.setenv(KEYRING_FILE_VAR, str(keyring))
    thread = ("--thread", "t") if command == "inspect" else ()
    code, out, err = run_main(capsys, command, *thread, str(empty_store))
    assert code == 2
    assert "not shown" in err
    assert ENCODED[7:20] not in out + err


# -- DSNs ------------------------------------------------------------------------------------------

DSNS = [
    f"postgresql://app:{PASSWORD}@db.internal:5432/checkpoints",
    f"postgres://app:{PASSWORD}@db.internal/checkpoints?sslmode=require",
    f"postgresql://app:p@ss{PASSWORD}@db.internal/checkpoints",  # an unencoded "@"
    f"postgresql://db.internal/checkpoints?user=app&password={PASSWORD}&sslmode=require",
    f"postgresql://db.internal/checkpoints?password={PASSWORD}",
    f"host=db.internal user=app password={PASSWORD} dbname=checkpoints",
    f"host=db.internal password = '{PASSWORD} with spaces \\' and a quote' dbname=x",
    f"dbname=x sslpassword={PASSWORD}",
    f"mysql://root:{PASSWORD}@db.internal/app",
]


@pytest.mark.parametrize("dsn", DSNS)
def test_redact_removes_every_password_form(dsn: str) -> None:
    from secure_serde.stores import redact

    for text in (dsn, f"cannot connect to {dsn}: refused", f'"{dsn}"', f"x='{dsn}'"):
        shown = redact(text)
        assert PASSWORD not in shown
        assert "***" in shown
        assert "db.internal" in shown or "dbname=x" in shown  # the rest stays useful
    assert "sslmode=require" in redact(DSNS[3])


def test_redact_leaves_text_without_passwords_alone() -> None:
    from secure_serde.stores import redact

    for text in (
        "postgresql://app@db.internal:5432/checkpoints?sslmode=require",
        "no SQLite file at /var/lib/app/store.sqlite",
        "host=db.internal dbname=checkpoints",
    ):
        assert redact(text) == text


@pytest.mark.parametrize(
    "location",
    [
        f"host=db.internal user=app password={PASSWORD} dbname=checkpoints",
        f"  dbname=checkpoints password='{PASSWORD}'",
        f"mysql://root:{PASSWORD}@db.internal/app",
        f"sqlite:///var/lib/{PASSWORD}.db",
        f"postgresql://app:{PASSWORD} with a space@db.internal/checkpoints",
        f"postgresql://app@127.0.0.1:1/checkpoints?password={PASSWORD}&bogus=1",
    ],
)
def test_store_errors_never_echo_a_password(location: str) -> None:
    with pytest.raises(StoreError) as info:
        open_store(location)
    assert PASSWORD not in str(info.value)
    assert "no SQLite file" not in str(info.value)
    assert_no_secret_locals(info.value, PASSWORD)


def test_other_schemes_are_named_with_the_supported_forms() -> None:
    with pytest.raises(StoreError) as info:
        open_store("mysql://root@db.internal/app")
    message = str(info.value)
    assert message.startswith("mysql:// stores are not supported")
    assert "postgresql://" in message
    assert "SQLite file" in message


def test_a_key_value_dsn_points_to_libpq_environment() -> None:
    with pytest.raises(StoreError, match="PGPASSWORD") as info:
        open_store(f"host=db.internal password={PASSWORD}")
    assert "PGPASSFILE" in str(info.value)


def test_store_error_messages_are_redacted_wherever_they_come_from() -> None:
    error = StoreError(f"worker 1: cannot connect to postgresql://app:{PASSWORD}@h/db")
    assert PASSWORD not in str(error)
    assert PASSWORD not in repr(error)


@pytest.mark.parametrize("command", ["audit", "inspect", "rewrap"])
def test_the_cli_never_prints_a_dsn_password(
    command: str, postgres_server: PostgresServer, env_key: str
) -> None:
    server = f"{postgres_server.host}:{postgres_server.port}"
    # Trust auth on the suite's server: the password is sent and ignored, so
    # the command gets as far as the database, naming the store as it goes.
    with_password = f"postgresql://{postgres_server.user}:{PASSWORD}@{server}/postgres"
    key_value = (
        f"host={postgres_server.host} port={postgres_server.port}"
        f" user={postgres_server.user} password={PASSWORD} dbname=postgres"
    )
    env = {"LANGGRAPH_AES_KEY": env_key, "PYTHONPATH": str(Path(__file__).parent.parent)}
    thread = ("--thread", "t") if command == "inspect" else ()
    for location in (with_password, key_value, f"mysql://u:{PASSWORD}@h/db"):
        proc = run_console_script(command, *thread, location, env=env)
        assert PASSWORD not in proc.stdout + proc.stderr, (location, proc.stderr)
        assert "Traceback" not in proc.stderr
