"""report.html: one self-contained page per audit run, for a browser without network.

The styles are inline and the charts are inline SVG (pipeline.reports.charts); the page loads nothing and
runs no script. Every string that comes from the data (topics, messages, evidence, which are hostile input
as much as the logs are) goes through html.escape; only fragments this module builds are marked Safe.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pipeline.audit.core.registry import RULES
from pipeline.reports import charts
from pipeline.reports.formatting import offsets, place, producer, reference_time, run_notes, utc
from schemas.findings import SEVERITIES

STYLE = """
:root { --ink: #111827; --muted: #6b7280; --line: #e5e7eb; --panel: #f9fafb; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--ink); }
header { background: #111827; color: #f9fafb; padding: 18px 32px; }
header h1 { margin: 0 0 4px; font-size: 20px; }
header p { margin: 2px 0; color: #d1d5db; }
nav { padding: 8px 32px; border-bottom: 1px solid var(--line); background: var(--panel); }
nav a { margin-right: 16px; color: #1d4ed8; text-decoration: none; }
main { padding: 8px 32px 40px; max-width: 1280px; }
section { margin-top: 28px; }
h2 { font-size: 17px; border-bottom: 2px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 14px; margin: 18px 0 6px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin-top: 16px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; min-width: 130px; background: #fff; }
.card b { display: block; font-size: 20px; }
.card span { color: var(--muted); font-size: 12px; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(480px, 1fr)); gap: 16px 32px; }
figure { margin: 0; }
figure svg { max-width: 100%; height: auto; }
figcaption, .note { color: var(--muted); font-size: 12px; }
table { border-collapse: collapse; margin: 6px 0; font-size: 13px; }
th, td { border-bottom: 1px solid var(--line); padding: 4px 10px 4px 0; text-align: left; vertical-align: top; }
th { font-weight: 600; white-space: nowrap; }
td:not(:last-child) { white-space: nowrap; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: var(--panel); padding: 1px 4px;
       overflow-wrap: anywhere; }
details summary { cursor: pointer; color: #1d4ed8; }
dl.evidence { display: grid; grid-template-columns: max-content 1fr; gap: 2px 10px; margin: 4px 0; }
dl.evidence dt { color: var(--muted); }
dl.evidence dd { margin: 0; overflow-wrap: anywhere; }
.sev { display: inline-block; padding: 0 6px; border-radius: 3px; color: #fff; font-size: 12px; font-weight: 600; }
.sev-CRITICAL { background: #7f1d1d; } .sev-ERROR { background: #dc2626; }
.sev-WARN { background: #b45309; } .sev-INFO { background: #2563eb; }
.new { color: #b91c1c; font-weight: 600; } .resolved { color: #15803d; font-weight: 600; }
"""
SECTIONS = (
    ("changes", "Changes"),
    ("findings", "Findings"),
    ("transactions", "Transactions"),
    ("stability", "LSO and open transactions"),
    ("producers", "Producers"),
    ("timeline", "Timeline"),
)


class Safe(str):
    """HTML this module built: inserted as it is, where any other value is escaped."""


def render_html(summary: Mapping[str, Any], details: Mapping[str, Any], changes: Mapping[str, Any]) -> str:
    """The whole page for one run."""
    run = summary["run"]
    body = "\n".join(
        [
            _header(summary, details),
            "<nav>" + "".join(f'<a href="#{key}">{title}</a>' for key, title in SECTIONS) + "</nav>",
            "<main>",
            _changes(changes),
            _findings(summary["findings"], summary["partitions"]["clusters"]),
            _transactions(summary["transactions"], details["durations"]),
            _stability(details["lso"], details["open_transactions"]),
            _producers(details["producers"]),
            _timeline(details["timeline"]),
            "</main>",
        ]
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>produce-audit {_e(run['id'])}</title>\n<style>{STYLE}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )


def _header(summary: Mapping[str, Any], details: Mapping[str, Any]) -> str:
    run, partitions = summary["run"], summary["partitions"]
    findings, transactions = summary["findings"], summary["transactions"]
    open_transactions = details["open_transactions"]
    cards = [
        ("partitions", partitions["partitions"]),
        ("batches", partitions["batches"]),
        ("records", partitions["records"]),
        ("findings", findings["total"]),
        *[(severity, findings["by_severity"].get(severity, 0)) for severity in reversed(SEVERITIES)],
        ("transactions", transactions["total"]),
        ("open transactions", open_transactions["open"]),
        ("hanging", open_transactions["hanging"]),
    ]
    inputs = ", ".join(run.get("inputs") or []) or "-"
    return (
        f"<header><h1>produce-audit run {_e(run['id'])}</h1>"
        f"<p>{_e(run.get('command') or 'audit')} started {_e(run.get('started_at') or '-')}, "
        f"reported {_e(run.get('reported_at') or '-')}, tool {_e(run.get('tool_version') or '-')}, "
        f"Delta backend {_e(run.get('delta_backend') or '-')}</p>"
        f"<p>inputs: {_e(inputs)}</p>"
        + "".join(f"<p>{_e(note)}</p>" for note in run_notes(run))
        + f"<p>reference time: {_e(reference_time(run.get('reference_time_ms')))}</p></header>\n"
        '<div class="cards" style="padding: 0 32px">'
        + "".join(f'<div class="card"><b>{value:,}</b><span>{_e(label)}</span></div>' for label, value in cards)
        + "</div>"
    )


def _changes(changes: Mapping[str, Any]) -> str:
    parts = [_heading("changes")]
    previous = changes.get("previous_run")
    if changes.get("reason"):
        against = f" (previous run {_e(previous)})" if previous else ""
        parts.append(f'<p class="note">No comparison{against}: {_e(changes["reason"])}.</p>')
        return _section("changes", parts)
    totals = changes["totals"]
    parts.append(
        f"<p>Against the previous published audit run <code>{_e(previous)}</code>: "
        f'<span class="new">{totals["new"]:,} new</span>, '
        f'<span class="resolved">{totals["resolved"]:,} resolved</span>, {totals["persisting"]:,} persisting '
        "distinct findings (same rule, severity, partition, broker, offsets and producer).</p>"
    )
    severity_rows = [
        [
            Safe(f'<span class="{status_name}">{status_name}</span>'),
            *[changes["by_severity"][status_name].get(s, 0) for s in reversed(SEVERITIES)],
        ]
        for status_name in ("new", "resolved", "persisting")
    ]
    parts.append(_table(["", *reversed(SEVERITIES)], severity_rows))
    rule_rows = [
        [rule, _rule_name(rule), counts["new"], counts["resolved"], counts["persisting"]]
        for rule, counts in changes["by_rule"].items()
        if counts["new"] or counts["resolved"]
    ]
    if rule_rows:
        parts += [
            "<h3>Rules whose findings changed</h3>",
            _table(["rule", "name", "new", "resolved", "persisting"], rule_rows),
        ]
    for status_name in ("new", "resolved"):
        examples = changes["examples"][status_name]
        if examples:
            parts += [
                f"<h3>{status_name.capitalize()} findings (first {len(examples)} of {totals[status_name]:,})</h3>",
                _table(
                    ["severity", "rule", "partition", "offsets", "producer:epoch", "message"],
                    [
                        [
                            Safe(_severity(f["severity"])),
                            f["rule_code"],
                            place(f),
                            offsets(f),
                            producer(f),
                            f["message"],
                        ]
                        for f in examples
                    ],
                ),
            ]
    return _section("changes", parts)


def _findings(findings: Mapping[str, Any], clusters: int) -> str:
    parts = [_heading("findings"), f"<p>{findings['total']:,} findings in all.</p>"]
    parts.append(
        '<div class="grid">'
        + _figure(charts.severity_chart(dict(reversed(findings["by_severity"].items()))), "Findings by severity")
        + _figure(charts.rule_chart(findings["by_rule"], charts.ATTENTION), "Findings at WARN and above by rule")
        + _figure(charts.rule_chart(findings["by_rule"], ("INFO",)), "INFO findings by rule")
        + "</div>"
    )
    if findings["by_rule"]:
        rows = [
            [
                code,
                entry["name"],
                Safe(" ".join(_severity(s) for s in entry["by_severity"])),
                entry["count"],
                _rule_action(code),
            ]
            for code, entry in sorted(findings["by_rule"].items(), key=lambda item: (-item[1]["count"], item[0]))
        ]
        parts += ["<h3>By rule</h3>", _table(["rule", "name", "severities", "findings", "what to do"], rows)]
    top = findings["top"]
    if top:
        rows = [
            [
                Safe(_severity(f["severity"])),
                f["rule_code"],
                place(f, clusters),
                offsets(f),
                producer(f),
                Safe(f"{_e(f['message'])}{_evidence(f.get('evidence'), f.get('segment'), f.get('position'))}"),
            ]
            for f in top
        ]
        parts += [
            f"<h3>Worst findings ({len(top)} of {findings['total']:,}) with their evidence</h3>",
            _table(["severity", "rule", "partition", "offsets", "producer:epoch", "message and evidence"], rows),
        ]
    return _section("findings", parts)


def _transactions(transactions: Mapping[str, Any], durations: Mapping[str, Any]) -> str:
    parts = [
        _heading("transactions"),
        f"<p>{transactions['total']:,} transactions reconstructed from data and markers.</p>",
    ]
    parts.append(
        '<div class="grid">'
        + _figure(charts.outcome_chart(transactions["by_outcome"]), "Transactions by outcome")
        + _figure(
            charts.duration_chart(durations["buckets"], durations["by_outcome"]),
            "Duration histogram: first batch to marker (open: to the last batch), by outcome",
        )
        + "</div>"
    )
    return _section("transactions", parts)


def _stability(lso: Mapping[str, Any], open_transactions: Mapping[str, Any]) -> str:
    parts = [
        _heading("stability"),
        f"<p>{lso['lagging_partitions']:,} partition(s) whose last stable offset trails the log end "
        f"(at most {lso['max_lag']:,} offsets); {open_transactions['open']:,} open transaction(s), "
        f"{open_transactions['hanging']:,} of them hanging (LSO-002).</p>",
    ]
    if lso["worst"]:
        parts.append(_figure(charts.lso_chart(lso["worst"]), "LSO lag of the most lagging partitions (red: hanging)"))
        rows = [
            [
                p["topic"],
                p["partition"],
                p["broker_id"],
                p["last_stable_offset"],
                p["log_end_offset"],
                p["lso_lag"],
                p["open_transactions"],
                p["hanging_transactions"],
            ]
            for p in lso["worst"]
        ]
        headers = ["topic", "partition", "broker", "last stable", "log end", "lag", "open", "hanging"]
        parts.append(_table(headers, rows))
    if open_transactions["listed"]:
        rows = [
            [
                t["topic"],
                t["partition"],
                t["broker_id"],
                producer(t),
                t["first_offset"],
                utc(t["end_timestamp"]),
                Safe('<b class="new">hanging</b>' if t["hanging"] else "open"),
                t["cause"] or "",
                Safe(f"<code>{_e(t['abort_command'])}</code>"),
            ]
            for t in open_transactions["listed"]
        ]
        parts += [
            f"<h3>Open transactions ({len(rows)} of {open_transactions['open']:,}, hanging first)</h3>",
            '<p class="note">Abort a hanging transaction with the command shown (Kafka 3.0+ brokers), after putting in '
            "a bootstrap server; an open transaction that is not hanging may still be completed by its "
            "coordinator.</p>",
            _table(
                [
                    "topic",
                    "partition",
                    "broker",
                    "producer:epoch",
                    "start offset",
                    "last batch",
                    "state",
                    "cause",
                    "abort",
                ],
                rows,
            ),
        ]
    return _section("stability", parts)


def _producers(producers: Mapping[str, Any]) -> str:
    parts = [
        _heading("producers"),
        _figure(
            charts.producers_chart(producers["distribution"]), "Partitions by the number of producer ids they hold"
        ),
    ]
    if producers["busiest"]:
        rows = [
            [p["topic"], p["partition"], p["broker_id"], p["producer_count"], p["batch_count"]]
            for p in producers["busiest"]
        ]
        parts += [
            "<h3>Partitions with the most producers</h3>",
            _table(["topic", "partition", "broker", "producers", "batches"], rows),
        ]
    return _section("producers", parts)


def _timeline(timeline: Mapping[str, Any]) -> str:
    parts = [_heading("timeline")]
    if timeline["start_ms"] is not None:
        parts.append(
            f"<p>From {_e(utc(timeline['start_ms']))} to {_e(utc(timeline['end_ms']))} UTC (batch max timestamps), "
            f"in {timeline['bins']} bins: {sum(timeline['bumps']):,} epoch bump(s); "
            f"{timeline['untimed']:,} finding(s) without a batch timestamp are not shown.</p>"
        )
    parts.append(_figure(charts.timeline_chart(timeline), "Epoch bumps and findings over time"))
    return _section("timeline", parts)


def _figure(svg: str | None, caption: str) -> str:
    if svg is None:
        return f'<figure><p class="note">Nothing to chart: {_e(caption.lower())}.</p></figure>'
    return f"<figure>{svg}<figcaption>{_e(caption)}</figcaption></figure>"


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    rows = list(rows)
    numeric = [bool(rows) and all(isinstance(row[i], int | None) for row in rows) for i in range(len(headers))]
    head = "".join(f"<th{_num(n)}>{_e(h)}</th>" for h, n in zip(headers, numeric, strict=True))
    body = "".join(
        "<tr>" + "".join(f"<td{_num(n)}>{_cell(v)}</td>" for v, n in zip(row, numeric, strict=True)) + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: Any) -> str:
    if isinstance(value, Safe):
        return value
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else _e(value)


def _evidence(evidence: Mapping[str, str] | None, segment: str | None, position: int | None) -> str:
    items = sorted((evidence or {}).items())
    if segment is not None:
        items.append(("segment", f"{segment} @ {position}" if position is not None else segment))
    if not items:
        return ""
    pairs = "".join(f"<dt>{_e(key)}</dt><dd><code>{_e(value)}</code></dd>" for key, value in items)
    return f'<details><summary>evidence</summary><dl class="evidence">{pairs}</dl></details>'


def _section(key: str, parts: list[str]) -> str:
    return f'<section id="{key}">' + "\n".join(parts) + "</section>"


def _heading(key: str) -> str:
    return f"<h2>{dict(SECTIONS)[key]}</h2>"


def _severity(severity: str) -> str:
    return f'<span class="sev sev-{_e(severity)}">{_e(severity)}</span>'


def _rule_name(code: str) -> str:
    registered = RULES.get(code)
    return registered.name if registered else ""


def _rule_action(code: str) -> str:
    """The rule's next step for an operator, as the catalog (docs/rules.md) gives it."""
    registered = RULES.get(code)
    return registered.action if registered else ""


def _num(numeric: bool) -> str:
    return ' class="num"' if numeric else ""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)
