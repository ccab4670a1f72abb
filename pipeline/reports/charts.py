"""The report page's charts: matplotlib figures saved as SVG, ready to inline in HTML.

Figures are built without pyplot (no global state, no display) and saved with a fixed hash salt and no date,
so the same data gives the same SVG. Text from the data (topic names) is drawn as SVG text, which matplotlib
escapes; mathtext is off so that a `$` in a topic name is only a character. Every chart's element ids carry
a prefix of their own, since several SVGs share one HTML document. A chart of nothing is None.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping, Sequence

from matplotlib import rc_context
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullFormatter

from pipeline.reports.formatting import utc

SEVERITY_COLORS = {"CRITICAL": "#7f1d1d", "ERROR": "#dc2626", "WARN": "#f59e0b", "INFO": "#60a5fa"}
OUTCOME_COLORS = {"COMMITTED": "#16a34a", "ABORTED": "#dc2626", "OPEN": "#f59e0b", "EMPTY": "#9ca3af"}
NEUTRAL = "#4b5563"
STYLE = {
    "svg.fonttype": "none",
    "svg.hashsalt": "produce-audit",
    "text.parse_math": False,
    "text.usetex": False,
    "font.family": "sans-serif",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
}
WIDTH_IN = 6.4
WIDE_IN = 9.6


ATTENTION = ("CRITICAL", "ERROR", "WARN")  # the severities people alert on, charted apart from INFO
LOG_SCALE_RATIO = 50  # bars further apart than this share a logarithmic axis, so the smallest stays visible


def severity_chart(by_severity: Mapping[str, int]) -> str | None:
    """Findings per severity, worst on top; on a logarithmic axis when one severity dwarfs another."""
    items = [(s, n) for s, n in by_severity.items()]
    counts = [n for _, n in items if n]
    if not counts:
        return None
    return _horizontal_bars(
        "severity",
        [s for s, _ in items],
        {"findings": [n for _, n in items]},
        [SEVERITY_COLORS.get(s, NEUTRAL) for s, _ in items],
        log_scale=max(counts) >= LOG_SCALE_RATIO * min(counts),
    )


def rule_chart(by_rule: Mapping[str, Mapping], severities: Sequence[str], limit: int = 25) -> str | None:
    """Findings of `severities` per rule (the `limit` most frequent), split by severity: WARN and above are charted
    apart from INFO, so that a rule firing on normal behaviour at scale cannot hide the ones that need a look."""
    counted = {code: sum(entry["by_severity"].get(s, 0) for s in severities) for code, entry in by_rule.items()}
    rules = sorted(((code, n) for code, n in counted.items() if n), key=lambda item: (-item[1], item[0]))[:limit]
    if not rules:
        return None
    shown = [s for s in severities if any(by_rule[code]["by_severity"].get(s) for code, _ in rules)]
    series = {s: [by_rule[code]["by_severity"].get(s, 0) for code, _ in rules] for s in shown}
    name = "rules-" + "-".join(s.lower() for s in severities)
    return _horizontal_bars(name, [code for code, _ in rules], series, [SEVERITY_COLORS[s] for s in shown])


def outcome_chart(by_outcome: Mapping[str, int]) -> str | None:
    """Transactions per outcome."""
    if not any(by_outcome.values()):
        return None
    labels = list(by_outcome)
    return _horizontal_bars(
        "outcomes",
        labels,
        {"transactions": [by_outcome[o] for o in labels]},
        [OUTCOME_COLORS.get(o, NEUTRAL) for o in labels],
    )


def duration_chart(buckets: Sequence[str], by_outcome: Mapping[str, Sequence[int]]) -> str | None:
    """Transactions per decade of duration, stacked by outcome."""
    if not by_outcome:
        return None
    with rc_context(STYLE):
        figure = Figure(figsize=(WIDTH_IN, 2.8), layout="constrained")
        axes = figure.add_subplot()
        bottom = [0] * len(buckets)
        for outcome, counts in by_outcome.items():
            axes.bar(buckets, counts, bottom=bottom, label=outcome, color=OUTCOME_COLORS.get(outcome, NEUTRAL))
            bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
        axes.set_ylabel("transactions")
        axes.set_xlabel("duration")
        axes.tick_params(axis="x", labelsize=8)
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        _legend_above(figure)
        return _svg(figure, "durations")


def producers_chart(distribution: Sequence[Mapping]) -> str | None:
    """Partitions per number of producers that wrote to them."""
    if not distribution:
        return None
    with rc_context(STYLE):
        figure = Figure(figsize=(WIDTH_IN, 2.6), layout="constrained")
        axes = figure.add_subplot()
        axes.bar([str(d["producers"]) for d in distribution], [d["partitions"] for d in distribution], color=NEUTRAL)
        axes.set_xlabel("producers in the partition")
        axes.set_ylabel("partitions")
        axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        return _svg(figure, "producers")


def lso_chart(worst: Sequence[Mapping]) -> str | None:
    """LSO lag (offsets between the last stable offset and the log end) of the most lagging partitions."""
    if not worst:
        return None
    labels = [_partition_label(p) for p in worst]
    colors = ["#dc2626" if p["hanging_transactions"] else "#f59e0b" for p in worst]
    return _horizontal_bars("lso", labels, {"offsets behind the log end": [p["lso_lag"] for p in worst]}, colors)


def timeline_chart(timeline: Mapping) -> str | None:
    """Epoch bumps (top) and findings by severity (bottom) per time bin of the batches' timestamps."""
    if not timeline["bins"] or not (any(timeline["bumps"]) or timeline["findings"]):
        return None
    start, end, bins = timeline["start_ms"], timeline["end_ms"], timeline["bins"]
    width = max((end - start + 1) / bins, 1.0)
    centers = [i + 0.5 for i in range(bins)]
    with rc_context(STYLE):
        figure = Figure(figsize=(WIDE_IN, 3.6), layout="constrained")
        bumps_axes, findings_axes = figure.subplots(2, 1, sharex=True, height_ratios=(1, 2))
        bumps_axes.bar(centers, timeline["bumps"], width=0.9, color=NEUTRAL)
        bumps_axes.set_ylabel("epoch bumps")
        bottom = [0] * bins
        for severity, counts in timeline["findings"].items():
            findings_axes.bar(
                centers, counts, width=0.9, bottom=bottom, label=severity, color=SEVERITY_COLORS.get(severity, NEUTRAL)
            )
            bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
        findings_axes.set_ylabel("findings")
        for axes in (bumps_axes, findings_axes):
            axes.yaxis.set_major_locator(MaxNLocator(integer=True))
        if timeline["findings"]:
            _legend_above(figure)
        ticks = [0, bins / 2, bins]
        findings_axes.set_xticks(ticks, [utc(start + t * width) for t in ticks])
        findings_axes.set_xlim(0, bins)
        return _svg(figure, "timeline")


