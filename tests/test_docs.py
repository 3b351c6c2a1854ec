"""Every Python snippet in docs/*.md runs, page by page, with the names docs/README.md promises."""

from __future__ import annotations

import ast
import asyncio
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph

from secure_serde import EncryptedSerializer, generate_encoded_key
from tests.ciphers.kms_support import new_cmk
from tests.passes.rewrap_support import KEY_A, run_turns, sqlite_graph
from tests.test_vocabulary import RETIRED

DOCS = Path(__file__).resolve().parents[1] / "docs"
FENCE = re.compile(r"^```python\n(.*?)^```$", re.DOTALL | re.MULTILINE)
PAGES = sorted(p for p in DOCS.glob("*.md") if FENCE.search(p.read_text()))


def _builder() -> StateGraph[Any]:
    builder = StateGraph(MessagesState)
    builder.add_node("agent", lambda state: {"messages": [("ai", "ok")]})
    builder.add_edge(START, "agent")
    return builder


def _run(snippet: str, namespace: dict[str, Any]) -> None:
    tree = ast.parse(snippet, mode="exec", type_comments=False)
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    code = compile(tree, "<snippet>", "exec", flags=flags)
    result = eval(code, namespace)  # noqa: S307 - our own documentation
    if asyncio.iscoroutine(result):
        asyncio.run(result)


def test_every_page_with_snippets_is_collected() -> None:
    assert {p.name for p in PAGES} >= {
        "usage.md",
        "kms.md",
        "postgres.md",
        "pickle.md",
        "migrating.md",
    }


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_snippets_run(
    page: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("SECURE_SERDE_KEYRING_FILE", "SECURE_SERDE_KMS_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANGGRAPH_AES_KEY", KEY_A)
    monkeypatch.setenv("MY_APP_KEY", generate_encoded_key())
    with sqlite_graph(
        tmp_path / "checkpoints.sqlite", EncryptedSerializer.from_pycryptodome_aes()
    ) as graph:
        run_turns(graph, "t1", 1)
    conn = sqlite3.connect(tmp_path / "app.sqlite", check_same_thread=False)
    namespace: dict[str, Any] = {
        "__name__": "__docs__",
        "builder": _builder(),
        "conn": conn,
        "SqliteSaver": SqliteSaver,
        "key_from_my_vault": generate_encoded_key(),
    }
    text = page.read_text()
    if "DSN" in text:
        namespace["DSN"] = request.getfixturevalue("postgres_url")
    if "KMS_KEY_ARN" in text:
        endpoint = request.getfixturevalue("kms_endpoint")
        namespace["KMS_KEY_ARN"] = new_cmk(request.getfixturevalue("kms_client"))
        monkeypatch.setenv("AWS_ENDPOINT_URL_KMS", endpoint)
        monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    try:
        for snippet in FENCE.findall(text):
            _run(snippet, namespace)
    finally:
        conn.close()


# Quoted CLI output and code (in backticks) may still carry the retired phrases.
CODE = re.compile(r"```.*?```|`[^`]*`", re.DOTALL)


@pytest.mark.parametrize(
    "page",
    [
        p
        for p in [*DOCS.glob("*.md"), DOCS.parent / "README.md", DOCS.parent / "SECURITY.md"]
        if p.name not in ("glossary.md", "upgrading.md", "postgres.md")
    ],
    ids=lambda p: p.name,
)
def test_pages_use_the_glossary_words(page: Path) -> None:
    prose = CODE.sub("", page.read_text()).lower()
    assert [word for word in RETIRED if word in " ".join(prose.split())] == []
