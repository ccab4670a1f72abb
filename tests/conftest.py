"""One SparkSession for the whole test session, small and quiet (chispa's fixture pattern), for tests/integration:
tests/unit/conftest.py keeps the unit tests from creating it."""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
REALDATA = (REPO.parent / "shared" / "realdata").resolve()
# Set by tests/integration/test_native_backend.py for the pytest it starts: that session loads delta-spark, this one
# does not, so that `auto` stays the embedded backend for the rest of the suite.
NATIVE_SESSION = "PRODUCE_AUDIT_TEST_NATIVE_SESSION"
# Files that share an expensive session fixture: under `-n 2 --dist loadfile` each group goes to one worker, which
# builds the fixture once, where two workers would each build it.
SHARED_FIXTURES = {
    "test_report_page.py": "two_audit_runs",
    "test_run_history.py": "two_audit_runs",
    "test_producer_kernel.py": "generated_logs",
    "test_replay_files.py": "generated_logs",
    "test_snapshot_states.py": "generated_logs",
    "test_task_outputs.py": "generated_logs",
}
# Files (or groups of SHARED_FIXTURES) that take half a minute or more, with about how many seconds on 2 busy
# cores (from the suite's junit durations: 4,189 s of test time in 2,107 s on two workers). They are handed out
# first, longest first, so that the workers end on short files and together, not one idle while the other runs a
# long file that happened to come last (xdist orders by number of tests).
SLOW_SCOPES = {
    "test_run_atomicity.py": 520,
    "generated_logs": 440,
    "test_nightly_append.py": 360,
    "test_broker_conformance.py": 350,
    "test_clusters.py": 330,
    "test_cluster_run.py": 280,
    "test_native_backend.py": 250,
    "test_end_to_end.py": 120,
    "test_dumplog_parity.py": 120,
    "test_kept_replay.py": 120,
    "two_audit_runs": 120,
    "test_replay_memory.py": 100,
    "test_publication.py": 100,
    "test_rules.py": 100,
    "test_remote_inputs.py": 90,
    "test_spark_submit.py": 80,
    "test_generate_recall.py": 80,
    "test_realdata_audit.py": 70,
    "test_end_to_end_realdata.py": 65,
    "test_incremental_ingest.py": 60,
    "test_golden.py": 55,
    "test_cli_run.py": 50,
    "test_baseline_replay.py": 45,
    "test_global_transactions.py": 40,
    "test_hanging.py": 35,
    "test_notebook.py": 35,
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile`, with SHARED_FIXTURES grouped and SLOW_SCOPES first; the rest in xdist's order after them."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    if not all(hasattr(LoadFileScheduling, name) for name in ("_split_scope", "_assign_work_unit")):
        return None  # an xdist whose scheduler works otherwise: its own loadfile

    class Balanced(LoadFileScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return SHARED_FIXTURES.get(Path(scope).name, scope)

        def _assign_work_unit(self, node) -> None:
            if not self.ordered:  # the first assignment: the work queue is complete and not yet handed out
                self.ordered = True
                scopes = sorted(self.workqueue, key=lambda scope: -SLOW_SCOPES.get(Path(scope).name, 0))
                self.workqueue = OrderedDict((scope, self.workqueue[scope]) for scope in scopes)
            super()._assign_work_unit(node)

    return Balanced(config, log)


@pytest.fixture(scope="session")
def spark():
    # No SPARK_TESTING: it turns on Spark's own test mode (every optimizer rule's plan validated again, among other
    # checks) in this JVM and in every command the tests start, which users never run.
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
    from pipeline.audit.core.scratch import Scratch

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
