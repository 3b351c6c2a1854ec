"""Every pass returns `PassReport`; the old report names are its aliases, their attributes kept."""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from secure_serde import PassReport, RewrapProgress, RewrapReport, SealedSaver
from secure_serde.passes import PassProgress
from secure_serde.savers import AdoptReport
from secure_serde.sealing import ReindexReport
from tests.serdes_support import env_serde

KEY = "pass-report-test-key-0123456789a"


def test_the_old_report_names_are_the_one_report_type() -> None:
    assert RewrapReport is PassReport
    assert AdoptReport is PassReport
    assert ReindexReport is PassReport
    assert RewrapProgress is PassProgress


def _sealed_with_rows(count: int) -> SealedSaver:
    saver = SealedSaver(InMemorySaver(), serde=env_serde(KEY))
    saver.setup()
    config: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    for step in range(count):
        checkpoint = empty_checkpoint()
        metadata: Any = {"source": "loop", "step": step, "run_id": f"run-{step}"}
        config = saver.put(config, checkpoint, metadata, {})
    return saver


def test_reindex_returns_a_pass_report_that_says_would_in_a_dry_run() -> None:
    saver = _sealed_with_rows(3)
    dry = saver.reindex(dry_run=True)
    assert isinstance(dry, PassReport)
    assert (dry.name, dry.dry_run, dry.rewritten, dry.changed) == ("reindex", True, 3, 3)
    assert dry.key_id is None
    assert any("would re-index 3" in line for line in dry.summary())
    done = saver.reindex()
    assert (done.dry_run, done.rewritten, done.complete, done.rotated) == (False, 3, True, True)
    assert len(done.dropped) == 1
    assert done.to_json()["details"]["complete"] is True
    assert not any("would" in line for line in done.summary())
    again = saver.reindex(rotate=False)
    assert (again.rewritten, again.current, again.ok) == (0, 3, True)
