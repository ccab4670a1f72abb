"""The nightly incremental case: a root audited, about 5 % more batches appended in place, and the rerun on the same
warehouse must leave the result tables, and the tables it ingested, a full run over the final root leaves
(benchmarks/log_append.py builds the root as it stood before the append, and appends)."""

from __future__ import annotations

import filecmp
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable

from pipeline.generate.cluster import COMPACTED_TOPICS_GLOB
from pipeline.sources.kafka_format.windows import decode_segment
from schemas.batches import STATUS_OK
from tests import benchmark_modules

REPO = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).parent / "produce-audit"
SHARE = 0.05
# The tables an ingest writes from the segments and the files beside them (not the manifest, which describes
# each segment's decode, nor `offset_commits`, which the generator does not fill).
INGEST_TABLES = (
    "batches",
    "transaction_log",
    "txn_index",
    "producer_snapshots",
    "leader_epochs",
    "file_problems",
    "checkpoints",
    "partition_metadata",
)
REPLAY_LINE = re.compile(r"(?P<whole>\d+) partition\(s\) replayed whole, (?P<went_on>\d+) going on from the kept")
COORDINATOR_LINE = re.compile(r"coordinator findings: (?P<kept>\d+) partition\(s\) taken from the kept replay")
SEGMENTS_LINE = re.compile(r"segments: (?P<new>\d+) new, .* (?P<skipped>\d+) skipped, (?P<removed>\d+) removed")


log_append = benchmark_modules.load("log_append")


@pytest.fixture(scope="module")
def final_root(tmp_path_factory) -> Path:
    """Small segments, so that the newest 5 % fill whole segments of some partitions and part of others. 6,000
    batches in 16 KiB segments give as many segments as 20,000 in 64 KiB ones, at a third of the rows to audit
    three times over."""
    root = tmp_path_factory.mktemp("nightly") / "final"
    completed = subprocess.run(
        [str(CLI), "generate", "--out", str(root), "--batches", "6000", "--seed", "11", "--segment-bytes", "16384"],
        capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    return root


def files_under(root: Path) -> list[Path]:
    return sorted(path.relative_to(root) for path in root.rglob("*") if path.is_file())


def test_withhold_truncates_on_batch_boundaries_and_append_restores_the_root(final_root, tmp_path):
    before = tmp_path / "before"

    withheld = log_append.withhold(final_root, before, SHARE)

    assert withheld.segments_truncated > 0 and withheld.segments_left_out > 0
    assert 0.04 < withheld.batches / withheld.total_batches < 0.06
    truncated = [
        name for name in files_under(before)
        if name.suffix == ".log" and (before / name).stat().st_size < (final_root / name).stat().st_size
    ]  # fmt: skip
    assert len(truncated) == withheld.segments_truncated
    for name in truncated:
        prefix, whole = (before / name).read_bytes(), (final_root / name).read_bytes()
        assert whole.startswith(prefix)
        assert len(prefix) in decode_segment(whole, verify_records=False)["position"].to_pylist()
        assert set(decode_segment(prefix, verify_records=False)["entry_status"].to_pylist()) == {STATUS_OK}
    left_out = set(files_under(final_root)) - set(files_under(before))
    assert len([name for name in left_out if name.suffix == ".log"]) == withheld.segments_left_out

    appended = log_append.append(before, final_root)

    assert appended.segments == withheld.segments_truncated + withheld.segments_left_out
    assert appended.removed == 0
    assert files_under(before) == files_under(final_root)
    _, mismatched, errors = filecmp.cmpfiles(before, final_root, files_under(final_root), shallow=False)
    assert mismatched == [] and errors == []


def start_run(root: Path, warehouse: Path, conf: Path, log: Path) -> subprocess.Popen:
    """`produce-audit run` over the root's broker dirs, its log in a file (two runs at once never block on a pipe),
    at DEBUG: the lines of what the rerun took from the kept replay are detail."""
    args = [str(CLI), "run", "--warehouse", str(warehouse), "--conf", str(conf), "--fail-on", "never"]
    for broker in sorted(root.glob("broker-*")):
        args += ["--input", str(broker)]
    with log.open("w") as stderr:
        env = {**os.environ, "PRODUCE_AUDIT_LOG_LEVEL": "DEBUG"}
        return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=stderr, stdin=subprocess.DEVNULL, env=env)


def finished(process: subprocess.Popen, log: Path) -> str:
    assert process.wait(timeout=600) == 0, log.read_text()[-3000:]
    return log.read_text()


def test_nightly_rerun_after_an_append_gives_a_full_runs_tables(final_root, tmp_path):
    root = tmp_path / "root"
    conf = tmp_path / "generated.yaml"
    conf.write_text(f'audit:\n  compacted_topics: ["{COMPACTED_TOPICS_GLOB}"]\n')
    nightly, full = tmp_path / "wh-nightly", tmp_path / "wh-full"
    log_append.withhold(final_root, root, SHARE)
    finished(start_run(root, nightly, conf, tmp_path / "first.err"), tmp_path / "first.err")
    first_files = set(DeltaTable(str(nightly / "transaction_log")).file_uris())
    log_append.append(root, final_root)

    rerun = start_run(root, nightly, conf, tmp_path / "rerun.err")  # the two runs at once: one test, two cores
    fresh = start_run(root, full, conf, tmp_path / "full.err")
    rerun_log = finished(rerun, tmp_path / "rerun.err")
    finished(fresh, tmp_path / "full.err")

    outcomes = {name: int(count) for name, count in SEGMENTS_LINE.search(rerun_log).groupdict().items()}
    assert outcomes["skipped"] > 0 and outcomes["new"] > 0, rerun_log  # the incremental ingest, not a full one
    assert outcomes["removed"] == 0
    went_on = REPLAY_LINE.search(rerun_log)
    assert went_on and int(went_on["went_on"]) > int(went_on["whole"]), rerun_log  # the kept replay, gone on from
    assert "frame producer_batches: checked on the replayed rows" in rerun_log  # and the row frames' findings
    assert "aggregate transactions: over the replayed rows" in rerun_log  # and the kept aggregates' parts
    assert "aggregate producer_state: over the replayed rows" in rerun_log
    assert "aggregate segments: over the replayed rows" in rerun_log
    assert "aggregate partition_producers: over the replayed rows" in rerun_log
    # the coordinator records and findings of the `__transaction_state` partitions the append left alone
    assert int(COORDINATOR_LINE.search(rerun_log)["kept"]) > 0, rerun_log
    assert log_append.differing_rows(nightly, full) == {}
    assert {table: differing for table in INGEST_TABLES if (differing := differing_rows(nightly, full, table))} == {}
    # The unchanged `__transaction_state` segments kept their transaction_log files; the grown ones got new ones.
    files = set(DeltaTable(str(nightly / "transaction_log")).file_uris())
    assert files & first_files and files - first_files


def differing_rows(warehouse: Path, other: Path, table: str) -> tuple[int, int] | None:
    """(rows only in `warehouse`, rows only in `other`) of an ingest table, counted with repeats; None when equal."""
    rows, other_rows = (
        Counter(
            json.dumps(row, sort_keys=True, default=str)
            for row in DeltaTable(str(at / table)).to_pyarrow_table().to_pylist()
        )
        for at in (warehouse, other)
    )
    only, other_only = rows - other_rows, other_rows - rows
    return (only.total(), other_only.total()) if only or other_only else None
