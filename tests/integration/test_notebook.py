"""notebooks/produce_audit.py outside Databricks: executed top to bottom in this process, on the test session.

The notebook is in Databricks' source format: its MAGIC cells (markdown, %pip) are comments to Python, so the file
runs as it is, as `python notebooks/produce_audit.py` runs it, with its parameters from the environment.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import runpy
import tomllib
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "produce_audit.py"
SAMPLE = REPO / "samples" / "basic"
SAMPLE_GOLDEN = REPO / "tests" / "golden" / "sample"
REFERENCE_TIME = "2026-01-01T01:00:00Z"  # an hour after the sample's last batch: nothing has expired yet
REFERENCE_TIME_MS = 1767229200000
CELL = "\n# COMMAND ----------\n"


def golden(table: str) -> list[dict]:
    return [json.loads(line) for line in (SAMPLE_GOLDEN / f"{table}.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def executed(spark, tmp_path_factory) -> tuple[dict, Path, str]:
    """The notebook's variables after a run on its default input, the bundled sample; its warehouse; its output."""
    warehouse = tmp_path_factory.mktemp("notebook") / "wh"
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as environment, contextlib.redirect_stdout(printed):
        environment.delenv("DATABRICKS_RUNTIME_VERSION", raising=False)
        environment.delenv("PRODUCE_AUDIT_LOG_ROOTS", raising=False)
        environment.setenv("PRODUCE_AUDIT_WAREHOUSE", str(warehouse))
        environment.setenv("PRODUCE_AUDIT_REFERENCE_TIME", REFERENCE_TIME)
        variables = runpy.run_path(str(NOTEBOOK), run_name="__main__")
    return variables, warehouse, printed.getvalue()


def test_the_steps_ran_on_the_sample_with_the_parameters_given(executed):
    variables, warehouse, _ = executed
    assert variables["log_roots"] == [str(SAMPLE)]
    runs = sorted(DeltaTable(str(warehouse / "runs")).to_pyarrow_table().to_pylist(), key=lambda run: run["started_at"])
    assert [(run["command"], run["status"]) for run in runs] == [
        ("ingest", "succeeded"),
        ("audit", "succeeded"),
        ("report", "succeeded"),
    ]
    assert runs[0]["inputs"] == [str(SAMPLE)]
    assert runs[1]["reference_time_ms"] == REFERENCE_TIME_MS
    assert variables["audited_run"].run_id == runs[1]["run_id"]


def test_the_findings_are_those_the_sample_holds(executed):
    """A duplicate batch (CRITICAL) and a sequence gap (ERROR), as in the golden outputs of a `run`."""
    variables, warehouse, printed = executed
    columns = ["rule_code", "severity", "topic", "partition", "producer_id", "base_offset", "last_offset", "message"]
    findings = DeltaTable(str(warehouse / "findings")).to_pyarrow_table().to_pylist()
    audited = [row for row in findings if row["run_id"] == variables["audited_run"].run_id]
    expected = golden("findings")
    assert sorted(tuple(row[c] for c in columns) for row in audited) == sorted(
        tuple(row[c] for c in columns) for row in expected
    )
    assert {row["severity"] for row in expected} == {"CRITICAL", "ERROR"}
    assert "Findings by severity" in printed  # the report step's text
    assert all(row["message"] in printed for row in expected)  # the findings table, shown as text


def test_the_charts_count_what_the_tables_hold(executed):
    variables, warehouse, _ = executed
    findings_per_severity = Counter(row["severity"] for row in golden("findings"))
    assert variables["severity_counts"].to_dict() == {
        severity: findings_per_severity[severity] for severity in ("INFO", "WARN", "ERROR", "CRITICAL")
    }
    bars = [patch.get_height() for patch in variables["by_severity"].patches]
    assert bars == list(variables["severity_counts"])
    assert variables["rule_counts"].to_dict() == dict(Counter(row["rule_code"] for row in golden("findings")))
    outcomes = variables["outcome_counts"].to_dict()
    assert outcomes == {o: Counter(row["outcome"] for row in golden("transactions"))[o] for o in outcomes}
    assert sum(outcomes.values()) == len(golden("transactions"))

    report_folder = warehouse / "reports" / variables["audited_run"].run_id
    assert (report_folder / "findings.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    summary = json.loads((report_folder / "summary.json").read_text())
    assert summary["findings"]["total"] == len(golden("findings"))


def test_every_cell_is_python_or_magic_and_the_pip_cells_install_what_pyproject_lists():
    header, source = NOTEBOOK.read_text().split("\n", 1)
    assert header == "# Databricks notebook source"
    cells = [cell.strip("\n").splitlines() for cell in source.split(CELL)]
    for lines in cells:
        magic = [line.startswith("# MAGIC") for line in lines if line]
        assert all(magic) or not any(magic), lines[:3]
    pip_lines = [lines[0] for lines in cells if lines[0].startswith("# MAGIC %pip")]
    assert pip_lines[0] == "# MAGIC %pip install --quiet --no-deps .."
    dependencies = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    from_the_runtime = {"pyspark", "delta-spark"}
    assert sorted(re.findall(r'"([^"]+)"', pip_lines[1])) == sorted(
        dependency for dependency in dependencies if re.split(r"[<>=!~]", dependency)[0] not in from_the_runtime
    )
