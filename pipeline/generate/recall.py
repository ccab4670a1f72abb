"""How an audit's findings compare with the ground truth of a generated log root.

An injected anomaly is found when a finding of its rule code points at its partition (and offset, when the
anomaly has one). A WARN-or-worse finding is explained when it matches an injected anomaly, or when its rule
is a declared consequence of an injection on the same producer or partition; anything else is a false alarm.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from pipeline.generate import ground_truth
from schemas.findings import SEVERITY_RANK

FINDING_COLUMNS = ["rule_code", "severity", "topic", "partition", "producer_id", "base_offset", "message"]


def matches(finding: dict, truth: dict) -> bool:
    return (
        finding["rule_code"] == truth["rule_code"]
        and (finding["topic"], finding["partition"]) == (truth["topic"], truth["partition"])
        and (truth["base_offset"] is None or finding["base_offset"] == truth["base_offset"])
    )


def explained(finding: dict, truths: list[dict]) -> bool:
    """Injected, or a declared consequence of an injection on the same producer or partition."""
    return any(matches(finding, row) for row in truths) or any(
        finding["rule_code"] in row["consequences"]
        and (
            (row["producer_id"] is not None and finding["producer_id"] == row["producer_id"])
            or (finding["topic"], finding["partition"]) == (row["topic"], row["partition"])
        )
        for row in truths
    )


def compare(findings: list[dict], truths: list[dict]) -> dict[str, Any]:
    """Injected anomalies missed or found at another severity, and WARN-or-worse findings nobody injected."""
    by_place: dict[tuple, list[dict]] = {}
    for finding in findings:
        by_place.setdefault((finding["rule_code"], finding["topic"], finding["partition"]), []).append(finding)

    def found(row: dict) -> list[dict]:
        return [f for f in by_place.get((row["rule_code"], row["topic"], row["partition"]), []) if matches(f, row)]

    missed = [row for row in truths if not found(row)]
    wrong_severity = [row for row in truths if found(row) and all(f["severity"] != row["severity"] for f in found(row))]
    alarms = [f for f in findings if SEVERITY_RANK[f["severity"]] >= SEVERITY_RANK["WARN"]]
    unexplained = [tuple(f[column] for column in FINDING_COLUMNS) for f in alarms if not explained(f, truths)]
    return {
        "injected": len(truths),
        "found": len(truths) - len(missed),
        "missed": missed,
        "wrong_severity": wrong_severity,
        "findings at WARN or above": len(alarms),
        "unexplained": unexplained,
    }


def compare_with_findings(root: Path, warehouse: Path) -> dict[str, Any]:
    """`compare` for the ground truth of `root` and the `findings` table of `warehouse`."""
    findings = DeltaTable(str(Path(warehouse) / "findings")).to_pyarrow_table(columns=FINDING_COLUMNS).to_pylist()
    return compare(findings, ground_truth.read(root).to_pylist())
