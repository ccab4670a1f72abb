"""report.md: the run's summary as GitHub-flavoured Markdown, for a pull request, a ticket or a chat message.

Text from the data is escaped for Markdown table cells: HTML specials become entities (Markdown viewers render
inline HTML) and pipes, backticks, brackets and emphasis marks are backslashed, so evidence cannot break
the table or smuggle in links or markup.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pipeline.reports.formatting import offsets, place, producer, reference_time, run_notes, utc
from schemas.findings import SEVERITIES

_MARKDOWN_SPECIALS = re.compile(r"([\\`*_\[\]|#~])")
_MESSAGE_WIDTH = 160


def render_markdown(summary: Mapping[str, Any], details: Mapping[str, Any], changes: Mapping[str, Any]) -> str:
    """The Markdown summary of one run: the numbers, the changes, the worst findings and what to abort."""
    run, findings = summary["run"], summary["findings"]
    partitions, transactions = summary["partitions"], summary["transactions"]
    open_transactions, lso = details["open_transactions"], details["lso"]
    clusters = partitions["clusters"]
    lines = [
        f"# produce-audit run {escape(run['id'])}",
        "",
        f"Reference time: {escape(reference_time(run.get('reference_time_ms')))}. "
        f"{partitions['partitions']:,} partitions, {partitions['batches']:,} batches, "
        f"{partitions['records']:,} records, {transactions['total']:,} transactions "
        f"({open_transactions['open']:,} open, {open_transactions['hanging']:,} hanging).",
        *[line for note in run_notes(run) for line in ("", escape(note) + ".")],
        "",
        "## Findings",
        "",
        *_table(["severity", "findings"], [[s, findings["by_severity"].get(s, 0)] for s in reversed(SEVERITIES)]),
        "",
        *_changes(changes),
    ]
    if findings["by_rule"]:
        rows = [
            [code, entry["name"], " ".join(entry["by_severity"]), entry["count"]]
            for code, entry in sorted(findings["by_rule"].items(), key=lambda item: (-item[1]["count"], item[0]))
        ]
        lines += ["### By rule", "", *_table(["rule", "name", "severities", "findings"], rows), ""]
    if findings["top"]:
        rows = [
            [f["severity"], f["rule_code"], place(f, clusters), offsets(f), producer(f), _shorten(f["message"])]
            for f in findings["top"]
        ]
        lines += [
            f"### Worst findings ({len(rows)} of {findings['total']:,})",
            "",
            *_table(["severity", "rule", "partition", "offsets", "producer:epoch", "message"], rows),
            "",
        ]
    lines += [
        "## Transactions",
        "",
        *_table(["outcome", "transactions"], [[o, n] for o, n in transactions["by_outcome"].items()]),
        "",
        f"{lso['lagging_partitions']:,} partition(s) with the last stable offset behind the log end "
        f"(at most {lso['max_lag']:,} offsets).",
        "",
    ]
    if open_transactions["listed"]:
        rows = [
            [
                place(t, clusters),
                producer(t),
                t["first_offset"],
                utc(t["end_timestamp"]),
                "hanging" if t["hanging"] else "open",
                t["cause"] or "",
                _code(t["abort_command"]),
            ]
            for t in open_transactions["listed"]
        ]
        lines += [
            f"### Open transactions ({len(rows)} of {open_transactions['open']:,}, hanging first)",
            "",
            *_table(["partition", "producer:epoch", "start offset", "last batch", "state", "cause", "abort"], rows),
            "",
        ]
    lines.append("The charts, evidence and timeline are in report.html beside this file.")
    return "\n".join(lines) + "\n"


def _changes(changes: Mapping[str, Any]) -> list[str]:
    if changes.get("reason"):
        return [f"No comparison with a previous run: {escape(changes['reason'])}.", ""]
    totals = changes["totals"]
    lines = [
        f"Since run {escape(changes['previous_run'])}: **{totals['new']:,} new**, {totals['resolved']:,} resolved, "
        f"{totals['persisting']:,} persisting.",
        "",
    ]
    rows = [[rule, c["new"], c["resolved"], c["persisting"]] for rule, c in changes["by_rule"].items()]
    if any(c["new"] or c["resolved"] for c in changes["by_rule"].values()):
        lines += [*_table(["rule", "new", "resolved", "persisting"], rows), ""]
    return lines


def _table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    rows = list(rows)
    numeric = [bool(rows) and all(isinstance(row[i], int | None) for row in rows) for i in range(len(headers))]
    align = ["---:" if n else "---" for n in numeric]
    return [
        "| " + " | ".join(escape(h) for h in headers) + " |",
        "| " + " | ".join(align) + " |",
        *("| " + " | ".join(_cell(value) for value in row) + " |" for row in rows),
    ]


class _Code(str):
    """A table cell shown as inline code: already escaped for its backticks."""


def _code(text: str) -> _Code:
    # A code span shows HTML as text; only a backtick would end it and a pipe would end the table cell.
    return _Code("`" + " ".join(text.split()).replace("`", "'").replace("|", "\\|") + "`")


def _cell(value: Any) -> str:
    if isinstance(value, _Code):
        return value
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else escape(value)


def escape(value: Any) -> str:
    """Text safe in a Markdown table cell: one line, no HTML, no Markdown syntax."""
    text = " ".join(str(value).split())
    return _MARKDOWN_SPECIALS.sub(r"\\\1", html.escape(text, quote=False))


def _shorten(message: str) -> str:
    return message if len(message) <= _MESSAGE_WIDTH else message[: _MESSAGE_WIDTH - 3] + "..."
