"""Every finding ``secure-serde audit`` prints names the command that fixes it, and long row lists
are capped at twenty in text (with a count of the rest) while ``--json`` lists every row.

The fix commands are run as printed (split as a shell would), and the finding is gone after.
"""

from __future__ import annotations

import base64
import json
import shlex
import sqlite3
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage

from secure_serde.cli import main
from secure_serde.cli._pretty import MAX_LISTED, capped, command
from tests.cli.cli_support import only_env_key, run_main
from tests.passes.rewrap_support import KEY_A, rotation_serde, run_turns, sqlite_graph
from tests.passes.sealed_support import factory, populate

PLANTED = 25
# msgpack of the string "a": a plaintext value the strict decoder accepts.
PLAIN_VALUE = bytes.fromhex("a161")


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stock SqliteSaver's store under secure_serde's serializer, key A in the environment."""
    only_env_key(monkeypatch, KEY_A)
    path = tmp_path / "store.sqlite"
    with sqlite_graph(path, rotation_serde({"a": KEY_A}, "a")) as graph:
        run_turns(graph, "t1", 1)
    return path


def _plant(path: Path, prefix: str, type_tag: str, value: bytes, count: int) -> list[str]:
    threads = [f"{prefix}-{i:03d}" for i in range(count)]
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel,"
            " type, value) VALUES (?, '', 'c', 'task', 0, 'ch', ?, ?)",
            [(thread, type_tag, value) for thread in threads],
        )
    return threads


def _audit(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code, out, _ = run_main(capsys, "audit", *argv, "--no-progress")
    return code, out


def _fix_lines(out: str) -> dict[str, list[str]]:
    """Each finding line (``  - ...``) and the fix lines under it (``fix:``, then any ``or:``)."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("findings: "))
    found: dict[str, list[str]] = {}
    for line in lines[start + 1 :]:
        if line.startswith("  - "):
            found[line.removeprefix("  - ")] = []
        else:
            finding = list(found)[-1]
            prefix = "    or:  " if found[finding] else "    fix: "
            assert line.startswith(prefix + "secure-serde "), line
            found[finding].append(line.removeprefix(prefix))
    assert len(found) == int(lines[start].removeprefix("findings: "))
    assert all(found.values()), found
    return found


def _run_printed(capsys: pytest.CaptureFixture[str], line: str) -> int:
    """A fix line as a shell runs it: its ``# why`` is a comment."""
    argv = shlex.split(line, comments=True)
    assert argv[0] == "secure-serde"
    code = main(argv[1:])
    capsys.readouterr()
    return code


# -- the capping helper -----------------------------------------------------------------------


def test_capped_shows_the_first_rows_and_counts_the_rest() -> None:
    rows = [f"row {i}" for i in range(MAX_LISTED + 5)]
    lines = capped(rows)
    assert lines == [f"  row {i}" for i in range(MAX_LISTED)] + [
        "  ... and 5 more (--json lists them)"
    ]
    assert capped(rows[:MAX_LISTED]) == [f"  row {i}" for i in range(MAX_LISTED)]
    assert capped([]) == []


def test_capped_says_when_json_lists_only_what_the_report_kept() -> None:
    lines = capped(["a", "b", "c"], 1_500, limit=2, indent="    ")
    assert lines == ["    a", "    b", "    ... and 1,498 more (--json lists the first 3)"]


def test_capped_escapes_what_a_terminal_would_act_on() -> None:
    assert capped(["x\nfindings: 0"]) == ["  x\\nfindings: 0"]


def test_command_quotes_for_the_shell_and_the_terminal() -> None:
    assert command("rewrap", "my store.sqlite") == "secure-serde rewrap 'my store.sqlite'"
    assert shlex.split(command("audit", "a'b")) == ["secure-serde", "audit", "a'b"]
    assert "\n" not in command("inspect", "x\ny")


# -- audit on a store a stock saver wrote ------------------------------------------------------


