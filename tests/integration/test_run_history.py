"""What users read back from a warehouse's history: `report --as-of`, `compare --baseline-run`, findings.jsonl
and the stable keys of summary.json.

The warehouse is the `two_audit_runs` fixture: the sample without `orders-1`, then the whole sample, so the later
run has two findings the earlier one has not.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from datetime import UTC, datetime, timedelta
from xml.etree import ElementTree as ET

import pytest
from pyspark.sql import functions as F

import schemas
from pipeline.arguments import AsOf, parse_as_of
from pipeline.cli import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, main
from pipeline.reports.findings_export import FIELDS
from pipeline.reports.summary import OPEN_PARTITION_FIELDS
from pipeline.tables.publication import published_as_of
from pipeline.tables.store import TableStore

# summary.json's keys, as paths; `*` stands for a key taken from the data (a rule code, an evidence name).
# A key added, renamed or removed must change this set and SCHEMA_VERSION together.
SUMMARY_KEYS = {
    "schema_version",
    *(
        f"run.{key}"
        for key in (
            "id",
            "command",
            "started_at",
            "reported_at",
            "inputs",
            "reference_time_ms",
            "delta_backend",
            "tool_version",
            "unknown_dump_lines",
            "rules_without_input",
        )
    ),
    "findings.total",
    *(f"findings.by_severity.{severity}" for severity in ("INFO", "WARN", "ERROR", "CRITICAL")),
    "findings.by_rule.*.name",
    "findings.by_rule.*.count",
    "findings.by_rule.*.by_severity",
    *(
        f"findings.top[].{key}"
        for key in (
            "severity",
            "rule_code",
            "rule_name",
            "topic",
            "partition",
            "base_offset",
            "last_offset",
            "producer_id",
            "producer_epoch",
            "broker_id",
            "cluster_id",
            "segment",
            "position",
            "message",
        )
    ),
    "findings.top[].evidence",
    "transactions.total",
    *(f"transactions.by_outcome.{outcome}" for outcome in ("COMMITTED", "ABORTED", "OPEN", "EMPTY")),
    *(
        f"partitions.{key}"
        for key in (
            "partitions",
            "clusters",
            "batches",
            "records",
            "aborted_records",
            "with_open_transactions",
            "with_hanging_transactions",
        )
    ),
    *(
        f"partitions.open[].{key}"
        for key in (
            "topic",
            "partition",
            "broker_id",
            "cluster_id",
            "open_transactions",
            "hanging_transactions",
            "first_unstable_offset",
            "last_stable_offset",
            "log_end_offset",
        )
    ),
}
# Maps keyed by the data: a rule's severities (only those it has) and a finding's evidence end the path.
DATA_MAPS = ("findings.by_rule.*.by_severity", "findings.top[].evidence")
FINDINGS_JSONL_KEYS = {
    "run_id",
    "severity",
    "rule_code",
    "rule_name",
    "topic",
    "partition",
    "broker_id",
    "cluster_id",
    "producer_id",
    "producer_epoch",
    "base_offset",
    "last_offset",
    "segment",
    "position",
    "message",
    "evidence",
}


def _main(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def history(spark, two_audit_runs):
    """(warehouse, store, earlier run id, later run id, each run's `runs` row)."""
    warehouse, earlier, later = two_audit_runs
    store = TableStore(spark, str(warehouse))
    rows = {
        row.run_id: row
        for row in store.read("runs", schema=schemas.RUNS).where(F.col("run_id").isin(earlier, later)).collect()
    }
    return warehouse, store, earlier, later, rows


def _ms_after(moment: datetime) -> int:
    """The first epoch millisecond at or after `moment` (collected as naive local time, to the microsecond)."""
    return -int(-moment.astimezone(UTC).timestamp() * 1000 // 1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", AsOf(version=0)),
        ("17", AsOf(version=17)),
        ("1714521600000", AsOf(epoch_ms=1_714_521_600_000)),
        ("2024-05-01T00:00:00Z", AsOf(epoch_ms=1_714_521_600_000)),
        ("2024-05-01T00:00:00", AsOf(epoch_ms=1_714_521_600_000)),
    ],
)
def test_as_of_reads_small_numbers_as_versions_and_the_rest_as_times(text, expected):
    assert parse_as_of(text) == expected


