"""report.html and report.md: the run-to-run diff, escaping of hostile text, and the page in headless Chromium.

One warehouse, audited twice in this process (the `two_audit_runs` fixture): first the bundled sample without its
`orders-1` partition, then the whole sample, so the second run's report has findings that are new against the first.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest
from pyspark.sql import functions as F

import schemas
from pipeline.audit.core.registry import RULES
from pipeline.reports import charts
from pipeline.reports.changes import IDENTITY, build_changes, compare_findings, previous_audit_run
from pipeline.reports.details import timeline_section
from pipeline.reports.gather import gather
from pipeline.reports.html import render_html
from pipeline.reports.markdown import render_markdown
from pipeline.tables.store import TableStore

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "basic"
SCREENSHOT = REPO / "build" / "test-report-page.png"  # kept after the run, for a person or a CI artifact
CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "chromium", "chromium-browser")
HOSTILE = '<script>alert("x")</script>"><img src=x onerror=alert(1)>|`*_[a](http://evil)'


@pytest.fixture(scope="module")
def audited(spark, two_audit_runs):
    """(store, earlier run id, later run id): the sample without orders-1, then the whole sample."""
    warehouse, earlier, later = two_audit_runs
    return TableStore(spark, str(warehouse)), earlier, later


def _published_findings(store: TableStore, run_id: str) -> set[tuple]:
    """The run's distinct finding identities, read at the version it published: the oracle for the diff."""
    versions = last_run_versions(store, run_id)
    rows = store.read("findings", schema=schemas.FINDINGS, version=versions["findings"]).where(
        F.col("run_id") == run_id
    )
    return {tuple(row) for row in rows.select(*IDENTITY).collect()}


def last_run_versions(store: TableStore, run_id: str) -> dict[str, int]:
    row = store.read("runs", schema=schemas.RUNS).where(F.col("run_id") == run_id).first()
    return dict(row.table_versions)


def test_the_report_files_lie_beside_summary_json(audited):
    store, earlier, later = audited
    for run_id in (earlier, later):
        folder = Path(store.warehouse) / "reports" / run_id
        assert sorted(p.name for p in folder.iterdir()) == [
            "findings.jsonl",
            "report.html",
            "report.md",
            "summary.json",
        ]
    markdown = (Path(store.warehouse) / "reports" / later / "report.md").read_text()
    assert f"Since run {earlier}: **2 new**" in markdown.replace("\\", "")
    assert "No comparison" in (Path(store.warehouse) / "reports" / earlier / "report.md").read_text()


def test_the_page_says_what_to_do_for_each_rule_that_fired(audited):
    store, _, later = audited
    page = (Path(store.warehouse) / "reports" / later / "report.html").read_text()
    fired = json.loads((Path(store.warehouse) / "reports" / later / "summary.json").read_text())["findings"]["by_rule"]
    assert fired
    for code in fired:
        assert html.escape(RULES[code].action) in page, code


def test_the_previous_run_is_the_last_published_audit_before_it(audited):
    store, earlier, later = audited
    assert previous_audit_run(store, later).run_id == earlier
    assert previous_audit_run(store, earlier) is None


def test_changes_against_the_previous_run_match_the_published_rows(audited):
    store, earlier, later = audited
    before, now = _published_findings(store, earlier), _published_findings(store, later)
    changes = build_changes(store, later, 20, last_run_versions(store, later))
    assert changes["previous_run"] == earlier
    assert changes["totals"] == {
        "new": len(now - before),
        "resolved": len(before - now),
        "persisting": len(now & before),
    }
    assert changes["totals"]["new"] == 2  # the duplicate and the gap of orders-1
    new_examples = {tuple(f[c] for c in IDENTITY) for f in changes["examples"]["new"]}
    assert new_examples == now - before