def _horizontal_bars(
    name: str,
    labels: Sequence[str],
    series: Mapping[str, Sequence[int]],
    colors: Sequence[str],
    log_scale: bool = False,
) -> str:
    """One bar per label (first on top); several series stack, each in its color, one color per bar otherwise."""
    with rc_context(STYLE):
        figure = Figure(figsize=(WIDTH_IN, 0.6 + 0.26 * len(labels)), layout="constrained")
        axes = figure.add_subplot()
        positions = list(range(len(labels)))[::-1]
        left = [0] * len(labels)
        stacked = len(series) > 1
        for index, (series_name, values) in enumerate(series.items()):
            color = colors[index] if stacked else colors
            bars = axes.barh(positions, values, left=left, color=color, label=series_name, height=0.7)
            left = [a + b for a, b in zip(left, values, strict=True)]
        if not stacked:
            axes.bar_label(bars, labels=[f"{v:,}" for v in values], padding=3, fontsize=8)
        else:
            _legend_above(figure)
        axes.set_yticks(positions, [_clip(label) for label in labels])
        if log_scale:  # plain numbers on its ticks: mathtext, which the default labels use, is off
            axes.set_xscale("log")
            axes.set_xlim(0.8, max(max(values) for values in series.values()) * 4)
            axes.xaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
            axes.xaxis.set_minor_formatter(NullFormatter())
        else:
            axes.margins(x=0.12)
            axes.xaxis.set_major_locator(MaxNLocator(integer=True))
        axes.spines["left"].set_visible(False)
        axes.tick_params(axis="y", length=0)
        return _svg(figure, name)


def _legend_above(figure: Figure) -> None:
    """The series' legend in one row above the axes, where it covers no bar."""
    figure.legend(loc="outside upper right", ncols=4, frameon=False, fontsize=8)


def _svg(figure: Figure, name: str) -> str:
    """The figure as an <svg> element (no XML prolog), its ids prefixed so that charts do not collide."""
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    document = buffer.getvalue()
    element = document[document.index("<svg") :]
    prefix = f"{name}-"
    element = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}\1"', element)
    return re.sub(r'(url\(#|href="#)([^")]+)', rf"\g<1>{prefix}\2", element)


def _partition_label(partition: Mapping) -> str:
    broker = partition.get("broker_id")
    suffix = "" if broker is None else f" @{broker}"
    return f"{partition['topic']}-{partition['partition']}{suffix}"


def _clip(label: str, width: int = 40) -> str:
    return label if len(label) <= width else label[: width - 1] + "…"
