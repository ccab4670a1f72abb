"""`./spark-submit.sh --master spark://...` on a Spark standalone cluster on loopback: a master and a worker started
from pyspark's own bin/spark-class, whose executors are JVMs of their own with Python workers from the environment
the script packs (venv-pack, shipped with --archives) and the project's zip (--py-files).

Slow, and marked `cluster` (deselect with `-m "not cluster"`): packing the executors' environment, from the files
of the packages this virtualenv has installed, takes half a minute the first time (build/produce-audit-env.tar.gz
is reused while the dependencies stay the same), and the run starts four JVMs besides the test's own.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark
import pytest

from pipeline.cli import main

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "samples" / "basic"
SAMPLE_GOLDEN = REPO / "tests" / "golden" / "sample"
SPARK_HOME = Path(pyspark.__file__).resolve().parent
LOOPBACK = "127.0.0.1"
STARTUP_SECONDS = 240  # JVMs start slowly on a busy 2-core machine
RUN_SECONDS = 1800  # packing the environment and the run, on that machine


@dataclass
class Cluster:
    master_url: str
    work_dir: Path  # the worker's: one folder per application, one per executor inside


@dataclass
class PythonWorker:
    pid: int
    argv0: str
    cwd: str
    parent_command: str


def loopback_environment() -> dict[str, str]:
    """Every JVM binds and advertises loopback only; no Python setting of the test session leaks in."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    environment.update(SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP=LOOPBACK, SPARK_DAEMON_MEMORY="256m")
    return environment


def start_daemon(log: Path, arguments: list[str], environment: dict[str, str]) -> subprocess.Popen:
    with log.open("wb") as output:
        return subprocess.Popen(
            [str(SPARK_HOME / "bin" / "spark-class"), *arguments],
            stdout=output,
            stderr=subprocess.STDOUT,
            env=environment,
        )


def wait_for_line(log: Path, pattern: str, daemons: list[subprocess.Popen], deadline: float) -> re.Match:
    """Ports are chosen by the daemons (0), so no other process of a busy machine can take them first: the
    master's URL and the worker's registration are read from what the daemons log."""
    while (found := re.search(pattern, log.read_text(errors="replace"))) is None:
        assert all(daemon.poll() is None for daemon in daemons), log.read_text(errors="replace")[-3000:]
        assert time.monotonic() < deadline, f"no line matching {pattern!r} in {log}"
        time.sleep(1)
    return found


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java to start a standalone cluster with")
    root = tmp_path_factory.mktemp("standalone")
    work_dir = root / "work"
    work_dir.mkdir()
    environment = loopback_environment()
    environment["SPARK_MASTER_OPTS"] = "-Dspark.master.rest.enabled=false"  # its port 6066 is fixed
    daemons: list[subprocess.Popen] = []
    deadline = time.monotonic() + STARTUP_SECONDS
    try:
        master_log, worker_log = root / "master.log", root / "worker.log"
        daemons.append(start_daemon(master_log, [
            "org.apache.spark.deploy.master.Master", "--host", LOOPBACK, "--port", "0", "--webui-port", "0",
        ], environment))  # fmt: skip
        master_url = wait_for_line(master_log, r"Starting Spark master at (spark://\S+)", daemons, deadline)[1]
        daemons.append(start_daemon(worker_log, [
            "org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK, "--port", "0", "--webui-port", "0",
            "--cores", "2", "--memory", "2g", "--work-dir", str(work_dir), master_url,
        ], environment))  # fmt: skip
        wait_for_line(worker_log, r"Successfully registered with master", daemons, deadline)
        yield Cluster(master_url, work_dir)
    finally:
        for daemon in reversed(daemons):  # spark-class execs the JVM: these are the master's and worker's pids
            daemon.terminate()
            try:
                daemon.wait(60)
            except subprocess.TimeoutExpired:
                daemon.kill()