def test_compare_findings_sorts_new_resolved_and_persisting(spark):
    def finding(rule: str, severity: str, partition: int | None, offset: int | None, message: str, segment: str):
        return {
            "run_id": "r",
            "rule_code": rule,
            "rule_name": rule,
            "severity": severity,
            "topic": "t",
            "partition": partition,
            "producer_id": 7 if offset is not None else None,
            "producer_epoch": 0,
            "base_offset": offset,
            "last_offset": offset,
            "segment": segment,
            "position": 0,
            "message": message,
            "evidence": None,
            "broker_id": None,
        }

    previous = [
        finding("SEQ-001", "ERROR", None, None, "kept", "/old/root/t-0/0.log"),  # nulls must match nulls
        finding("SEQ-004", "CRITICAL", 0, 5, "fixed", "/old/root/t-0/0.log"),
        finding("SEQ-004", "CRITICAL", 0, 5, "fixed", "/old/root/t-0/0.log"),  # twice: still one finding
        finding("EPO-006", "INFO", 1, 9, "changed severity", "/old/root/t-1/0.log"),
    ]
    current = [
        finding("SEQ-001", "ERROR", None, None, "kept, reworded", "/new/root/t-0/0.log"),
        finding("EPO-006", "WARN", 1, 9, "changed severity", "/new/root/t-1/0.log"),
        finding("SEQ-005", "CRITICAL", 1, 3, "appeared", "/new/root/t-1/0.log"),
    ]
    diff = compare_findings(
        spark.createDataFrame(current, schemas.FINDINGS), spark.createDataFrame(previous, schemas.FINDINGS), 10
    )
    assert diff["totals"] == {"new": 2, "resolved": 2, "persisting": 1}
    assert diff["by_rule"] == {
        "EPO-006": {"new": 1, "resolved": 1, "persisting": 0},
        "SEQ-001": {"new": 0, "resolved": 0, "persisting": 1},
        "SEQ-004": {"new": 0, "resolved": 1, "persisting": 0},
        "SEQ-005": {"new": 1, "resolved": 0, "persisting": 0},
    }
    assert [f["rule_code"] for f in diff["examples"]["new"]] == ["SEQ-005", "EPO-006"]  # worst first
    assert [f["message"] for f in diff["examples"]["resolved"]] == ["fixed", "changed severity"]
    assert diff["by_severity"]["persisting"]["ERROR"] == 1


def _hostile_page_data() -> tuple[dict, dict, dict]:
    """Report sections as the builders return them, every data string replaced by HOSTILE."""
    finding = {
        "severity": "ERROR",
        "rule_code": "SEQ-001",
        "rule_name": HOSTILE,
        "topic": HOSTILE,
        "partition": 0,
        "broker_id": 1,
        "base_offset": 3,
        "last_offset": 4,
        "producer_id": 9,
        "producer_epoch": 0,
        "segment": HOSTILE,
        "position": 0,
        "message": HOSTILE,
        "evidence": {HOSTILE: HOSTILE},
    }
    summary = {
        "run": {"id": HOSTILE, "inputs": [HOSTILE], "reference_time_ms": None},
        "findings": {
            "total": 1,
            "by_severity": {"INFO": 0, "WARN": 0, "ERROR": 1, "CRITICAL": 0},
            "by_rule": {"SEQ-001": {"name": HOSTILE, "count": 1, "by_severity": {"ERROR": 1}}},
            "top": [finding],
        },
        "transactions": {"total": 1, "by_outcome": {"COMMITTED": 0, "ABORTED": 0, "OPEN": 1, "EMPTY": 0}},
        "partitions": {"partitions": 1, "clusters": 1, "batches": 1, "records": 1, "aborted_records": 0},
    }
    partition = {
        "topic": HOSTILE,
        "partition": 0,
        "broker_id": 1,
        "log_end_offset": 10,
        "last_stable_offset": 3,
        "lso_lag": 7,
        "open_transactions": 1,
        "hanging_transactions": 1,
        "producer_count": 1,
        "batch_count": 1,
    }
    transaction = {
        "topic": HOSTILE,
        "partition": 0,
        "broker_id": 1,
        "producer_id": 9,
        "producer_epoch": 0,
        "first_offset": 3,
        "last_offset": 4,
        "end_timestamp": 2**62,  # out of datetime's range, as a damaged log may say
        "hanging": True,
        "cause": HOSTILE,
        "abort_command": f"kafka-transactions.sh abort --topic {HOSTILE}",
    }
    details = {
        "lso": {"lagging_partitions": 1, "max_lag": 7, "worst": [partition]},
        "open_transactions": {"open": 1, "hanging": 1, "listed": [transaction]},
        "durations": {"buckets": ["0 ms"], "by_outcome": {"OPEN": [1]}},
        "producers": {"distribution": [{"producers": "1", "partitions": 1}], "busiest": [partition]},
        "timeline": {
            "start_ms": 0,
            "end_ms": 10,
            "bins": 2,
            "bumps": [1, 0],
            "findings": {"ERROR": [0, 1]},
            "untimed": 0,
        },
    }
    changes = {
        "previous_run": HOSTILE,
        "reason": None,
        "totals": {"new": 1, "resolved": 0, "persisting": 0},
        "by_severity": {
            s: {"INFO": 0, "WARN": 0, "ERROR": int(s == "new"), "CRITICAL": 0}
            for s in ("new", "resolved", "persisting")
        },
        "by_rule": {"SEQ-001": {"new": 1, "resolved": 0, "persisting": 0}},
        "examples": {"new": [finding], "resolved": []},
    }
    return summary, details, changes


