"""Render the rule catalog (docs/rules.md) from the registry: `python -m pipeline.audit.catalog [OUT]`."""

from __future__ import annotations

import sys
from pathlib import Path

import pipeline.audit.rules  # noqa: F401  (registers every rule, frame and check)
from pipeline.audit.core.registry import CHECKS, FRAMES, RULES, Rule
from schemas.findings import SEVERITIES

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "docs" / "rules.md"
SECTIONS = {
    "6.1": "Physical format and file integrity",
    "6.2": "Idempotence: sequence numbers",
    "6.3": "Epochs and fencing",
    "6.4": "Transaction structure",
    "6.5": "Aborted-transaction index and read_committed visibility",
    "6.6": "Producer-state snapshots",
    "6.7": "`__transaction_state` alone",
    "6.8": "Segments and `__transaction_state` (cross-checks)",
    "6.10": "Replicas against each other (an extension of spec §6: it audits one replica)",
    "6.11": "Payload duplicates (an extension of spec §6, which reads headers only; needs deep mode, `--deep`)",
    "6.12": "The leaders' producer state against the log (an extension of spec §6, which reads files; needs a "
    "`kafka://` input)",
}


def render() -> str:
    lines = [
        "# Rule catalog",
        "",
        "Generated from `pipeline/audit/core/registry.py` by `python -m pipeline.audit.catalog`; do not edit by hand.",
        "Codes and severities follow spec §6 (`kafka-semantics.md`). Severity scale: "
        + ", ".join(SEVERITIES)
        + ". Where a rule can take more than one severity, the condition for each is in its description.",
        "Each section's table lists its rules; below it, each rule says why a finding matters and what to do about it.",
        "A rule marked *once per producer* is normal behaviour when INFO: its INFO findings come once per (partition,",
        "producer), the first occurrence with the count and the last offset in its evidence (`occurrences`,",
        "`last_occurrence_offset`).",
        "",
        "Each rule is checked on the rows of one or more frames (docs/engine.md):",
        "",
        *[f"- `{name}`: {frame.description}" for name, frame in sorted(FRAMES.items()) if CHECKS[name]],
        "",
    ]
    for section, title in SECTIONS.items():
        rules = sorted((r for r in RULES.values() if r.section == section), key=lambda r: r.code)
        if not rules:
            continue
        lines += [
            f"## §{section} {title}",
            "",
            "| Code | Name | Severity | Description | Checked on |",
            "|---|---|---|---|---|",
        ]
        for r in rules:
            severities = " / ".join(r.severities) + (" (INFO once per producer)" if r.per_producer else "")
            frames = ", ".join(f"`{name}`" for name in r.frames)
            lines.append(f"| [{r.code}](#{_anchor(r)}) | {r.name} | {severities} | {r.description} | {frames} |")
        lines.append("")
        for r in rules:
            lines += [
                f"### {r.code} {r.name}",
                "",
                f"*{' / '.join(r.severities)}.* **Why it matters:** {r.impact}",
                "",
                f"**What to do:** {r.action}",
                "",
            ]
    return "\n".join(lines)


def _anchor(r: Rule) -> str:
    """The id GitHub and most Markdown renderers give the rule's `### CODE NAME` heading."""
    return f"{r.code} {r.name}".lower().replace(" ", "-")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else DEFAULT_OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render())
    print(f"wrote {len(RULES)} rules to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
