"""No argument shaped like a key is ever printed back by any command (issue 22, item 5).

One rule for every argument of every command: a value `parse_key` would
accept (16, 24 or 32 bytes of text, or ``base64:...``), or the hex or
base64 of 16, 24 or 32 bytes, is never printed back in any output or error,
whatever the command does with it. The positions are read from the
parser itself, so an option added later is tested without a change here:
every positional, every option that takes a value (as ``--opt VALUE`` and
``--opt=VALUE``), the subcommand and the keyring action, and an extra
argument no command takes.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from secure_serde.cli import build_parser
from tests.cli.cli_support import only_env_key, run_console_script, run_main

_RANDOM: Final = bytes(range(7, 39))  # 32 bytes, fixed so the test ids are stable
KEY_SHAPED: Final = {
    "encoded": "base64:" + base64.b64encode(_RANDOM).decode(),
    "raw32": "raw-key-pasted-by-mistake-0123ab",
    "raw16": "rawkey16-bytes!!",
    "raw24": "raw-key-of-24-bytes-xyzw",
    "hex32": _RANDOM.hex(),
    "b64": base64.b64encode(_RANDOM[::-1]).decode(),
    "b64url": base64.urlsafe_b64encode(bytes(range(200, 232))).decode().rstrip("="),
    "hex16": bytes(range(100, 116)).hex(),
    "newline": "base64:" + base64.b64encode(_RANDOM[::-1]).decode() + "\n",
}
APP_KEY: Final = "base64:" + base64.b64encode(bytes(range(50, 82))).decode()


def _pieces(value: str) -> list[str]:
    """Parts of ``value`` that must not be printed: the middle of the text, in any escape."""
    core = value.strip()
    middle = core[len(core) // 4 : len(core) // 4 + 10]
    return [middle, json.dumps(middle)[1:-1], repr(middle)[1:-1]]


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))
            return
    yield path, parser


def _benign(action: argparse.Action, files: dict[str, str]) -> str:
    if action.choices:
        return str(next(iter(action.choices)))
    if action.type is not None and getattr(action.type, "__name__", "") in {"positive_int", "int"}:
        return "1"
    if action.dest == "file":
        return files["keyring"]
    if action.dest == "store":
        return files["store"]
    return "benign-value"


def _argv_cases(files: dict[str, str]) -> list[tuple[str, list[str]]]:
    """(position name, argv with ``{KEY}`` in that position) for every position of every command."""
    cases: list[tuple[str, list[str]]] = [
        ("subcommand", ["{KEY}"]),
        ("keyring action", ["keyring", "{KEY}", files["keyring"]]),
    ]
    for command, parser in _commands(build_parser(None)):
        actions = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
        positionals = [a for a in actions if not a.option_strings]
        valued = [a for a in actions if a.option_strings and a.nargs != 0]
        required = [a for a in valued if a.required]
        # --label/--id form a required group on keyring new and add.
        if command in {("keyring", "new"), ("keyring", "add")}:
            required = [a for a in valued if "--label" in a.option_strings]

        def argv(
            key_at: argparse.Action | None,
            inline: bool,
            positionals: list[argparse.Action] = positionals,
            required: list[argparse.Action] = required,
            command: tuple[str, ...] = command,
        ) -> list[str]:
            out = list(command)
            for action in positionals:
                out.append("{KEY}" if action is key_at else _benign(action, files))
            for action in required:
                if action is not key_at and not (
                    key_at is not None and key_at.dest == action.dest and key_at.option_strings
                ):
                    out += [action.option_strings[0], _benign(action, files)]
            if key_at is not None and key_at.option_strings:
                flag = key_at.option_strings[0]
                out += [f"{flag}={{KEY}}"] if inline else [flag, "{KEY}"]
            return out

        name = " ".join(command)
        for action in positionals:
            cases.append((f"{name} <{action.dest}>", argv(action, False)))
        for action in valued:
            for inline in (False, True):
                shown = f"{action.option_strings[0]}{'=' if inline else ' '}"
                cases.append((f"{name} {shown}", argv(action, inline)))
        cases.append((f"{name} <extra>", [*argv(None, False), "{KEY}"]))
    return cases


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    only_env_key(monkeypatch, APP_KEY)
    keyring = tmp_path / "ring" / "keyring-for-the-cli-args-test.json"
    keyring.parent.mkdir()
    keyring.write_text(json.dumps({"primary": "a", "keys": {"a": APP_KEY}}))
    keyring.chmod(0o600)
    store = tmp_path / "store-for-the-cli-args-test.sqlite"
    with sqlite3.connect(store) as conn:
        SqliteSaver(conn).setup()
    conn.close()
    return {"keyring": str(keyring), "store": str(store)}


def _fill(argv: list[str], key: str) -> list[str]:
    return [part.replace("{KEY}", key) for part in argv]


def test_every_position_of_every_command_is_covered(files: dict[str, str]) -> None:
    names = [name for name, _ in _argv_cases(files)]
    # The parser really was walked: each subcommand and keyring action appears.
    for expected in (
        "keygen --label ",
        "keyring promote <label>",
        "keyring drop <file>",
        "rewrap <store>",
        "audit --batch-size=",
        "inspect --thread ",
        "inspect --pickle=",
    ):
        assert expected in names, names
    assert len(names) > 50


@pytest.mark.parametrize("shape", sorted(KEY_SHAPED))
def test_no_command_prints_a_key_shaped_argument(
    shape: str,
    files: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    key = KEY_SHAPED[shape]
    leaks = []
    keyring = Path(files["keyring"])
    original = keyring.read_bytes()
    for name, argv in _argv_cases(files):
        os.chdir(tmp_path)
        try:
            code, out, err = run_main(capsys, *_fill(argv, key))
        except SystemExit as usage:
            code = usage.code if isinstance(usage.code, int) else 2
            out, err = capsys.readouterr()
        for piece in _pieces(key):
            if piece in out + err:
                leaks.append(f"{name} (exit {code}): {(out + err).strip()[:300]!r}")
                break
        keyring.write_bytes(original)
        keyring.chmod(0o600)
    assert not leaks, "\n".join(leaks)


@pytest.mark.parametrize(
    "argv",
    [
        ["keyring", "promote", "{keyring}", "{KEY}"],
        ["keyring", "drop", "{keyring}", "{KEY}"],
        ["audit", "{KEY}"],
        ["inspect", "{store}", "--thread", "{KEY}"],
        ["audit", "{store}", "--batch-size={KEY}"],
        ["{KEY}"],
    ],
)
def test_the_console_script_prints_no_key_shaped_argument(
    argv: list[str], files: dict[str, str], tmp_path: Path
) -> None:
    key = KEY_SHAPED["encoded"]
    filled = [
        part.replace("{KEY}", key)
        .replace("{keyring}", files["keyring"])
        .replace("{store}", files["store"])
        for part in argv
    ]
    done = run_console_script(*filled, env={"LANGGRAPH_AES_KEY": APP_KEY, "HOME": str(tmp_path)})
    assert done.returncode in (1, 2), done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "not shown" in done.stderr
    for piece in _pieces(key):
        assert piece not in done.stdout + done.stderr


def test_arguments_that_are_not_key_shaped_are_still_named(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run_main(capsys, "keyring", "promote", files["keyring"], "typo-label")
    assert code == 2
    assert "'typo-label'" in err
    code, out, _ = run_main(capsys, "keyring", "show", files["keyring"])
    assert code == 0
    assert files["keyring"] in out


@pytest.mark.parametrize("shape", ["b64", "hex32", "b64url", "encoded"])
@pytest.mark.parametrize(
    "argv",
    [
        ["keygen", "--label"],
        ["keyring", "new", "{new}", "--label"],
        ["keyring", "add", "{keyring}", "--label"],
    ],
)
def test_a_key_shaped_label_is_refused_not_written(
    shape: str,
    argv: list[str],
    files: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # A label is printed by show, audit and every message that names the key: a key
    # pasted as one must not be stored (or printed as a keyring file by keygen).
    key = KEY_SHAPED[shape]
    new = tmp_path / "new.json"
    before = Path(files["keyring"]).read_bytes()
    filled = [a.replace("{new}", str(new)).replace("{keyring}", files["keyring"]) for a in argv]
    code, out, err = run_main(capsys, *filled, key)
    assert code == 2, out + err
    assert "shape of a key" in err
    assert out == ""
    assert not new.exists()
    assert Path(files["keyring"]).read_bytes() == before
