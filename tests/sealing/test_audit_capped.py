"""The sealed audit lists the first 1,000 findings and counts them all: a store full of bad rows
cannot fill memory (or the terminal) with their descriptions."""

from __future__ import annotations

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointMetadata, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from secure_serde import SealedSaver
from secure_serde._report import MAX_LISTED_FAILURES, Kept
from secure_serde.sealing import audit_sealed
from tests.serdes_support import env_serde

KEY = b"audit-capped-test-key-0123456789"
EXTRA = 7


def test_kept_lists_the_first_rows_and_counts_every_one() -> None:
    kept: Kept[int] = Kept()
    for i in range(MAX_LISTED_FAILURES + EXTRA):
        kept.append(i)
    assert kept.items == list(range(MAX_LISTED_FAILURES))
    assert kept.total == MAX_LISTED_FAILURES + EXTRA


def test_a_store_of_more_bad_rows_than_listed_is_counted_in_full() -> None:
    saver = SealedSaver(InMemorySaver(), serde=env_serde(KEY))
    saver.setup()
    metadata: CheckpointMetadata = {"source": "loop", "step": 1}
    for i in range(MAX_LISTED_FAILURES + EXTRA):
        # Each checkpoint names a parent that was never written: a cut history, one finding.
        config: RunnableConfig = {
            "configurable": {"thread_id": f"t{i}", "checkpoint_ns": "", "checkpoint_id": "gone"}
        }
        saver.put(config, empty_checkpoint(), metadata, {})
    report = audit_sealed(saver)
    assert report.checkpoints == MAX_LISTED_FAILURES + EXTRA
    assert report.finding_count == MAX_LISTED_FAILURES + EXTRA
    assert len(report.findings) == MAX_LISTED_FAILURES
    assert {f.error for f in report.findings} == {"HistoryError"}
    assert not report.clean
