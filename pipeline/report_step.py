"""The report step: a run's summary.json, report.html, report.md and findings.jsonl under WH/reports/RUN_ID/, and
the `run` section they open with, of this run or of an earlier one from its `runs` row.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any

from pyspark.sql import functions as F

import schemas
from pipeline import __version__
from pipeline.config import Settings
from pipeline.parallel import side_by_side
from pipeline.reports.changes import build_changes
from pipeline.reports.details import detail_sections
from pipeline.reports.findings_export import write_findings_jsonl
from pipeline.reports.formatting import WITHOUT_INPUT
from pipeline.reports.gather import gather
from pipeline.reports.html import render_html
from pipeline.reports.markdown import render_markdown
from pipeline.reports.run_rows import run_rows
from pipeline.reports.summary import (
    SUMMARY_SECTIONS,
    summary_of,
    summary_sections,
    write_report_file,
    write_summary,
)
from pipeline.run_record import RunRecord, StepResult
from pipeline.sources.dumplog.grammar import UNKNOWN
from pipeline.tables.publication import AUDIT_COMMANDS
from pipeline.tables.store import TableStore

log = logging.getLogger(__name__)

UNKNOWN_DUMP_LINES = f"dumplog.lines.{UNKNOWN}"  # the `runs.counts` entry the report shows


def write_report(
    store: TableStore,
    settings: Settings,
    section: dict[str, Any],
    result: StepResult,
    versions: dict[str, int] | None = None,
) -> None:
    """Report on the run the `section` describes, from its rows as of `versions` (the latest without), and put the
    summary and its counts by severity in `result`: the exit code is the report's."""
    run_id, top_n = section["id"], settings.report.top_findings
    started = time.perf_counter()
    # The sections' small queries are one job; the export and the diff with the last run run beside it.
    rows = run_rows(store, run_id, versions)
    sections = {**summary_sections(rows, top_n), **detail_sections(rows, top_n)}
    parts = side_by_side(
        {
            "sections": partial(gather, sections),
            "findings": partial(_export_findings, store, run_id, versions),
            "changes": partial(build_changes, store, run_id, top_n, versions),
        }
    )
    summary = summary_of(section, parts["sections"])
    details = {name: parts["sections"][name] for name in sections if name not in SUMMARY_SECTIONS}
    changes = parts["changes"]
    write_summary(summary, store.warehouse)
    html = write_report_file(store.warehouse, run_id, "report.html", render_html(summary, details, changes))
    write_report_file(store.warehouse, run_id, "report.md", render_markdown(summary, details, changes))
    log.info(
        "report of run %s: %d finding(s), written in %.1f s to %s (with report.md, summary.json, findings.jsonl)",
        run_id,
        summary["findings"]["total"],
        time.perf_counter() - started,
        html,
    )
    result.summary = summary
    result.findings_by_severity = dict(summary["findings"]["by_severity"])


def _export_findings(store: TableStore, run_id: str, versions: Mapping[str, int] | None) -> str:
    findings = store.read("findings", schema=schemas.FINDINGS, version=(versions or {}).get("findings"))
    exported = write_findings_jsonl(findings.where(F.col("run_id") == run_id), store.warehouse, run_id)
    log.debug("findings of run %s written to %s", run_id, exported)
    return exported


def run_section(record: RunRecord, store: TableStore, counts: Mapping[str, int]) -> dict[str, Any]:
    """The `run` section of a report on the running command, from its record and counts so far."""
    return {
        **_of_counts(counts),
        "id": record.run_id,
        "command": record.command,
        "started_at": _iso(record.started_at),
        "inputs": list(record.inputs or []),
        "reference_time_ms": record.reference_time_ms,
        "delta_backend": store.backend_name,
        "tool_version": __version__,
        "reported_at": _iso(datetime.now(UTC)),
    }


def audited_run_section(store: TableStore, audited_run_id: str) -> dict[str, Any]:
    """The `run` section of a report on an earlier run, from that run's row in `runs` when it has one."""
    section: dict[str, Any] = {"id": audited_run_id}
    if store.exists("runs"):
        row = (
            store.read("runs", schema=schemas.RUNS)
            .where((F.col("run_id") == audited_run_id) & F.col("command").isin(*AUDIT_COMMANDS))
            .first()
        )
        if row is not None:
            section.update(
                command=row.command,
                started_at=_iso(row.started_at),
                inputs=list(row.inputs or []),
                reference_time_ms=row.reference_time_ms,
                delta_backend=row.delta_backend,
                tool_version=row.tool_version,
                **_of_counts(row.counts or {}),
            )
    section["reported_at"] = _iso(datetime.now(UTC))
    return section


def _of_counts(counts: Mapping[str, int]) -> dict[str, Any]:
    """What the report says from the run's counts: the dump-text lines that fit no layout (0 for a run that read
    no dump text, null when the run ingested nothing, an `audit`, so the key is always there), and the rules that
    had nothing to read."""
    return {
        "unknown_dump_lines": counts.get(UNKNOWN_DUMP_LINES, 0 if "batches" in counts else None),
        "rules_without_input": sorted(
            key.removeprefix(WITHOUT_INPUT) for key in counts if key.startswith(WITHOUT_INPUT)
        ),
    }


def _iso(moment: datetime) -> str:
    """UTC ISO-8601 with a Z; PySpark collects timestamps as naive local time, which astimezone understands."""
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
