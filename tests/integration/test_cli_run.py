"""`produce-audit run`, `report` and `ingest` end to end: the bundled sample through `run`, in-process on the test
session's SparkSession, then `report` and `ingest` again on its warehouse."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from pipeline.cli import EXIT_FINDINGS, EXIT_OK, main

TABLES = ("batches", "findings", "transactions", "producer_state", "partition_summary", "runs")


def _require_pipeline() -> None:
    for module in (
        "pipeline.samples",
        "pipeline.sources.dispatch",
        "pipeline.audit.engine.run",
        "pipeline.tables.store",
    ):
        pytest.importorskip(module)


def _main_capturing_stdout(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return code, out.getvalue()


def _load(warehouse: Path, table: str):
    from deltalake import DeltaTable

    return DeltaTable(str(warehouse / table)).to_pyarrow_table()


@pytest.fixture(scope="module")
def sample_run(request, tmp_path_factory):
    """One `run` over the generated sample log root: (log root, warehouse, exit code, stdout)."""
    _require_pipeline()
    request.getfixturevalue("spark")  # main() reuses the active session
    from pipeline.samples import generate

    root = generate(tmp_path_factory.mktemp("sample"))
    warehouse = tmp_path_factory.mktemp("warehouse")
    code, out = _main_capturing_stdout(["run", "--input", str(root), "--warehouse", str(warehouse)])
    return root, warehouse, code, out


def test_run_end_to_end(sample_run):
    _, warehouse, code, out = sample_run
    assert code == EXIT_FINDINGS  # the sample holds ERROR and CRITICAL findings by design
    tables = {table: _load(warehouse, table) for table in TABLES}
    assert tables["batches"].num_rows > 0
    assert tables["findings"].num_rows > 0
    assert tables["partition_summary"].num_rows > 0
    assert tables["runs"].num_rows == 1

    runs = tables["runs"].to_pylist()[0]
    assert (runs["command"], runs["status"]) == ("run", "succeeded")
    run_id = runs["run_id"]
    assert set(tables["findings"].column("run_id").to_pylist()) == {run_id}

    summary_path = warehouse / "reports" / run_id / "summary.json"
    summary = json.loads(summary_path.read_text())
    assert summary["run"]["id"] == run_id
    assert summary["findings"]["total"] == tables["findings"].num_rows
    assert summary["transactions"]["total"] == tables["transactions"].num_rows
    assert dict(runs["counts"])["findings"] == tables["findings"].num_rows
    assert "Findings by severity" in out
    assert run_id in out


def test_report_again_gives_the_same_summary(sample_run):
    _, warehouse, _, _ = sample_run
    run_id = _load(warehouse, "runs").column("run_id")[0].as_py()
    summary_path = warehouse / "reports" / run_id / "summary.json"
    first = json.loads(summary_path.read_text())

    code, out = _main_capturing_stdout(["report", "--warehouse", str(warehouse), "--fail-on", "never"])

    assert code == EXIT_OK
    again = json.loads(summary_path.read_text())
    assert again["run"]["id"] == run_id
    first.pop("run"), again.pop("run")
    assert again == first
    assert "Top findings" in out


def test_ingesting_the_same_input_again_gives_identical_batches(sample_run):
    root, warehouse, _, _ = sample_run
    order = [
        ("topic", "ascending"),
        ("partition", "ascending"),
        ("source_file", "ascending"),
        ("position", "ascending"),
    ]
    before = _load(warehouse, "batches").sort_by(order)

    assert main(["ingest", "--input", str(root), "--warehouse", str(warehouse)]) == EXIT_OK

    after = _load(warehouse, "batches").sort_by(order)
    assert after.equals(before)
    assert [row["command"] for row in _load(warehouse, "runs").to_pylist()].count("ingest") == 1
