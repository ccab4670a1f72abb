"""One SparkSession for the whole test session, small and quiet (chispa's fixture pattern)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
REALDATA = (REPO.parent / "shared" / "realdata").resolve()
# Set by tests/test_native_backend.py for the pytest it starts: that session loads delta-spark, this one does not,
# so that `auto` stays the embedded backend for the rest of the suite.
NATIVE_SESSION = "PRODUCE_AUDIT_TEST_NATIVE_SESSION"


@pytest.fixture(scope="session")
def spark():
    os.environ["SPARK_TESTING"] = "1"
    # Python workers must run the interpreter that has the project installed, not whatever is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from pipeline.class_archive import JAVA_OPTIONS, with_archive
    from pipeline.config import load_settings
    from pipeline.delta_jars import session_conf
    from pipeline.local_fs import with_local_fs

    # The shipped Spark settings (conf/local.yaml: the 1 GiB driver, the JVM flags), so the suite runs what
    # users run; only the UI is off and the parallelism fixed.
    builder = SparkSession.builder.master("local[2]").appName("produce-audit-tests")
    conf = dict(load_settings(None).spark.conf)
    if os.environ.get(NATIVE_SESSION):  # the installed delta-spark, as build_session adds it for `auto`
        conf = session_conf(conf, "native")
    conf = with_local_fs(conf, "local[2]")  # as build_session starts it: the installed local file system
    conf[JAVA_OPTIONS] = with_archive(conf.get(JAVA_OPTIONS, ""))  # as build_session starts it
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = (
        builder.config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def scratch(spark, tmp_path_factory):
    """A fresh scratch folder for one audit: `scratch("name")`."""
    from pipeline.audit.scratch import Scratch

    return lambda name: Scratch(spark, str(tmp_path_factory.mktemp(name)))


@pytest.fixture(scope="session")
def realdata() -> Path:
    if not REALDATA.is_dir():
        pytest.skip(f"real Kafka data not found at {REALDATA} (it lives in ../shared/realdata beside the repo)")
    return REALDATA


@pytest.fixture(scope="session")
def two_audit_runs(spark, tmp_path_factory):
    """(warehouse, earlier run id, later run id): the bundled sample without its `orders-1` partition, then the
    whole sample, each `run` in this process; the later run has findings that are new against the earlier one.
    Shared by the tests of reports and of the run history, which only read the warehouse or report on it."""
    import contextlib
    import io
    import shutil

    from pipeline.cli import main
    from pipeline.tables.publication import AUDIT_COMMANDS, last_published
    from pipeline.tables.store import TableStore

    sample = REPO / "samples" / "basic"
    base = tmp_path_factory.mktemp("two-runs")
    partial = base / "partial"
    shutil.copytree(sample, partial)
    shutil.rmtree(partial / "broker-0" / "orders-1")
    warehouse = base / "wh"
    runs = []
    for root in (partial, sample):
        with contextlib.redirect_stdout(io.StringIO()):
            main(["run", "--input", str(root), "--warehouse", str(warehouse)])
        runs.append(last_published(TableStore(spark, str(warehouse)), AUDIT_COMMANDS).run_id)
    earlier, later = runs
    assert earlier != later
    return warehouse, earlier, later


@pytest.fixture(scope="session")
def generated_logs(tmp_path_factory) -> Path:
    """A generated log root with anomalies of every family (3,000 batches in 16 KiB segments), written once for
    the tests that compare the replay's paths with their references on it; they only read it."""
    from pipeline.generate.options import GenerateOptions
    from pipeline.generate.simulation import write_log_root

    root = tmp_path_factory.mktemp("generated-logs") / "root"
    write_log_root(GenerateOptions(out=root, batches=3000, anomaly_rate=0.05, segment_bytes=16 * 1024))
    return root


@pytest.fixture(scope="session")
def generated_warehouse(spark, generated_logs, tmp_path_factory) -> Path:
    """`generated_logs` ingested once, for the tests that read its tables and write nothing there."""
    import contextlib
    import io

    from pipeline.cli import main

    warehouse = tmp_path_factory.mktemp("generated-wh")
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["ingest", "--input", str(generated_logs), "--warehouse", str(warehouse)]) == 0
    return warehouse
