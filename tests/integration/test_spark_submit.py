"""`./spark-submit.sh` as users run it on this machine, in a file of its own so that it runs beside the command's
other end-to-end runs (tests/integration/test_end_to_end.py) instead of after them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from deltalake import DeltaTable

from pipeline import jar_bundles
from pipeline.delta_jars import BUNDLE

REPO = Path(__file__).resolve().parents[2]


def test_spark_submit_prints_the_report_alone_on_stdout(tmp_path):
    """spark-submit merges the Python driver's stderr into its stdout; the wrapper keeps the two apart. With the
    bundle `prepare` installed the run is native, and delta-rs reads what delta-spark published."""
    env = {**os.environ, "PRODUCE_AUDIT_VENV": sys.prefix}
    warehouse = tmp_path / "wh"
    completed = subprocess.run(
        [str(REPO / "spark-submit.sh"), "run", "--input", str(REPO / "samples" / "basic"),
         "--warehouse", str(warehouse)],
        capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert completed.returncode == 1, completed.stderr[-3000:]  # the sample's CRITICAL finding
    assert completed.stdout.startswith("produce-audit run "), completed.stdout[:500]
    assert "Findings by severity" in completed.stdout
    assert " INFO pipeline." not in completed.stdout and "WARN" not in completed.stdout.split("\n", 1)[0]
    assert " INFO pipeline.audit_step: audit tables written in " in completed.stderr
    # Spark logs as the package's log4j2.properties says, not with its own default profile at INFO.
    assert "log4j2-defaults.properties" not in completed.stderr and " INFO SparkContext" not in completed.stderr

    (run,) = DeltaTable(str(warehouse / "runs")).to_pyarrow_table().to_pylist()
    expected_backend = "embedded" if jar_bundles.installed(BUNDLE) is None else "native"
    assert (run["command"], run["status"], run["delta_backend"]) == ("run", "succeeded", expected_backend)
    counts = dict(run["counts"])
    assert (counts["findings.CRITICAL"], counts["findings.ERROR"], counts["batches"]) == (1, 1, 61)
    for table, version in dict(run["table_versions"]).items():
        assert DeltaTable(str(warehouse / table)).version() == version, table
    assert not any(path.name == "_staging" for path in warehouse.rglob("*"))
