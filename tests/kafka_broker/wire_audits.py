"""`produce-audit run --input kafka://...` against live brokers, as a user of a managed cluster runs it: over the
session broker's SASL_PLAINTEXT listener with SCRAM-SHA-256, while it still serves (before the session stops it and
its log dir is audited): once while the last workloads write, then, into the same warehouse, as a nightly run that
goes on from it, and with a wrong password; and against a broker of its own that expires an idle producer's state
within seconds while the producer's batches stay in its log."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.kafka_broker import librdkafka_clients
from tests.kafka_broker.audits import CLI
from tests.kafka_broker.broker import Broker
from tests.kafka_broker.ledger import Ledger

USER, PASSWORD = "audit", "audit-secret"
COORDINATOR_TOPICS = ("__transaction_state", "__consumer_offsets")  # fetched too: the TSL and XTX rules run
EXPIRING_TOPIC = "expiring"
# Short enough that a producer idle for a few seconds is expired, as a default broker expires one after a day.
EXPIRING = {"producer.id.expiration.ms": "2000", "producer.id.expiration.check.interval.ms": "500"}
PASSWORD_VARIABLE = "PRODUCE_AUDIT_TEST_KAFKA_PASSWORD"


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    stderr: str
    warehouse: Path


@dataclass(frozen=True)
class WireRuns:
    uri: str
    earlier: Outcome  # the right password, before the last workloads: the run `audited` goes on from
    audited: Outcome  # the right password, after every workload, into the same warehouse
    refused: Outcome  # a wrong one


@dataclass
class Started:
    process: subprocess.Popen
    log: Path
    warehouse: Path

    def outcome(self) -> Outcome:
        code = self.process.wait(timeout=900)
        return Outcome(code, self.log.read_text(errors="replace"), self.warehouse)


def start(sasl_bootstrap: str, home: Path, name: str, password: str, warehouse: Path) -> Started:
    """`produce-audit run --input kafka://...` over SASL/SCRAM with `password`, into `warehouse`, not waited for."""
    home.mkdir(parents=True, exist_ok=True)
    conf = home / "wire.yaml"
    kafka = {
        "topics": ["*", *COORDINATOR_TOPICS],
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_username": USER,
        "sasl_password_env": PASSWORD_VARIABLE,
    }
    conf.write_text(yaml.safe_dump({"kafka": kafka}))
    command = [str(CLI), "run", "--input", f"kafka://{sasl_bootstrap}", "--warehouse", str(warehouse)]
    log = home / f"{name}.log"  # a file, not a pipe: no run waits for another's output to be read
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [*command, "--conf", str(conf), "--fail-on", "never"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            env={**os.environ, PASSWORD_VARIABLE: password},
        )
    return Started(process, log, warehouse)


def earlier_run(sasl_bootstrap: str, home: Path) -> Started:
    """The first run into the warehouse the last one goes on from, started while the last workloads write."""
    return start(sasl_bootstrap, home, "earlier", PASSWORD, home / "audited" / "wh")


def wire_runs(sasl_bootstrap: str, home: Path, earlier: Started) -> WireRuns:
    """After the earlier run: the right and the wrong password, started together (each fills the other's JVM start)."""
    before = earlier.outcome()
    audited = start(sasl_bootstrap, home, "audited", PASSWORD, home / "audited" / "wh")
    refused = start(sasl_bootstrap, home, "refused", "not-the-password", home / "refused" / "wh")
    return WireRuns(f"kafka://{sasl_bootstrap}", before, audited.outcome(), refused.outcome())


def expired_producer_run(home: Path) -> Outcome:
    """An idempotent producer writes, goes idle and is expired by its leader; then the installed CLI audits the
    broker over the protocol with the shipped settings (which assume a day's expiration, as brokers default to)."""
    broker = Broker(home / "broker", settings=EXPIRING)
    broker.format()
    broker.start()
    try:
        bootstrap = broker.bootstrap
        librdkafka_clients.create_topics(bootstrap, {EXPIRING_TOPIC: (1, {})})
        entry = Ledger(notes={}).entry(EXPIRING_TOPIC, librdkafka_clients.CLIENT, None, None, "acknowledged")
        librdkafka_clients.send(librdkafka_clients.producer(bootstrap), entry, EXPIRING_TOPIC, [0], 200)
        wait_expired(bootstrap, EXPIRING_TOPIC, 0)
        warehouse = home / "wh"
        log = home / "stderr.log"
        with log.open("wb") as stderr:
            command = [str(CLI), "run", "--input", f"kafka://{bootstrap}", "--warehouse", str(warehouse)]
            code = subprocess.run(
                [*command, "--fail-on", "never"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr
            ).returncode
        return Outcome(code, log.read_text(errors="replace"), warehouse)
    finally:
        broker.kill()  # its log dir is not audited: no clean stop needed


def wait_expired(bootstrap: str, topic: str, partition: int, seconds: float = 60) -> None:
    """Until the partition's leader reports no producer (DescribeProducers)."""
    from kafka import KafkaAdminClient, TopicPartition

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        deadline = time.monotonic() + seconds
        while admin.describe_producers([TopicPartition(topic, partition)])[
            TopicPartition(topic, partition)
        ].active_producers:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the leader of {topic}-{partition} kept its producers for {seconds} s")
            time.sleep(0.5)
    finally:
        admin.close()