def test_row_lists_show_twenty_and_json_lists_every_row(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    planted = _plant(store, "plain", "msgpack", PLAIN_VALUE, PLANTED)
    code, out = _audit(capsys, str(store))
    assert code == 1
    listed = [line for line in out.splitlines() if "thread_id='plain-" in line]
    assert len(listed) == MAX_LISTED
    assert f"    ... and {PLANTED - MAX_LISTED} more (--json lists them)" in out.splitlines()

    code, out = _audit(capsys, str(store), "--json")
    rows = json.loads(out)["plaintext"]["rows"]
    assert sorted(row["key"]["thread_id"] for row in rows) == planted


def test_every_finding_is_followed_by_its_fix(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant(store, "plain", "msgpack", PLAIN_VALUE, 2)
    _plant(store, "bad", "msgpack+aesgcm", b"\x00", 2)
    code, out = _audit(capsys, str(store))
    assert code == 1
    fixes = _fix_lines(out)
    assert fixes == {
        "2 unencrypted serialized value(s)": [
            command("rewrap", str(store), "--allow-plaintext") + "  # encrypts them in place"
        ],
        "2 value(s) the configured keys cannot decrypt": [
            command("adopt", str(store), "NEW_STORE")
            + "  # copies every row that opens into a new sealed store and lists the rest; first"
            " configure any key the rows name (`secure-serde keyring show FILE` lists the key"
            " ids a keyring holds)"
        ],
    }
    code, out = _audit(capsys, str(store), "--json")
    document = json.loads(out)
    assert [fix["finding"] for fix in document["fixes"]] == document["findings"]
    assert [fix["kind"] for fix in document["fixes"]] == ["plaintext", "undecryptable"]
    assert {
        fix["finding"]: [f"{c['command']}  # {c['why']}" for c in fix["commands"]]
        for fix in document["fixes"]
    } == fixes


def test_the_printed_fix_for_plaintext_removes_the_finding(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _plant(store, "plain", "msgpack", PLAIN_VALUE, 3)
    _, out = _audit(capsys, str(store))
    [[fix]] = _fix_lines(out).values()
    assert _run_printed(capsys, fix) == 0
    code, out = _audit(capsys, str(store))
    assert code == 0, out
    assert "findings: 0" in out


def test_the_printed_fix_for_metadata_keys_is_run_as_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    only_env_key(monkeypatch, KEY_A)
    path = tmp_path / "store.sqlite"
    with sqlite_graph(path, rotation_serde({"a": KEY_A}, "a")) as graph:
        graph.invoke(
            {"messages": [HumanMessage(content="hi")]},
            {"configurable": {"thread_id": "t", "api_key": "sk-x", "tenant": "acme"}},
        )
    _, out = _audit(capsys, str(path))
    [(finding, (adopt, allow))] = _fix_lines(out).items()
    assert finding.startswith("plaintext metadata key(s) not written by LangGraph")
    assert adopt.startswith(command("adopt", str(path), "NEW_STORE") + "  # ")
    assert allow == (
        command(
            "audit", str(path), "--allow-metadata-key", "api_key", "--allow-metadata-key", "tenant"
        )
        + "  # if they are harmless in plaintext"
    )
    assert _run_printed(capsys, allow) == 0


def test_the_printed_fix_for_langgraph_builtin_rows_removes_the_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from langgraph.checkpoint.serde.encrypted import EncryptedSerializer as Builtin

    only_env_key(monkeypatch, KEY_A)
    path = tmp_path / "builtin.sqlite"
    with sqlite_graph(path, Builtin.from_pycryptodome_aes()) as graph:
        run_turns(graph, "t1", 1)
    _, out = _audit(capsys, str(path))
    [(finding, [fix])] = _fix_lines(out).items()
    assert "langgraph's built-in format" in finding
    assert fix.startswith(command("rewrap", str(path)) + "  # ")
    assert _run_printed(capsys, fix) == 0
    code, out = _audit(capsys, str(path))
    assert (code, "findings: 0") == (0, out.splitlines()[-1]), out


# -- audit on a store SealedSaver sealed -------------------------------------------------------


def _tamper_checkpoints(path: Path) -> int:
    """Flip one bit of every checkpoint's sealed record (its metadata text, base64)."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT thread_id, checkpoint_ns, checkpoint_id, metadata FROM checkpoints"
            " WHERE thread_id != '__secure_serde_store__'"
        ).fetchall()
        for thread_id, ns, checkpoint_id, value in rows:
            metadata = json.loads(value)
            raw = bytearray(base64.b64decode(metadata["__secure_serde__"]))
            raw[-1] ^= 1  # in the ciphertext's tag
            metadata["__secure_serde__"] = base64.b64encode(bytes(raw)).decode("ascii")
            conn.execute(
                "UPDATE checkpoints SET metadata = ? WHERE thread_id = ? AND checkpoint_ns = ?"
                " AND checkpoint_id = ?",
                (json.dumps(metadata).encode(), thread_id, ns, checkpoint_id),
            )
    return len(rows)


def test_sealed_audit_caps_the_list_and_names_what_repairs_each_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    only_env_key(monkeypatch, KEY_A)
    path = tmp_path / "sealed.sqlite"
    populate(factory(path), turns=2)
    tampered = _tamper_checkpoints(path)
    assert tampered > MAX_LISTED

    code, out = _audit(capsys, str(path), "--json")
    assert code == 1
    document = json.loads(out)
    findings = document["findings"]
    assert len(findings) >= tampered
    errors = sorted({f["error"] for f in findings})
    [fix] = document["fixes"]
    assert fix.startswith(f"fix ({', '.join(errors)}): the rows were changed outside")
    assert fix.endswith(f", then {command('audit', str(path))}")

    code, out = _audit(capsys, str(path))
    assert code == 1
    lines = out.splitlines()
    listed = [line for line in lines if line.startswith("    ") and ": thread " in line]
    assert len(listed) == MAX_LISTED
    assert f"    ... and {len(findings) - MAX_LISTED:,} more (--json lists them)" in lines
    assert lines[-1] == f"    {fix}"
    # The history of the first listed row, as printed, opens in inspect (exit 1: it does not open).
    first = findings[0]
    assert command("inspect", str(path), "--thread", first["thread_id"]) in fix
