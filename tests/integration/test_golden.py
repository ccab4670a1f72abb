"""`produce-audit compare`: a run's result tables against golden outputs, as CI uses it.

The bundled sample's golden outputs live in tests/golden/sample; `compare --update-golden` wrote them, and a
change of any verdict, transaction or summary of the sample shows here as a readable difference.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from pyspark.sql import types as T

from pipeline.reports.golden import compare_tables, compared_schema
from tests.commands import in_process

REPO = Path(__file__).resolve().parents[2]
SAMPLE_GOLDEN = REPO / "tests" / "golden" / "sample"


@pytest.fixture(scope="module")
def sample_warehouse(spark, tmp_path_factory) -> Path:
    warehouse = tmp_path_factory.mktemp("golden") / "wh"
    completed = in_process("run", "--input", str(REPO / "samples" / "basic"), "--warehouse", str(warehouse))
    assert completed.returncode == 1, completed.stderr[-3000:]  # the sample's CRITICAL finding
    return warehouse


def test_the_sample_matches_its_golden_outputs(sample_warehouse, tmp_path):
    junit = tmp_path / "compare.xml"
    completed = in_process(
        "compare", "--actual", str(sample_warehouse), "--golden", str(SAMPLE_GOLDEN), "--junit", str(junit)
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr[-3000:]
    assert completed.stdout.splitlines() == [
        "findings: equal (2 rows)",
        "transactions: equal (2 rows)",
        "producer_state: equal (5 rows)",
        "partition_summary: equal (4 rows)",
    ]
    suite = ET.parse(junit).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures")) == ("4", "0")


def test_update_golden_writes_the_same_files_again(sample_warehouse, tmp_path):
    """Sorted rows and no run ids: a second run of the same input gives byte-identical golden files."""
    completed = in_process("compare", "--actual", str(sample_warehouse), "--golden", str(tmp_path), "--update-golden")
    assert completed.returncode == 0, completed.stderr[-3000:]
    for expected in sorted(SAMPLE_GOLDEN.glob("*.jsonl")):
        assert (tmp_path / expected.name).read_text() == expected.read_text(), expected.name
    assert "{input1}/broker-0/" in (tmp_path / "findings.jsonl").read_text()


def test_a_changed_golden_output_is_a_readable_difference_and_exit_1(sample_warehouse, tmp_path):
    golden = tmp_path / "golden"
    shutil.copytree(SAMPLE_GOLDEN, golden)
    findings = golden / "findings.jsonl"
    findings.write_text(findings.read_text().replace('"severity":"ERROR"', '"severity":"WARN"'))
    transactions = golden / "transactions.jsonl"
    transactions.write_text("".join(transactions.read_text().splitlines(keepends=True)[1:]))
    with (golden / "producer_state.jsonl").open("a") as file:
        file.write('{"topic":"ghost","partition":9,"producer_id":5,"broker_id":0}\n')
    junit = tmp_path / "compare.xml"

    completed = in_process("compare", "--actual", str(sample_warehouse), "--golden", str(golden), "--junit", str(junit))

    assert completed.returncode == 1, completed.stderr[-3000:]
    lines = completed.stdout.splitlines()
    assert "findings: 0 missing, 0 unexpected, 1 changed (golden 2 rows, actual 2)" in lines
    assert any(
        line.startswith("  changed    {rule_code=SEQ-001,") and 'severity: "WARN" -> "ERROR"' in line for line in lines
    )
    assert "transactions: 0 missing, 1 unexpected, 0 changed (golden 1 rows, actual 2)" in lines
    assert '  missing    {"topic": "ghost", "partition": 9, "producer_id": 5, "broker_id": 0}' in lines
    assert "partition_summary: equal (4 rows)" in lines
    failed = {
        case.get("name") for case in ET.parse(junit).getroot().iter("testcase") if case.find("failure") is not None
    }
    assert failed == {"findings", "transactions", "producer_state"}


def test_a_missing_golden_folder_is_one_line_and_exit_2(sample_warehouse, tmp_path):
    completed = in_process("compare", "--actual", str(sample_warehouse), "--golden", str(tmp_path / "none"))
    assert completed.returncode == 2
    assert (
        completed.stderr.strip()
        .splitlines()[-1]
        .endswith("findings.jsonl: no golden output here; run compare with --update-golden")
    )


def test_rows_are_compared_as_multisets_with_null_keys_equal(spark):
    """A repeated row counts twice, a finding without a producer (a null key) pairs with its changed self."""
    schema = compared_schema("findings")

    def rows(*specs: dict) -> list[dict]:
        required = {"rule_name": "r", "severity": "ERROR", "message": "m"}
        return [{**dict.fromkeys(schema.names), **required, **spec} for spec in specs]

    file_problem = {"rule_code": "FMT-001", "topic": "t", "partition": 0, "segment": "a.log", "position": 7}
    gap = {"rule_code": "SEQ-001", "topic": "t", "partition": 0, "producer_id": 1, "base_offset": 5}
    golden = rows({**file_problem, "severity": "ERROR"}, gap, gap)
    actual = rows({**file_problem, "severity": "WARN"}, gap, {**gap, "base_offset": 9})

    diff = compare_tables(_frame(spark, actual, schema), _frame(spark, golden, schema), "findings")

    assert (diff.golden_rows, diff.actual_rows) == (3, 3)
    assert (diff.missing, diff.unexpected, diff.changed) == (1, 1, 1)
    assert diff.changed_examples == [
        "{rule_code=FMT-001, cluster_id=None, topic=t, partition=0, broker_id=None, producer_id=None, "
        'base_offset=None, segment=a.log, position=7} severity: "ERROR" -> "WARN"'
    ]
    assert '"base_offset": 5' in diff.missing_examples[0] and '"base_offset": 9' in diff.unexpected_examples[0]


def _frame(spark, rows: list[dict], schema: T.StructType):
    return spark.createDataFrame([tuple(row[name] for name in schema.names) for row in rows], schema)