def test_an_as_of_that_is_neither_says_what_it_may_be():
    with pytest.raises(ValueError, match="neither a version of the findings table, ISO-8601"):
        parse_as_of("yesterday")


def test_as_of_a_findings_version_is_the_run_that_published_it(history):
    _, store, earlier, later, rows = history
    earlier_version = rows[earlier].table_versions["findings"]
    later_version = rows[later].table_versions["findings"]
    assert earlier_version < later_version
    assert published_as_of(store, version=earlier_version).run_id == earlier
    assert published_as_of(store, version=later_version - 1).run_id == earlier  # the later run's own commits
    assert published_as_of(store, version=later_version).run_id == later


def test_as_of_a_time_is_the_last_run_finished_by_then(history):
    _, store, earlier, later, rows = history
    between = rows[later].finished_at - (rows[later].finished_at - rows[earlier].finished_at) / 2
    assert published_as_of(store, epoch_ms=_ms_after(rows[earlier].finished_at)).run_id == earlier
    assert published_as_of(store, epoch_ms=_ms_after(between)).run_id == earlier
    assert published_as_of(store, epoch_ms=_ms_after(rows[later].finished_at)).run_id == later


def test_report_as_of_reads_the_tables_as_that_run_published_them(history):
    """The earlier run's orders-1-less findings, although the later run replaced every topic's rows since; the
    time given as naive ISO-8601 (UTC)."""
    warehouse, _, earlier, later, rows = history
    between = rows[later].finished_at - (rows[later].finished_at - rows[earlier].finished_at) / 2
    as_of = datetime.fromtimestamp(_ms_after(between) / 1000, UTC).replace(tzinfo=None).isoformat()
    code, out, err = _main("report", "--warehouse", str(warehouse), "--fail-on", "never", "--as-of", as_of)
    assert code == EXIT_OK, err[-3000:]
    assert out.startswith(f"produce-audit run {earlier}\n")
    findings = rows[earlier].counts["findings"]
    assert re.search(rf"report of run {earlier}: {findings} finding\(s\), written in [0-9.]+ s", err), err[-3000:]
    summary = json.loads((warehouse / "reports" / earlier / "summary.json").read_text())
    assert summary["run"]["id"] == earlier
    assert summary["findings"]["total"] == rows[earlier].counts["findings"]
    partitions = summary["partitions"]["partitions"]
    assert partitions == rows[earlier].counts["partition_summary"] < rows[later].counts["partition_summary"]
    assert all(finding["partition"] != 1 or finding["topic"] != "orders" for finding in summary["findings"]["top"])


@pytest.mark.parametrize(
    ("as_of", "expected"),
    [
        (lambda rows, earlier: "999999", "past the latest version"),
        (lambda rows, earlier: str(_ms_after(rows[earlier].started_at) - 3_600_000), "before the first published"),
        (lambda rows, earlier: (datetime.now(UTC) + timedelta(days=1)).isoformat(), "past the latest recorded run"),
    ],
    ids=["version-after", "time-before", "time-after"],
)
def test_report_as_of_outside_the_history_exits_2_saying_why(history, as_of, expected):
    warehouse, _, earlier, _, rows = history
    code, _, err = _main("report", "--warehouse", str(warehouse), "--as-of", as_of(rows, earlier))
    assert code == EXIT_USAGE
    assert expected in err.strip().splitlines()[-1]


def test_as_of_and_run_id_exclude_each_other(history, capsys):
    warehouse, _, earlier, _, _ = history
    assert main(["report", "--warehouse", str(warehouse), "--run-id", earlier, "--as-of", "3"]) == EXIT_USAGE
    assert "not allowed with argument" in capsys.readouterr().err