def test_text_from_the_data_is_escaped_in_the_page():
    page = render_html(*_hostile_page_data())
    assert "<script" not in page and "<img" not in page and 'href="http' not in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&quot;&gt;&lt;img src=x onerror=alert(1)&gt;" in page
    assert f"{2**62} ms" in page  # the out-of-range timestamp is shown as a number


def test_text_from_the_data_is_escaped_in_the_markdown():
    markdown = render_markdown(*_hostile_page_data())
    # Code spans show their text as it is (CommonMark), so the abort command keeps its characters there, but
    # a backtick from the data must not end the span early.
    (command,) = re.findall(r"`kafka-transactions[^`]*`", markdown)
    assert command.count("`") == 2 and "\\|" in command
    outside_code = markdown.replace(command, "")
    assert "<script" not in outside_code and "<img" not in outside_code
    assert not re.search(r"(?<!\\)\]\(http", outside_code)  # no link survives: the bracket is escaped
    table_rows = [line for line in markdown.splitlines() if line.startswith("| ERROR | SEQ-001")]
    (row,) = table_rows
    assert row.replace("\\|", "").count("|") == 7  # 6 cells: the pipes of the data are escaped


def test_chart_labels_from_the_data_are_escaped_and_not_mathtext():
    svg = charts.lso_chart(
        [{"topic": "a$x^2$<b>&", "partition": 0, "broker_id": None, "lso_lag": 3, "hanging_transactions": 0}]
    )
    assert svg.startswith("<svg") and "<b>" not in svg
    assert "a$x^2$&lt;b&gt;&amp;-0" in svg
    assert 'id="lso-' in svg and 'id="' not in svg.replace('id="lso-', "")  # ids prefixed per chart