class PythonWorkerWatch:
    """Python processes of the executors, seen in /proc while the application runs (they end with it)."""

    def __init__(self, work_dir: Path) -> None:
        self.work_dir = str(work_dir)
        self.seen: dict[int, PythonWorker] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> PythonWorkerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(0.5):
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit() and int(entry.name) not in self.seen:
                    worker = self._python_worker(entry)
                    if worker is not None:
                        self.seen[worker.pid] = worker

    def _python_worker(self, process: Path) -> PythonWorker | None:
        try:
            cwd = os.readlink(process / "cwd")
            if not cwd.startswith(self.work_dir):
                return None
            argv = (process / "cmdline").read_bytes().split(b"\0")
            parent = (process / "stat").read_text().rsplit(")", 1)[1].split()[1]
            parent_argv = (Path("/proc") / parent / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:  # gone meanwhile, or not ours to read
            return None
        if b"python" not in argv[0]:
            return None
        return PythonWorker(int(process.name), argv[0].decode(), cwd, parent_argv.decode(errors="replace"))


def event_log(folder: Path) -> list[dict]:
    (log,) = [path for path in folder.iterdir() if not path.name.endswith(".inprogress")]
    return [json.loads(line) for line in log.read_text().splitlines()]


@pytest.mark.skipif(not Path("/proc/self/cwd").exists(), reason="watches the executors' processes in /proc")
def test_a_standalone_cluster_run_ships_the_environment_and_finds_what_a_local_run_finds(cluster, spark, tmp_path):
    warehouse, events = tmp_path / "wh", tmp_path / "events"
    events.mkdir()
    environment = loopback_environment()
    environment["PRODUCE_AUDIT_VENV"] = sys.prefix
    command = [
        str(REPO / "spark-submit.sh"), "--master", cluster.master_url,
        "--conf", f"spark.driver.host={LOOPBACK}", "--conf", f"spark.driver.bindAddress={LOOPBACK}",
        "--conf", "spark.executor.cores=1", "--conf", "spark.executor.memory=768m", "--conf", "spark.ui.enabled=false",
        "--conf", "spark.eventLog.enabled=true", "--conf", f"spark.eventLog.dir={events.as_uri()}",
        "--conf", "spark.eventLog.compress=false", "--conf", "spark.eventLog.rolling.enabled=false",
        "run", "--input", str(SAMPLE), "--warehouse", str(warehouse),
    ]  # fmt: skip

    with PythonWorkerWatch(cluster.work_dir) as watch:
        completed = subprocess.run(
            command, capture_output=True, text=True, timeout=RUN_SECONDS, stdin=subprocess.DEVNULL, env=environment
        )

    assert completed.returncode == 1, completed.stderr[-4000:]  # the sample's CRITICAL and ERROR findings
    assert completed.stdout.startswith("produce-audit run "), completed.stdout[:500]
    # every row of the result tables as a local run of the sample wrote them
    assert main(["compare", "--actual", str(warehouse), "--golden", str(SAMPLE_GOLDEN)]) == 0

    # The executors: JVMs of their own, launched by the worker, that ran the application's tasks.
    log = event_log(events)
    (application,) = [event["App ID"] for event in log if event["Event"] == "SparkListenerApplicationStart"]
    executors = {e["Executor ID"]: e["Executor Info"] for e in log if e["Event"] == "SparkListenerExecutorAdded"}
    assert len(executors) == 2 and "driver" not in executors, executors
    assert {info["Host"] for info in executors.values()} == {LOOPBACK}
    tasks = [e["Task Info"]["Executor ID"] for e in log if e["Event"] == "SparkListenerTaskEnd"]
    assert tasks and set(tasks) <= set(executors)
    for executor in executors:
        folder = cluster.work_dir / application / executor
        assert "CoarseGrainedExecutorBackend" in (folder / "stderr").read_text().split("\n", 1)[0]
        assert (folder / "environment" / "bin" / "python").exists()  # the archive, unpacked where it runs

    # Their Python workers ran the shipped environment's interpreter, as children of an executor JVM.
    workers = [worker for worker in watch.seen.values() if application in worker.cwd]
    assert workers, "no Python worker of the application was seen"
    for worker in workers:
        assert worker.argv0 == "./environment/bin/python", worker
        assert "CoarseGrainedExecutorBackend" in worker.parent_command or "pyspark.daemon" in worker.parent_command
