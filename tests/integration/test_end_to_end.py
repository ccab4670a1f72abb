"""The installed `produce-audit` command as users run it: a fresh process with the shipped defaults (1 GiB
driver, local[*]), never the test session's larger driver, over many log dirs (and, in
tests/integration/test_end_to_end_realdata.py, a file of its own so that the two runs can go to two workers, over
every real broker dir)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from deltalake import DeltaTable

from pipeline.cli import main
from pipeline.generate.recall import compare_with_findings
from tests.commands import cli

REPO = Path(__file__).resolve().parents[2]
GENERATED_GOLDEN = REPO / "tests" / "golden" / "generated-4000"
LARGE_TASK_BINARY = "Broadcasting large task binary"
MIB = 1024 * 1024


def run_over(inputs: list[Path], warehouse: Path, *extra: str) -> subprocess.CompletedProcess:
    args = ["run", "--warehouse", str(warehouse), *extra]
    for path in inputs:
        args += ["--input", str(path)]
    return cli(*args)


def last_run_counts(warehouse: Path) -> dict[str, int]:
    runs = DeltaTable(str(warehouse / "runs")).to_pyarrow_table()
    return dict(runs.column("counts")[runs.num_rows - 1].as_py())


def assert_finished_within_bounds(completed: subprocess.CompletedProcess, warehouse: Path) -> None:
    tail = "\n".join(completed.stderr.splitlines()[-30:])
    assert completed.returncode in (0, 1), f"exit {completed.returncode}:\n{tail}"
    assert LARGE_TASK_BINARY not in completed.stderr
    counts = last_run_counts(warehouse)
    assert 0 < counts["plan.max_bytes"] < MIB, counts
    assert counts["plan.plans"] > 0


@pytest.fixture(scope="module")
def generated_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("generated")
    completed = cli(
        "generate", "--out", str(root), "--batches", "4000", "--partitions", "60", "--brokers", "42",
        "--anomaly-rate", "0.002",
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr
    return root


def test_run_over_many_log_dirs_with_side_files(generated_root, tmp_path, spark):
    log_dirs = sorted(path for path in generated_root.iterdir() if path.is_dir() and not path.name.startswith("_"))
    assert len(log_dirs) >= 40
    partition_dirs = [p for log_dir in log_dirs for p in log_dir.iterdir() if p.is_dir()]
    assert len(partition_dirs) >= 50
    assert any(p.suffix == ".snapshot" for d in partition_dirs for p in d.iterdir())
    assert any(p.suffix == ".txnindex" for d in partition_dirs for p in d.iterdir())
    warehouse = tmp_path / "wh"

    # no configuration: the compacted topics are known from their log dirs' cleaner checkpoints
    completed = run_over(log_dirs, warehouse)

    assert_finished_within_bounds(completed, warehouse)
    assert completed.returncode == 1  # anomalies were injected
    counts = last_run_counts(warehouse)
    assert counts["plan.replay_read_files"] == 1  # the replay's tasks read the batches files
    assert counts["plan.optimising_compiler"] == 0  # 4,000 batches: the quick compiler alone
    summary = DeltaTable(str(warehouse / "partition_summary")).to_pyarrow_table()
    assert summary.num_rows >= 50
    # nothing configured and no cleaner run yet in these dirs (their cleaner-offset-checkpoints are empty): no
    # partition is taken for compacted, and none shows a compaction artefact
    assert set(summary["compacted_by"].to_pylist()) == {None}
    outcome = compare_with_findings(generated_root, warehouse)
    assert outcome["missed"] == [], outcome
    assert outcome["unexplained"] == [], outcome
    # every row of the result tables as compare --update-golden wrote them for this deterministic root; compared
    # in this process, on the test session (main() reuses the active SparkSession)
    compared = main(["compare", "--actual", str(warehouse), "--golden", str(GENERATED_GOLDEN)])
    assert compared == 0
