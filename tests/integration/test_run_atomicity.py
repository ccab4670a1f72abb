"""All or nothing, through the installed command: two runs at once on one warehouse, and a run killed after
its findings commit. Readers must stay on the last complete run and never see a false all-clear."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from deltalake import DeltaTable

from pipeline.samples import generate
from pipeline.tables.lock import LOCK_FILE
from pipeline.termination import Terminated, terminated_as_error
from tests.commands import CLI, cli, in_process

AUDIT_TABLES = ("findings", "transactions", "producer_state", "partition_summary")


_LOGS = itertools.count()


@dataclass
class Started:
    """A `produce-audit run` whose stdout and stderr go to files: a run that writes more than a pipe holds never
    blocks on a test that is waiting for it to end before reading."""

    process: subprocess.Popen
    stdout: Path
    stderr: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def finish(self, timeout: float) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) once it has ended; it and its JVM are killed when it outlives `timeout`."""
        try:
            code = self.process.wait(timeout=timeout)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return code, self.stdout.read_text(errors="replace"), self.stderr.read_text(errors="replace")


def _start_run(root: Path, warehouse: Path, *extra: str) -> Started:
    args = [str(CLI), "run", "--input", str(root), "--warehouse", str(warehouse), *extra]
    logs = warehouse.parent / f"{warehouse.name}-run-{next(_LOGS)}"
    stdout, stderr = logs.with_suffix(".out"), logs.with_suffix(".err")
    with stdout.open("wb") as out, stderr.open("wb") as err:  # the child keeps its own descriptors
        process = subprocess.Popen(args, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
    return Started(process, stdout, stderr)


def _published(warehouse: Path) -> dict:
    runs = [r for r in DeltaTable(str(warehouse / "runs")).to_pyarrow_table().to_pylist() if r["table_versions"]]
    return max(runs, key=lambda run: run["finished_at"])


def _published_rows(warehouse: Path) -> dict[str, list[str]]:
    """The audit tables at the versions the last published run recorded, without run ids, in a stable order."""
    versions = dict(_published(warehouse)["table_versions"])
    rows = {}
    for table in AUDIT_TABLES:
        data = DeltaTable(str(warehouse / table), version=versions[table]).to_pyarrow_table().drop(["run_id"])
        rows[table] = sorted(json.dumps(row, sort_keys=True, default=str) for row in data.to_pylist())
    return rows


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """Two runs of the sample started together on one warehouse: (root, warehouse, both processes' results)."""
    root = generate(tmp_path_factory.mktemp("sample"))
    warehouse = tmp_path_factory.mktemp("wh") / "wh"
    runs = [_start_run(root, warehouse) for _ in range(2)]
    try:
        results = [run.finish(timeout=900) for run in runs]
    finally:
        for run in runs:  # the other one, when one outlived its timeout
            if run.process.poll() is None:
                os.killpg(run.pid, signal.SIGKILL)
                run.process.wait()
    return root, warehouse, results


def test_of_two_runs_at_once_one_is_refused_and_names_the_holder(first_run):
    _, warehouse, results = first_run
    assert sorted(code for code, _, _ in results) == [1, 2], [err[-2000:] for _, _, err in results]
    (_, _, refused_err), (_, winner_out, _) = sorted(results, key=lambda result: -result[0])
    winner = _published(warehouse)
    assert refused_err.strip().splitlines()[-1].startswith("produce-audit run: error: ")
    assert f"locked by run {winner['run_id']}" in refused_err
    assert "Findings by severity" in winner_out
    runs = DeltaTable(str(warehouse / "runs")).to_pyarrow_table().to_pylist()
    assert [(run["run_id"], run["status"]) for run in runs] == [(winner["run_id"], "succeeded")]
    assert not (warehouse / LOCK_FILE).exists()


def test_a_run_killed_after_its_findings_commit_leaves_readers_on_the_previous_run(first_run, spark):
    root, warehouse, _ = first_run
    published = _published(warehouse)
    before = _published_rows(warehouse)
    summary_path = warehouse / "reports" / published["run_id"] / "summary.json"
    summary = json.loads(summary_path.read_text())

    findings_log = warehouse / "findings" / "_delta_log"
    committed = len(list(findings_log.glob("*.json")))
    killed = _start_run(root, warehouse, "--full")
    deadline = time.monotonic() + 600
    while len(list(findings_log.glob("*.json"))) == committed and killed.process.poll() is None:
        assert time.monotonic() < deadline, "the run never committed findings"
        time.sleep(0.02)
    os.killpg(killed.pid, signal.SIGKILL)
    code, _, err = killed.finish(timeout=60)
    assert code == -signal.SIGKILL, err[-3000:]
    assert len(list(findings_log.glob("*.json"))) > committed  # its findings did land

    assert (warehouse / LOCK_FILE).exists()  # the dead run's
    assert _published(warehouse)["run_id"] == published["run_id"]
    assert _published_rows(warehouse) == before
    report = in_process("report", "--warehouse", str(warehouse))
    assert report.returncode == 1, report.stderr[-2000:]  # the sample's CRITICAL finding, not a false all-clear
    again = json.loads(summary_path.read_text())
    summary.pop("run"), again.pop("run")
    assert again == summary

    both_compilers = warehouse.parent / "both-compilers.yaml"  # a rerun sized as a large log: the same rows
    both_compilers.write_text("spark:\n  optimising_compiler_batches: 1\n")
    rerun = cli("run", "--input", str(root), "--warehouse", str(warehouse), "--full", "--conf", str(both_compilers))
    assert rerun.returncode == 1, rerun.stderr[-2000:]
    assert dict(_published(warehouse)["counts"])["plan.optimising_compiler"] == 1
    assert "taking over the lock" in rerun.stderr and "unfinished run: restored findings" in rerun.stderr
    assert _published(warehouse)["run_id"] != published["run_id"]
    assert _published_rows(warehouse) == before
    assert not (warehouse / LOCK_FILE).exists()


def test_a_terminated_run_rolls_itself_back_and_unlocks(first_run):
    root, warehouse, _ = first_run
    published = _published(warehouse)
    before = _published_rows(warehouse)
    findings_log = warehouse / "findings" / "_delta_log"
    committed = len(list(findings_log.glob("*.json")))
    recorded = {run["run_id"] for run in DeltaTable(str(warehouse / "runs")).to_pyarrow_table().to_pylist()}
    terminated = _start_run(root, warehouse, "--full")
    while len(list(findings_log.glob("*.json"))) == committed and terminated.process.poll() is None:
        time.sleep(0.02)
    terminated.process.send_signal(signal.SIGTERM)
    code, _, err = terminated.finish(timeout=300)

    assert code == 3, err[-3000:]
    assert "terminated by SIGTERM; its commits were rolled back" in err.strip().splitlines()[-1]
    assert not (warehouse / LOCK_FILE).exists()
    runs = DeltaTable(str(warehouse / "runs")).to_pyarrow_table().to_pylist()
    assert [run["status"] for run in runs if run["run_id"] not in recorded] == ["failed"]
    assert _published(warehouse)["run_id"] == published["run_id"]
    for table in AUDIT_TABLES:  # the latest versions read as the published ones again
        latest = DeltaTable(str(warehouse / table)).to_pyarrow_table().drop(["run_id"]).to_pylist()
        assert sorted(json.dumps(row, sort_keys=True, default=str) for row in latest) == before[table], table


def test_a_sigterm_during_a_call_into_the_jvm_is_raised_once_the_call_returns(spark):
    """Raised inside the call, it left the JVM's answer on the thread's py4j connection, and while the error was
    handled (the roll-back) every call got the answer of the one before: a native write missed its commit."""
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()
    started = time.monotonic()
    try:
        with terminated_as_error(True):
            spark._jvm.java.lang.Thread.sleep(1500)  # the signal arrives during this call
            while True:  # and is raised here, between calls
                time.sleep(0.01)
    except Terminated:  # as the roll-back does, with the error and its traceback alive
        assert time.monotonic() - started >= 1.5
        assert spark._jvm.java.lang.Math.abs(-7) == 7
        assert spark.range(5).count() == 5
    else:
        pytest.fail("SIGTERM did not raise Terminated")
