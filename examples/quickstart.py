"""secure_serde quickstart: an encrypted LangGraph checkpointer on SQLite.

Run it from the repository root:

    python3 -m venv .venv && .venv/bin/pip install -q -e '.[sqlite]'
    .venv/bin/python examples/quickstart.py

No services and no LLM are needed: the "assistant" below is a deterministic
function. The demo shows

1. memory across turns on one thread, with every checkpoint encrypted;
2. that the SQLite file holds only ciphertext for the conversation, and for what LangGraph
   copies from the config into each checkpoint's metadata (an email here);
3. time travel: the thread's history, and a fork from an earlier checkpoint;
4. run it again: the second run resumes the same encrypted thread from the file.

Nothing is ever deleted unless you pass ``--fresh``, and the key is checked
before any file is touched.

The key comes from ``LANGGRAPH_AES_KEY``. When that is unset, a demo key is
generated into ``examples/.demo/demo.key`` (mode 0600) and reused on later
runs. That file is for this demo only: keep real keys in a secret manager.
"""

import argparse
import os
import re
import shlex
import sqlite3
import stat
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any, TypedDict

try:
    from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.graph.state import CompiledStateGraph
    from langgraph.types import StateSnapshot
except ModuleNotFoundError as missing:  # pragma: no cover - a friendlier message
    sys.exit(
        f"The quickstart needs langgraph and its SQLite saver ({missing}).\n"
        "Install them with: .venv/bin/pip install -e '.[sqlite]' langgraph"
    )

import secure_serde
from secure_serde import ConfigurationError, DecryptionError, EncryptedSerializer

try:
    # The sealed saver: SealedSaver around langgraph's SqliteSaver, with every value bound to
    # the row it was written in and metadata sealed (README, "Production recipe").
    from secure_serde.savers.sqlite import SqliteSaver
except ModuleNotFoundError as missing:  # pragma: no cover - a friendlier message
    sys.exit(
        f"The quickstart needs langgraph's SQLite saver ({missing}).\n"
        "Install it with: .venv/bin/pip install -e '.[sqlite]'"
    )

KEY_ENV_VAR = "LANGGRAPH_AES_KEY"
# SECURE_SERDE_DEMO_DIR moves the demo's files (the test suite runs it in a temporary folder).
DEMO_DIR = Path(
    os.environ.get("SECURE_SERDE_DEMO_DIR") or Path(__file__).resolve().parent / ".demo"
)
KEY_FILE = DEMO_DIR / "demo.key"
DB_FILE = DEMO_DIR / "quickstart.sqlite"
THREAD_ID = "quickstart-thread-1"
# A word that appears only inside the conversation, never in ids or metadata.
CODENAME = "BLUEHERON"
# Passed in the config, as apps pass user ids and API keys: LangGraph copies it into the
# metadata of every checkpoint, where the sealed saver encrypts it.
USER_EMAIL = "ada@example.com"
FORK_WORD = "REDKITE"
# Whether LANGGRAPH_AES_KEY came from the environment (not from the demo key file).
KEY_FROM_ENV = bool(os.environ.get(KEY_ENV_VAR))


# --------------------------------------------------------------------------- output helpers


def heading(title: str) -> None:
    print()
    print(f"== {title} " + "=" * max(3, 74 - len(title)))


def show_turn(user_text: str, reply: BaseMessage) -> None:
    print(f"  user      > {user_text}")
    print(f"  assistant > {reply.content}")


# --------------------------------------------------------------------------- the demo key


