"""JUnit XML for CI systems that show test reports: one test case per compared table, failed when it differs."""

from __future__ import annotations

from pathlib import Path
from xml.etree import ElementTree as ET

from pipeline.reports.golden import TableDiff


def write_junit(diffs: list[TableDiff], path: Path, suite: str = "produce-audit compare") -> None:
    """One <testsuite> with a <testcase> per table; a differing table's case holds a <failure> with its diff."""
    failures = sum(not diff.equal for diff in diffs)
    root = ET.Element("testsuites", name=suite, tests=str(len(diffs)), failures=str(failures))
    cases = ET.SubElement(root, "testsuite", name=suite, tests=str(len(diffs)), failures=str(failures), errors="0")
    for diff in diffs:
        case = ET.SubElement(cases, "testcase", classname=suite, name=diff.table)
        if not diff.equal:
            failure = ET.SubElement(case, "failure", message=diff.summary(), type="GoldenDifference")
            failure.text = "\n".join(diff.lines())
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