def test_compare_against_a_baseline_run_shows_what_changed(history, tmp_path):
    warehouse, _, earlier, later, _ = history
    junit = tmp_path / "compare.xml"
    code, out, err = _main("compare", "--actual", str(warehouse), "--baseline-run", earlier, "--junit", str(junit))
    assert code == EXIT_FINDINGS, err[-3000:]
    lines = out.splitlines()
    assert lines[0] == f"findings: 0 missing, 2 unexpected, 0 changed (baseline {earlier} 0 rows, actual 2)"
    assert all(line.startswith("  unexpected {") for line in lines[1:3])
    assert all('"partition": 1' in line and '"topic": "orders"' in line for line in lines[1:3])
    assert "{input1}" in lines[1]  # the two runs' different roots are made alike
    suite = ET.parse(junit).getroot().find("testsuite")
    failed = {case.get("name") for case in suite.iter("testcase") if case.find("failure") is not None}
    assert "findings" in failed
    assert later not in lines[0]


def test_compare_a_run_with_itself_is_equal(history):
    warehouse, _, _, later, _ = history
    code, out, err = _main("compare", "--actual", str(warehouse), "--baseline-run", later, "--run-id", later)
    assert code == EXIT_OK, err[-3000:]
    assert [line.split(":")[1].strip().split(" ")[0] for line in out.splitlines()] == ["equal"] * 4


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--baseline-run", "20990101T000000Z-dead00"], "is not a published audit or run run"),
        (["--baseline-run", "x", "--golden", "g"], "not allowed with argument"),
        (["--baseline-run", "x", "--update-golden"], "give --golden DIR, not --baseline-run"),
    ],
)
def test_compare_baseline_errors_exit_2(history, argv, expected):
    warehouse = history[0]
    code, _, err = _main("compare", "--actual", str(warehouse), *argv)
    assert code == EXIT_USAGE
    assert expected in err


def test_findings_jsonl_holds_every_finding_of_the_run_worst_first_with_stable_keys(history):
    warehouse, store, _, later, rows = history
    lines = (warehouse / "reports" / later / "findings.jsonl").read_text().splitlines()
    findings = [json.loads(line) for line in lines]
    published = store.read("findings", schema=schemas.FINDINGS, version=rows[later].table_versions["findings"]).where(
        F.col("run_id") == later
    )
    assert len(findings) == published.count() == rows[later].counts["findings"] > 0
    assert set(FIELDS) == FINDINGS_JSONL_KEYS
    assert all(set(finding) == FINDINGS_JSONL_KEYS for finding in findings)
    assert {finding["run_id"] for finding in findings} == {later}
    severities = [finding["severity"] for finding in findings]
    order = ("CRITICAL", "ERROR", "WARN", "INFO")
    assert severities == sorted(severities, key=order.index)
    expected = {(row.rule_code, row.partition, row.base_offset) for row in published.collect()}
    assert {(f["rule_code"], f["partition"], f["base_offset"]) for f in findings} == expected
    assert not any(path.name.startswith(".") for path in (warehouse / "reports" / later).iterdir())


def _key_paths(value, prefix: str = "") -> set[str]:
    """Every key of a JSON value as a dotted path: list items as `[]`, the rule codes of by_rule as `*`."""
    if prefix in DATA_MAPS:
        return {prefix}
    if isinstance(value, dict):
        keys = {key: "*" if prefix == "findings.by_rule" else key for key in value}
        return set().union(*(_key_paths(inner, f"{prefix}.{keys[key]}".lstrip(".")) for key, inner in value.items()))
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return set().union(*(_key_paths(item, f"{prefix}[]") for item in value))
    return {prefix}


def test_summary_json_keys_are_pinned(history):
    warehouse, _, _, later, _ = history
    summary = json.loads((warehouse / "reports" / later / "summary.json").read_text())
    assert summary["schema_version"] == 4
    assert summary["findings"]["top"]
    keys = _key_paths(summary)
    if not summary["partitions"]["open"]:  # the sample has no open transaction: the fields its rows would have
        keys = keys - {"partitions.open"} | {f"partitions.open[].{name}" for name in OPEN_PARTITION_FIELDS}
    assert keys == SUMMARY_KEYS
