"""The native Delta backend (delta-spark), tested in a pytest of its own.

A Python process has one JVM, and this suite's session has no delta-spark so that `auto` stays the embedded
backend everywhere else. The native checks therefore run in one more pytest, started here, whose session loads
the bundle `produce-audit prepare` installed (conftest.NATIVE_SESSION): the table store tests with the native
backend, across the two backends and delta-rs, and one `run` of the sample. (BENCHMARKS.md, "Delta backends",
compares a native run's tables with an embedded run's.)
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys

import pytest
from conftest import NATIVE_SESSION, REPO
from deltalake import DeltaTable

from pipeline import jar_bundles
from pipeline.cli import EXIT_FINDINGS, main
from pipeline.delta_jars import BUNDLE
from pipeline.tables.store import delta_spark_available

PUBLISHED = ("batches", "findings", "transactions", "producer_state", "partition_summary")
INNER_SECONDS = 900
# The native cases of the table store tests, those across backends, and the run below.
K = "(native or other_backend or both_backends) and not without_delta_jars and not checks_pass"


def test_native_backend_checks_pass_in_a_session_with_delta_spark():
    if os.environ.get(NATIVE_SESSION):
        pytest.skip("this is the pytest that runs the native checks")
    if jar_bundles.installed(BUNDLE) is None:
        pytest.skip("the delta-spark jars are not installed: `produce-audit prepare` fetches them with Maven")
    inner = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", K,
         "tests/test_table_store.py", "tests/test_native_backend.py"],
        cwd=REPO, env={**os.environ, NATIVE_SESSION: "1"}, capture_output=True, text=True,
        timeout=INNER_SECONDS, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    report = inner.stdout[-6000:]
    assert inner.returncode == 0, report
    assert " passed" in report and "skipped" not in report.splitlines()[-1], report


def test_a_native_run_of_the_sample_publishes_its_findings(spark, tmp_path):
    if not delta_spark_available(spark):
        pytest.skip("needs delta-spark in the session: test_native_backend_checks_pass... runs it in one that has")
    from pipeline.samples import generate

    root = generate(tmp_path / "sample")
    warehouse = tmp_path / "warehouse"
    with contextlib.redirect_stdout(io.StringIO()):  # main() reuses this session, which has delta-spark
        code = main(["run", "--input", str(root), "--warehouse", str(warehouse)])

    assert code == EXIT_FINDINGS  # the sample's duplicate batch and sequence gap
    (run,) = DeltaTable(str(warehouse / "runs")).to_pyarrow_table().to_pylist()
    assert (run["command"], run["status"], run["delta_backend"]) == ("run", "succeeded", "native")
    counts = dict(run["counts"])
    assert (counts["findings.CRITICAL"], counts["findings.ERROR"], counts["batches"]) == (1, 1, 61)
    versions = dict(run["table_versions"])
    for table in PUBLISHED:  # delta-rs reads what delta-spark wrote, at the published versions
        assert DeltaTable(str(warehouse / table)).version() == versions[table], table
    findings = DeltaTable(str(warehouse / "findings")).to_pyarrow_table()
    assert sorted(findings.column("severity").to_pylist()) == ["CRITICAL", "ERROR"]
    assert not any(path.name == "_staging" for path in warehouse.rglob("*"))
