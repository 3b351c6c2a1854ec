"""audit counts bound and unbound rows, and inspect flags unbound checkpoints, on mixed stores.

Each store is written partly by the stock saver (``serde=EncryptedSerializer``: format v2,
but bound to no row) and partly by secure_serde 0.3's sealed saver, one set of threads each, by
real graphs on real SQLite files and the PostgreSQL fixture: the frozen mixed store of
tests/vectors/v03/ (0.3's threads with ``plaintext_metadata=[]``, written after the stock
saver's, so the newest checkpoints are bound, as in a store the sealed savers took over). The
expected counts come from which saver wrote which thread, with the rows
listed by the store layer; nothing classifies them but the code under test.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from secure_serde import EncryptedSerializer
from secure_serde.cli import main
from secure_serde.stores import RECORD_KEY, open_store
from tests import v03_fixtures as v03
from tests.cli.cli_support import only_env_key
from tests.rewrap.rewrap_support import (
    KEY_A,
    rotation_serde,
    run_turns,
    sqlite_graph,
)

STOCK_THREADS = v03.STOCK_THREADS
SEALED_THREADS = ("sealed-1",)
# Store table -> the audit's name for that kind of value.
_KINDS = {
    "checkpoint_blobs": "blobs",
    "checkpoint_writes": "writes",
    "writes": "writes",
    "checkpoints": "checkpoints",
    "checkpoints.metadata": "metadata_envelopes",
}


@pytest.fixture(autouse=True)
def _key_a(monkeypatch: pytest.MonkeyPatch) -> None:
    only_env_key(monkeypatch, KEY_A)


def _serde() -> EncryptedSerializer:
    return rotation_serde({"a": KEY_A}, "a")


def _mixed_sqlite(path: Path) -> None:
    v03.sqlite_copy(path, STOCK_THREADS + SEALED_THREADS)


def _mixed_postgres(url: str) -> None:
    v03.load_postgres(url, STOCK_THREADS + SEALED_THREADS)


def _expected(location: str) -> dict[str, Counter[str]]:
    """Per kind, values of sealed threads ("bound") and of stock threads ("unbound")."""
    found: dict[str, Counter[str]] = {}
    with open_store(location) as store:
        for cell in store.iter_cells():
            kind = _KINDS.get(cell.ref.table)
            if kind is None or cell.data is None:
                continue
            bound = cell.ref.thread_id in SEALED_THREADS
            found.setdefault(kind, Counter())["bound" if bound else "unbound"] += 1
    return found


def _checkpoints_by_thread(url: str) -> tuple[int, int]:
    """PostgreSQL checkpoints of sealed threads and of stock threads, counted by SQL."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT thread_id, count(*) FROM checkpoints GROUP BY 1").fetchall()
    sealed = sum(n for thread, n in rows if thread in SEALED_THREADS)
    return sealed, sum(n for _, n in rows) - sealed


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any, str]:
    code = main([*args, "--json"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def _counts(expected: Counter[str]) -> dict[str, int]:
    return {"bound": expected["bound"], "unbound": expected["unbound"], "unchecked": 0}


def test_audit_counts_bound_and_unbound_rows_of_a_mixed_sqlite_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mixed.sqlite"
    _mixed_sqlite(path)
    expected = _expected(str(path))
    assert expected["checkpoints"]["bound"] > 0
    assert expected["checkpoints"]["unbound"] > 0
    assert expected["writes"]["bound"] > 0
    assert expected["writes"]["unbound"] > 0

    code, document, _ = _json(capsys, "audit", str(path))
    assert code == 0, document["findings"]
    binding = document["binding"]
    assert binding["checkpoints"] == {
        "sealed": expected["checkpoints"]["bound"],
        "unsealed": expected["checkpoints"]["unbound"],
        "unchecked": 0,
    }
    assert binding["writes"] == _counts(expected["writes"])
    assert binding["blobs"] is None  # SQLite keeps channel values inside the checkpoint
    assert binding["metadata_envelopes"] == _counts(expected.get("metadata_envelopes", Counter()))

    main(["audit", str(path)])
    text = capsys.readouterr().out
    checkpoints = expected["checkpoints"]
    writes = expected["writes"]
    assert (
        f"checkpoint records: {checkpoints['bound']:,} sealed, {checkpoints['unbound']:,} not"
        in text
    )
    assert f"pending writes: {writes['bound']:,} bound, {writes['unbound']:,} unbound" in text
    unbound = checkpoints["unbound"] + writes["unbound"]
    assert f"{unbound:,} unbound in a store the sealed savers write" in text


def test_audit_without_keys_leaves_format_v2_values_unchecked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mixed.sqlite"
    _mixed_sqlite(path)
    expected = _expected(str(path))
    code, document, _ = _json(capsys, "audit", str(path), "--no-decrypt")
    assert code == 0
    # Bound and unbound format v2 values look alike without a key.
    assert document["binding"]["checkpoints"] == {
        "sealed": 0,
        "unsealed": 0,
        "unchecked": sum(expected["checkpoints"].values()),
    }
    assert document["binding"]["writes"] == {
        "bound": 0,
        "unbound": 0,
        "unchecked": sum(expected["writes"].values()),
    }
    main(["audit", str(path), "--no-decrypt"])
    assert "unchecked: format v2 values not decrypted" in capsys.readouterr().out


def test_audit_counts_plaintext_rows_as_unbound_without_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    path = tmp_path / "plain.sqlite"
    with sqlite_graph(path, JsonPlusSerializer()) as graph:
        run_turns(graph, "plain", 2)
    expected = _expected(str(path))
    _, document, _ = _json(capsys, "audit", str(path), "--no-decrypt")
    assert document["binding"]["checkpoints"]["unsealed"] == expected["checkpoints"]["unbound"]
    assert document["binding"]["writes"]["unbound"] == expected["writes"]["unbound"]
    assert document["binding"]["writes"]["bound"] == 0


def test_audit_counts_bound_and_unbound_rows_of_a_mixed_postgres_store(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _mixed_postgres(postgres_url)
    expected = _expected(postgres_url)
    sealed, unsealed = _checkpoints_by_thread(postgres_url)
    assert expected["blobs"]["bound"] > 0
    assert expected["blobs"]["unbound"] > 0
    assert expected["writes"]["bound"] > 0
    assert expected["writes"]["unbound"] > 0
    assert expected["metadata_envelopes"]["bound"] == sealed

    _, document, _ = _json(capsys, "audit", postgres_url)
    # The stock saver inlined primitives in the checkpoint JSON; unbound rows are no finding.
    assert [f for f in document["findings"] if "inline" not in f] == []
    binding = document["binding"]
    assert binding["checkpoints"] == {"sealed": sealed, "unsealed": unsealed, "unchecked": 0}
    assert binding["blobs"] == _counts(expected["blobs"])
    assert binding["writes"] == _counts(expected["writes"])
    assert binding["metadata_envelopes"] == _counts(expected["metadata_envelopes"])

    # Without keys, PostgreSQL still tells sealed records by the seal beside them.
    _, keyless, _ = _json(capsys, "audit", postgres_url, "--no-decrypt")
    assert keyless["binding"]["checkpoints"] == binding["checkpoints"]
    assert keyless["binding"]["blobs"] == {
        "bound": 0,
        "unbound": 0,
        "unchecked": sum(expected["blobs"].values()),
    }


def test_audit_counts_a_stripped_record_seal_as_unsealed(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    v03.load_postgres(postgres_url, SEALED_THREADS)
    sealed, _ = _checkpoints_by_thread(postgres_url)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE checkpoints SET checkpoint = checkpoint - %s"
            " WHERE checkpoint_id = (SELECT max(checkpoint_id) FROM checkpoints)",
            (RECORD_KEY,),
        )
    _, document, _ = _json(capsys, "audit", postgres_url)
    assert document["binding"]["checkpoints"] == {
        "sealed": sealed - 1,
        "unsealed": 1,
        "unchecked": 0,
    }


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_inspect_warns_on_an_unbound_checkpoint_in_a_binding_store(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    # The stock PostgreSQL saver inlines primitives in the checkpoint JSON.
    inline: tuple[str, ...] = ()
    if backend == "sqlite":
        location = str(tmp_path / "mixed.sqlite")
        _mixed_sqlite(Path(location))
    else:
        location = request.getfixturevalue("postgres_url")
        _mixed_postgres(location)
        inline = ("--allow-inline-values",)

    code, shown, err = _json(capsys, "inspect", location, "--thread", STOCK_THREADS[0], *inline)
    assert code == 0, [e["error"] for e in shown["checkpoints"]]
    assert shown["binding_store"] is True
    entries = shown["checkpoints"]
    assert entries
    assert all(e["unbound"] for e in entries)
    assert all(e["warning"] and "not sealed for its location" in e["warning"] for e in entries)
    assert f"warning: {len(entries)} checkpoint(s) shown are not sealed for" in err

    main(["inspect", location, "--thread", STOCK_THREADS[0], *inline])
    out, _ = capsys.readouterr()
    assert out.count("WARNING: not sealed for its location") == len(entries)

    code, shown, err = _json(capsys, "inspect", location, "--thread", SEALED_THREADS[0], *inline)
    assert code == 0, shown
    assert [e["unbound"] for e in shown["checkpoints"]] == [False] * len(shown["checkpoints"])
    assert [e["warning"] for e in shown["checkpoints"]] == [None] * len(shown["checkpoints"])
    assert "warning" not in err


def test_inspect_does_not_warn_on_a_store_only_the_stock_saver_wrote(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "stock.sqlite"
    with sqlite_graph(path, _serde()) as graph:
        run_turns(graph, STOCK_THREADS[0], 2)
    code, shown, err = _json(capsys, "inspect", str(path), "--thread", STOCK_THREADS[0])
    assert code == 0, shown
    assert shown["binding_store"] is False
    assert all(e["unbound"] for e in shown["checkpoints"])
    assert [e["warning"] for e in shown["checkpoints"]] == [None] * len(shown["checkpoints"])
    assert "warning" not in err