def test_a_rule_firing_at_scale_hides_no_other_in_the_charts():
    """INFO findings by the hundred thousand beside a few of WARN and above: the rules are charted apart by
    severity, and the severities on a logarithmic axis whose ticks are plain numbers."""
    by_rule = {
        "EPO-006": {"count": 226_149, "by_severity": {"INFO": 226_149}},
        "SEQ-001": {"count": 3, "by_severity": {"ERROR": 3}},
        "SEQ-004": {"count": 2, "by_severity": {"CRITICAL": 1, "WARN": 1}},
    }
    attention, info = charts.rule_chart(by_rule, charts.ATTENTION), charts.rule_chart(by_rule, ("INFO",))
    assert "SEQ-001" in attention and "SEQ-004" in attention and "EPO-006" not in attention
    assert "EPO-006" in info and "SEQ-001" not in info
    assert charts.rule_chart({"SEQ-001": by_rule["SEQ-001"]}, ("INFO",)) is None
    severities = charts.severity_chart({"CRITICAL": 1, "ERROR": 3, "WARN": 0, "INFO": 235_460})
    assert "100,000" in severities and "mathdefault" not in severities
    assert "100,000" not in charts.severity_chart({"CRITICAL": 1, "ERROR": 3, "WARN": 0, "INFO": 40})


def _chromium() -> str | None:
    for candidate in CHROMIUM_CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    return None


def test_the_page_renders_in_headless_chromium(audited):
    chromium = _chromium()
    if chromium is None:
        pytest.skip("no Chromium installed (apt-get install chromium); .ci/run installs it when it runs as root")
    from playwright.sync_api import sync_playwright

    store, _, later = audited
    page_file = Path(store.warehouse) / "reports" / later / "report.html"
    SCREENSHOT.parent.mkdir(exist_ok=True)
    SCREENSHOT.unlink(missing_ok=True)
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on(
                "console",
                lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None,
            )
            page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
            page.on("request", lambda r: None if r.url.startswith("file://") else problems.append(f"request {r.url}"))
            page.on("requestfailed", lambda r: problems.append(f"failed {r.url}"))
            page.goto(page_file.as_uri(), wait_until="load")
            sections = page.eval_on_selector_all("main section h2", "hs => hs.map(h => h.textContent)")
            charts_drawn = page.eval_on_selector_all(
                "figure svg",
                "svgs => svgs.map(s => [s.getBoundingClientRect().width, s.querySelectorAll('path, use').length])",
            )
            new_count = page.text_content("#changes .new")
            page.screenshot(path=str(SCREENSHOT), full_page=True)
        finally:
            browser.close()
    print(f"screenshot of the report page: {SCREENSHOT}")
    assert problems == []
    assert sections == ["Changes", "Findings", "Transactions", "LSO and open transactions", "Producers", "Timeline"]
    assert len(charts_drawn) >= 6  # severity, rules, outcomes, durations, producers, timeline
    assert all(width > 200 and shapes > 3 for width, shapes in charts_drawn), charts_drawn
    assert new_count == "2 new"
    assert SCREENSHOT.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and SCREENSHOT.stat().st_size > 50_000


def test_the_timeline_places_findings_by_their_batch_time_and_counts_the_rest_apart(spark):
    batches = spark.createDataFrame(
        [
            ("c", "t", 0, 0, 0, 1, 0),
            ("c", "t", 0, 1, 10, 1, 1),  # producer 1's second epoch: a bump at 10
            ("c", "t", 0, 2, 5, 2, 0),
            ("c", "t", 0, 3, -1, 2, 0),  # no timestamp
        ],
        "cluster_id string, topic string, partition int, base_offset long, max_timestamp long, "
        "producer_id long, producer_epoch int",
    )
    findings = spark.createDataFrame(
        [
            ("c", "t", 0, 1, "ERROR"),
            ("c", "t", 0, 2, "WARN"),
            ("c", "t", 0, 3, "ERROR"),  # its batch has no time
            ("c", "t", 0, None, "INFO"),  # no batch
            ("c", "t", 1, 1, "ERROR"),  # a batch of another partition
        ],
        "cluster_id string, topic string, partition int, base_offset long, severity string",
    )

    timeline = gather({"timeline": timeline_section(batches, findings, bins=2)})["timeline"]

    assert timeline == {
        "start_ms": 0,
        "end_ms": 10,
        "bins": 2,
        "bumps": [0, 1],
        "findings": {"ERROR": [0, 1], "WARN": [1, 0]},
        "untimed": 3,
    }
