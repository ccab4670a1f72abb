"""A Kafka broker in KRaft mode (combined broker and controller) on loopback, as a child process: a node of a
one-node cluster, or of a cluster of several (tests/kafka_broker/cluster.py).

The broker is started from the bundle's jars with `kafka.Kafka`, after `StorageTool format` has written its
meta.properties, and stopped with SIGTERM, waiting for the controlled shutdown to finish: a clean stop is what
writes the producer-state snapshots, the recovery checkpoints and the flushed segments the audit then reads.
"""

from __future__ import annotations

import base64
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tests.kafka_broker import jvm

STARTED = "Kafka Server started"
STOPPED = "[BrokerServer id={node_id}] shut down completed"  # after the log manager closed every log
START_SECONDS = 90
STOP_SECONDS = 90

# Settings a one-node test cluster needs (replication factor 1), plus short intervals so that timeout aborts,
# retention and DeleteRecords take effect within seconds instead of minutes.
BASE_PROPERTIES = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "2",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "2",
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "log.retention.check.interval.ms": "1000",
    "log.segment.delete.delay.ms": "0",
    "log.initial.task.delay.ms": "0",
    "auto.create.topics.enable": "false",
}

LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = FILE
logger.raft.name = org.apache.kafka.raft
logger.raft.level = WARN
"""
# Every request the broker completes, one line each with its API key and client id, apart from server.log.
REQUEST_LOG4J2 = """\
appender.requests.type = File
appender.requests.name = REQUESTS
appender.requests.fileName = {log}
appender.requests.layout.type = PatternLayout
appender.requests.layout.pattern = %m%n
logger.requests.name = kafka.request.logger
logger.requests.level = DEBUG
logger.requests.additivity = false
logger.requests.appenderRef.requests.ref = REQUESTS
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Broker:
    """One broker whose files live under `home`: `home/data` is its log dir (and KRaft metadata dir)."""

    home: Path
    features: dict[str, int] = field(default_factory=dict)  # e.g. {"transaction.version": 2}, set at format
    port: int = field(default_factory=free_port)
    controller_port: int = field(default_factory=free_port)
    node_id: int = 1
    voters: str | None = None  # controller.quorum.voters of a cluster of several nodes; None: this node alone
    cluster_id: str = field(default_factory=lambda: _base64_uuid())
    settings: dict[str, str] = field(default_factory=dict)  # over BASE_PROPERTIES
    # SCRAM-SHA-256 users (name: password) of a second, SASL_PLAINTEXT listener; none: no such listener
    scram_users: dict[str, str] = field(default_factory=dict)
    sasl_port: int = field(default_factory=free_port)
    log_requests: bool = False  # every request completed, into requests.log (`request_log`)
    process: subprocess.Popen | None = None
    starts: int = 0

    @property
    def log_dir(self) -> Path:
        return self.home / "data"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def server_log(self) -> Path:
        return self.home / "server.log"

    @property
    def request_log(self) -> Path:
        return self.home / "requests.log"

    def properties(self) -> dict[str, str]:
        listeners = [f"PLAINTEXT://127.0.0.1:{self.port}"]
        sasl = {}
        if self.scram_users:
            listeners.append(f"SASL_PLAINTEXT://{self.sasl_bootstrap}")
            sasl = {
                "listener.security.protocol.map": BASE_PROPERTIES["listener.security.protocol.map"]
                + ",SASL_PLAINTEXT:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;"
                ),
            }
        return {
            **BASE_PROPERTIES,
            **self.settings,
            **sasl,
            "node.id": str(self.node_id),
            "listeners": ",".join([*listeners, f"CONTROLLER://127.0.0.1:{self.controller_port}"]),
            "advertised.listeners": ",".join(listeners),
            "controller.quorum.voters": self.voters or f"{self.node_id}@127.0.0.1:{self.controller_port}",
            "log.dirs": str(self.log_dir),
        }

    @property
    def voter(self) -> str:
        return f"{self.node_id}@127.0.0.1:{self.controller_port}"

    def format(self) -> None:
        """Write the configuration files and format the log dir as a node of cluster `cluster_id`."""
        self.home.mkdir(parents=True, exist_ok=True)
        lines = [f"{key}={value}" for key, value in self.properties().items()]
        (self.home / "server.properties").write_text("\n".join(lines) + "\n")
        requests = REQUEST_LOG4J2.format(log=self.request_log) if self.log_requests else ""
        (self.home / "log4j2.properties").write_text(LOG4J2.format(log=self.server_log) + requests)
        features = [arg for name, level in self.features.items() for arg in ("--feature", f"{name}={level}")]
        scram = [
            arg for name, secret in self.scram_users.items()
            for arg in ("--add-scram", f"SCRAM-SHA-256=[name={name},password={secret}]")
        ]  # fmt: skip
        jvm.run(
            "kafka.tools.StorageTool", "format", "--config", str(self.home / "server.properties"),
            "--cluster-id", self.cluster_id, "--ignore-formatted", *features, *scram,
        )  # fmt: skip

    def start(self) -> None:
        """Start the broker and wait until it serves; the previous start's log lines are kept."""
        self.wait_started(self.launch())

    def launch(self) -> int:
        """Start the broker's process; returns where its log lines of this start begin (for `wait_started`). The
        nodes of a cluster are launched together: none serves before a quorum of controllers runs."""
        offset = self.server_log.stat().st_size if self.server_log.exists() else 0
        java = jvm.command(
            "kafka.Kafka",
            str(self.home / "server.properties"),
            heap="512m",
            # log4j2 must keep logging until the broker's own shutdown hook has finished
            options=(
                f"-Dlog4j2.configurationFile={self.home / 'log4j2.properties'}",
                "-Dlog4j2.shutdownHookEnabled=false",
            ),
        )
        with open(self.home / "stderr.log", "ab") as stderr:  # the child keeps its own descriptor
            self.process = subprocess.Popen(java, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        self.starts += 1
        return offset

    def wait_started(self, offset: int) -> None:
        self._wait_for(STARTED, offset, START_SECONDS)

    def kill(self) -> None:
        """SIGKILL, as a crashed or OOM-killed broker ends: no controlled shutdown, no snapshot, no flush."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(STOP_SECONDS)
            self.process = None

    def stop(self) -> None:
        """SIGTERM and wait for the controlled shutdown; a broker that does not finish in time is an error."""
        if self.process is None:
            return
        offset = self.server_log.stat().st_size
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise RuntimeError(f"broker did not stop within {STOP_SECONDS} s; see {self.server_log}") from None
        finally:
            self.process = None
        if STOPPED.format(node_id=self.node_id) not in self._log_since(offset):
            raise RuntimeError(f"broker exited without a clean shutdown; see {self.server_log}")

    def restart(self) -> None:
        self.stop()
        self.start()

    def _log_since(self, offset: int) -> str:
        with open(self.server_log, "rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")

    def _wait_for(self, line: str, offset: int, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode}; see {self.server_log}")
            if self.server_log.exists() and line in self._log_since(offset):
                return
            time.sleep(0.2)
        raise RuntimeError(f"broker did not log {line!r} within {seconds} s; see {self.server_log}")


def _base64_uuid() -> str:
    """A cluster id as Kafka makes them: a random UUID in URL-safe base64 without padding, drawn again when it starts
    with a dash (as Kafka's Uuid.randomUuid does), which the storage tool would read as an option."""
    while (cluster_id := base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")).startswith("-"):
        pass
    return cluster_id