def ensure_key() -> None:
    """Use LANGGRAPH_AES_KEY if set; otherwise create or reuse the demo key file."""
    if os.environ.get(KEY_ENV_VAR):
        print(f"Using the key from {KEY_ENV_VAR} (already set in the environment).")
        return
    DEMO_DIR.mkdir(mode=0o700, exist_ok=True)
    if KEY_FILE.exists():
        KEY_FILE.chmod(stat.S_IRUSR | stat.S_IWUSR)
        key = KEY_FILE.read_text(encoding="ascii").strip()
        action = "Reusing the demo key in"
    else:
        key = secure_serde.generate_encoded_key()
        fd = os.open(KEY_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(key + "\n")
        action = "Generated a new demo key into"
    os.environ[KEY_ENV_VAR] = key
    print(f"{KEY_ENV_VAR} is not set. {action} {display(KEY_FILE)} (mode 0600)")
    print(f"and loaded it into {KEY_ENV_VAR} for this process only.")
    print("DEMO ONLY: in production, provide the key from your secret manager.")


def check(condition: bool, failure: str) -> None:
    """Stop the demo with ``failure`` when what it shows turns out false."""
    if not condition:
        raise SystemExit(f"demo check failed: {failure}")


def display(path: Path) -> str:
    """A path relative to the working directory when possible, for tidy output."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def cli_command() -> str:
    """How to start the CLI from here, as printed: no activated venv is assumed.

    The console script installed beside this interpreter (``.venv/bin/secure-serde`` after the
    README's install, run from the repository root), else this interpreter running the module.
    """
    interpreter = Path(sys.executable)
    script = interpreter.with_name("secure-serde")
    if script.is_file():
        return shlex.quote(display(script))
    return f"{shlex.quote(display(interpreter))} -m secure_serde.cli"


# --------------------------------------------------------------------------- the graph


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


NAME_RE = re.compile(r"\bmy name is (\w+)|\bI'm (\w+)", re.IGNORECASE)
CODENAME_RE = re.compile(r"\bcodename is (\w+)", re.IGNORECASE)


def remembered(pattern: re.Pattern[str], turns: list[str]) -> tuple[str, int] | None:
    """The last value matching ``pattern`` in the user's turns, and how many turns ago."""
    for age, text in enumerate(reversed(turns)):
        match = pattern.search(text)
        if match:
            return next(group for group in match.groups() if group), age
    return None


def assistant(state: State) -> dict[str, list[AnyMessage]]:
    """A deterministic stand-in for an LLM: it answers from the thread's history alone."""
    turns = [str(m.content) for m in state["messages"] if isinstance(m, HumanMessage)]
    question = turns[-1].lower()
    name = remembered(NAME_RE, turns)
    codename = remembered(CODENAME_RE, turns)
    who = name[0] if name else "there"
    if "codename" in question and "?" in question:
        if codename is None:
            reply = f"You have not told me a codename yet, {who}."
        else:
            ago = codename[1]
            reply = (
                f"Your project codename is {codename[0]}, {who}. You told me"
                f" {ago} turn{'s' if ago != 1 else ''} ago."
            )
    elif codename is not None and codename[1] == 0:
        reply = f"Noted, {who}: the project codename is {codename[0]}."
    elif name is not None and name[1] == 0:
        reply = f"Nice to meet you, {who}!"
    else:
        reply = f"I am a fake assistant, {who}; ask me about your codename."
    return {"messages": [AIMessage(content=reply)]}


GraphT = CompiledStateGraph[State, None, State, State]


def build_graph(saver: SqliteSaver) -> GraphT:
    builder = StateGraph(State)
    builder.add_node("assistant", assistant)
    builder.add_edge(START, "assistant")
    builder.add_edge("assistant", END)
    return builder.compile(checkpointer=saver)


def say(graph: GraphT, config: RunnableConfig, text: str) -> None:
    result = graph.invoke({"messages": [HumanMessage(content=text)]}, config)
    show_turn(text, result["messages"][-1])


# --------------------------------------------------------------------------- the raw file


def raw_files() -> Iterator[Path]:
    """The database file and any write-ahead-log files SQLite left beside it."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        path = DB_FILE.with_name(DB_FILE.name + suffix)
        if path.exists():
            yield path


def inspect_raw_file() -> None:
    with sqlite3.connect(DB_FILE) as raw:
        types = raw.execute("SELECT DISTINCT type FROM checkpoints").fetchall()
        row = raw.execute(
            "SELECT checkpoint_id, type, checkpoint FROM checkpoints"
            " WHERE thread_id = ? ORDER BY checkpoint_id DESC LIMIT 1",
            (THREAD_ID,),
        ).fetchone()
        blob_types = raw.execute("SELECT DISTINCT type FROM writes").fetchall()
    raw.close()
    checkpoint_id, type_tag, blob = row
    print(f"checkpoints.type values : {sorted(t for (t,) in types)}")
    print(f"writes.type values      : {sorted(t for (t,) in blob_types if t)}")
    print(f"latest checkpoint       : {checkpoint_id}, type {type_tag!r}, {len(blob)} bytes")
    print(f"first 32 bytes (hex)    : {bytes(blob[:32]).hex()}")
    # Every secure_serde ciphertext starts with a format version and a key id.
    print(f"  header                : format version {blob[0]}, key id {bytes(blob[1:5]).hex()}")

    contents = b"".join(path.read_bytes() for path in raw_files())
    names = ", ".join(path.name for path in raw_files())
    for word in (CODENAME, FORK_WORD, USER_EMAIL):
        found = word.encode() in contents
        verdict = "FOUND (not expected!)" if found else "not found"
        print(f"searching all of {names} for {word!r}: {verdict}")
        check(not found, f"{word!r} is readable in the raw database")
    # Honest counterpart: ids and LangGraph's own metadata keys (source, step, parents) are
    # not encrypted (see SECURITY.md, "What stays plaintext at rest").
    in_clear = THREAD_ID.encode() in contents
    print(f"the thread id {THREAD_ID!r} is stored in clear: {in_clear} (ids are not secret)")


# --------------------------------------------------------------------------- time travel


def last_reply(snapshot: StateSnapshot) -> str:
    messages: list[AnyMessage] = snapshot.values.get("messages", [])
    return str(messages[-1].content) if messages else "(no messages)"


def checkpoint_id(config: RunnableConfig) -> str:
    configurable: dict[str, Any] = config.get("configurable", {})
    return str(configurable["checkpoint_id"])


def time_travel(graph: GraphT, config: RunnableConfig) -> None:
    history = list(graph.get_state_history(config))
    print(f"{len(history)} checkpoints on thread {THREAD_ID!r}, newest first:")
    for snap in history:
        step = snap.metadata.get("step") if snap.metadata else None
        count = len(snap.values.get("messages", []))
        print(
            f"  step {step!s:>2}  next={list(snap.next)!s:<14}"
            f" messages={count}  id={checkpoint_id(snap.config)}"
        )

    # The checkpoint just before the assistant answered the codename turn: the
    # user's message is in, and the assistant is the next node to run.
    target = next(
        snap
        for snap in history
        if snap.next == ("assistant",)
        and CODENAME_RE.search(str(snap.values["messages"][-1].content))
    )
    original_message = target.values["messages"][-1]
    print()
    print(f"Forking from checkpoint {checkpoint_id(target.config)}")
    print(f"  where the user had said: {original_message.content!r}")

    # Replace that message (same id, so add_messages overwrites it), then run on.
    edited = HumanMessage(content=f"Our project codename is {FORK_WORD}.", id=original_message.id)
    fork_config = graph.update_state(target.config, {"messages": [edited]})
    print(f"  update_state wrote checkpoint {checkpoint_id(fork_config)}: {edited.content!r}")
    parent = graph.get_state(fork_config).parent_config
    print(f"  its parent is {checkpoint_id(parent) if parent else None}, the checkpoint above")
    replayed = graph.invoke(None, fork_config)
    print(f"  replaying from the fork, the assistant says: {replayed['messages'][-1].content!r}")
    question = "Can you remind me of the codename?"
    say(graph, config, question)

    print()
    print("Two branches now share the same past:")
    original_end = history[0]
    fork_end = graph.get_state(config)
    print(f"  original branch ends at {checkpoint_id(original_end.config)}:")
    print(f"    {last_reply(original_end)!r}")
    print(f"  forked branch ends at   {checkpoint_id(fork_end.config)}:")
    print(f"    {last_reply(fork_end)!r}")
    check(CODENAME in last_reply(original_end), "the original branch lost its codename")
    check(FORK_WORD in last_reply(fork_end), "the fork did not take the edited codename")


# --------------------------------------------------------------------------- main


def open_serde() -> EncryptedSerializer | None:
    """The serializer for LANGGRAPH_AES_KEY, or None (after saying why) if the key is unusable."""
    try:
        return EncryptedSerializer.from_pycryptodome_aes()  # reads LANGGRAPH_AES_KEY
    except ConfigurationError as exc:  # the message never contains the key
        print(f"Cannot use the key: {exc}", file=sys.stderr)
        print(
            f"Unset {KEY_ENV_VAR} to use the demo key. Nothing was changed on disk.",
            file=sys.stderr,
        )
        return None


def stored_checkpoints() -> int:
    """How many checkpoints of the demo thread the database holds (0 if there is none)."""
    if not DB_FILE.exists():
        return 0
    with sqlite3.connect(DB_FILE) as raw:
        tables = {name for (name,) in raw.execute("SELECT name FROM sqlite_master")}
        count = 0
        if "checkpoints" in tables:
            (count,) = raw.execute(
                "SELECT count(*) FROM checkpoints WHERE thread_id = ?", (THREAD_ID,)
            ).fetchone()
    raw.close()
    return int(count)


def open_saver(conn: sqlite3.Connection, serde: EncryptedSerializer) -> SqliteSaver:
    """The sealed saver on ``conn``, set up: its tables and this store's identity."""
    saver = SqliteSaver(conn, serde=serde)
    saver.setup()
    return saver


def older_store() -> bool:
    """Whether the demo database holds checkpoints but no sealed store identity (0.3's demo)."""
    if not DB_FILE.exists():
        return False
    with closing(sqlite3.connect(DB_FILE)) as raw:
        tables = {name for (name,) in raw.execute("SELECT name FROM sqlite_master")}
        if "checkpoints" not in tables:
            return False
        threads = {t for (t,) in raw.execute("SELECT DISTINCT thread_id FROM checkpoints")}
    return bool(threads) and "__secure_serde_store__" not in threads


def first_run(serde: EncryptedSerializer, config: RunnableConfig) -> None:
    conn = sqlite3.connect(DB_FILE, check_same_thread=False)
    try:
        graph = build_graph(open_saver(conn, serde))
        heading("1. Memory across turns (one thread, encrypted checkpoints)")
        say(graph, config, "Hi! My name is Ada.")
        say(graph, config, f"Our project codename is {CODENAME}.")
        say(graph, config, "Quick check: what is our project codename?")
    finally:
        conn.close()  # also folds SQLite's write-ahead log back into the file

    heading("2. What SQLite actually stores")
    inspect_raw_file()

    heading("3. Time travel: history, then a fork from an earlier checkpoint")
    conn = sqlite3.connect(DB_FILE, check_same_thread=False)
    try:
        time_travel(build_graph(open_saver(conn, serde)), config)
    finally:
        conn.close()


def resumed_run(serde: EncryptedSerializer, config: RunnableConfig, stored: int) -> None:
    heading("Resuming the encrypted thread from the last run")
    print(f"{display(DB_FILE)} holds {stored} checkpoints of thread {THREAD_ID!r}.")
    conn = sqlite3.connect(DB_FILE, check_same_thread=False)
    try:
        graph = build_graph(open_saver(conn, serde))
        snapshot = graph.get_state(config)
        print(f"  the last reply, decrypted: {last_reply(snapshot)!r}")
        say(graph, config, "Hello again. Do you still remember our codename?")
    finally:
        conn.close()
    heading("What SQLite stores after the resumed turn")
    inspect_raw_file()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--fresh",
        action="store_true",
        help=f"delete the demo database ({display(DB_FILE)}) first and start a new thread",
    )
    args = parser.parse_args(argv)

    heading("Key")
    ensure_key()
    serde = open_serde()  # checked before any file is touched
    if serde is None:
        return 2

    config: RunnableConfig = {"configurable": {"thread_id": THREAD_ID, "user_email": USER_EMAIL}}
    DEMO_DIR.mkdir(mode=0o700, exist_ok=True)
    if args.fresh:
        for path in raw_files():
            path.unlink()
        print(f"--fresh: deleted the old demo database {display(DB_FILE)}")
    if older_store():
        print(
            f"{display(DB_FILE)} was written by an older version of this demo (secure_serde"
            " 0.3): it has no store identity, so the sealed saver refuses it"
            " (StoreIdentityError). Copy it into a new sealed store with"
            f" `{cli_command()} adopt {shlex.quote(display(DB_FILE))} new.sqlite` (same key;"
            " docs/upgrading.md),"
            " or pass --fresh"
            " to delete the demo database and start over.",
            file=sys.stderr,
        )
        return 2
    try:
        stored = stored_checkpoints()
        if stored:
            resumed_run(serde, config, stored)
        else:
            print(f"New database: {display(DB_FILE)}")
            first_run(serde, config)
    except DecryptionError as exc:
        print(f"Cannot read {display(DB_FILE)}: {exc}", file=sys.stderr)
        print(
            "It was written under another key. Set that key again, or pass --fresh to"
            " delete the demo database and start over.",
            file=sys.stderr,
        )
        return 2

    heading("Done")
    print(f"Everything above was stored encrypted in {display(DB_FILE)}.")
    print("Run this demo again: the next run resumes the same thread from that file.")
    print("Check every row of the store with the operator's tool, under the same key:")
    # Printed to run as is, from the directory the demo was started in.
    prefix = "" if KEY_FROM_ENV else f"{KEY_ENV_VAR}=$(cat {shlex.quote(display(KEY_FILE))}) "
    print(f"  {prefix}{cli_command()} audit {shlex.quote(display(DB_FILE))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
