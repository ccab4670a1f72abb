"""One broker life with every workload: what the conformance tests audit and `python -m tests.kafka_broker` writes.

The broker finalizes transaction.version 2, so the Java client runs Transactions V2 while librdkafka, which
has no V2, runs V1 against the same broker. The broker is restarted once with a transaction open, a head of a
partition is deleted with DeleteRecords, and it is stopped cleanly before its log dir is read. Before it stops,
the installed CLI audits it over the Kafka protocol (`wire_audits.py`), as a managed cluster is audited.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.kafka_broker import java_clients, librdkafka_clients
from tests.kafka_broker.broker import Broker
from tests.kafka_broker.dumps import dump_log_dir
from tests.kafka_broker.ledger import COMMITTED, Ledger
from tests.kafka_broker.wire_audits import (
    PASSWORD,
    USER,
    Outcome,
    WireRuns,
    earlier_run,
    expired_producer_run,
    wire_runs,
)

KAFKA_VERSION = "4.1.1"
ROLL = {"segment.ms": "500"}  # a segment rolls on the first append 500 ms after it opened
TOPICS = {
    "idempotent": (3, {}),
    "v1": (3, ROLL),
    "v2": (3, ROLL),
    "restart": (2, {}),
    "retention": (1, {"segment.ms": "200"}),
}
HANGING = (
    "not produced: since KIP-890 part 1 (3.6) the partition leader verifies with the coordinator that a "
    "transactional produce belongs to an ongoing transaction (transaction.partition.verification.enable, on by "
    "default), so no client can write data outside a transaction, and V2 adds partitions implicitly"
)


@dataclass(frozen=True)
class Fixture:
    log_dir: Path  # the broker's log.dirs entry (also its KRaft metadata dir)
    dumps: Path  # kafka-dump-log text of every segment
    ground_truth: Path  # ledger.json
    wire: WireRuns  # `run --input kafka://...` while the broker served, after every workload
    requests: Path  # every request the broker completed, as its request logger writes them
    expired: Outcome  # `run --input kafka://...` of a broker of its own that expired an idle producer
    seconds: float


def run_all(home: Path) -> Fixture:
    """Format, start, run every workload, stop; then dump every segment. `home` must not exist yet."""
    started = time.monotonic()
    ledger = Ledger(notes={"kafka_version": KAFKA_VERSION, "hanging_transaction": HANGING})
    # A broker of its own expires a producer meanwhile (it must not expire this one's: their snapshots are audited).
    aside = ThreadPoolExecutor(1)
    expired = aside.submit(expired_producer_run, home / "expiring")
    with ThreadPoolExecutor(1) as javac:  # the client compiles while the broker starts
        compiled = javac.submit(java_clients.compile_program, home / "classes")
        broker = Broker(
            home / "broker", features={"transaction.version": 2}, scram_users={USER: PASSWORD}, log_requests=True
        )
        broker.format()
        broker.start()
    try:
        classes = compiled.result()
        bootstrap = broker.bootstrap
        librdkafka_clients.create_topics(bootstrap, TOPICS)
        librdkafka_clients.idempotent(bootstrap, ledger, "idempotent")
        librdkafka_clients.transactions(
            bootstrap, ledger, "v1-transactions", "v1", [0, 1, 2], 6, pause=0.8, marker_alone=3
        )
        librdkafka_clients.zombie(bootstrap, ledger, "v1")
        librdkafka_clients.timeout(bootstrap, ledger, "v1")
        librdkafka_clients.offsets(bootstrap, ledger, "idempotent", "v1")
        restart(broker, ledger)
        retention(bootstrap, ledger)
        partitions = [f"{topic}-{p}" for topic, (count, _) in TOPICS.items() for p in range(count)]
        earlier = earlier_run(broker.sasl_bootstrap, home / "wire")
        java_clients.transactions_v2(bootstrap, ledger, classes, "v2", "idempotent", partitions)
        wire = wire_runs(broker.sasl_bootstrap, home / "wire", earlier)
    finally:
        broker.stop()
        aside.shutdown()
    ledger.notes["broker_starts"] = broker.starts
    dumps = home / "dumps"
    dump_log_dir(broker.log_dir, dumps)
    ledger.write(home / "ledger.json")
    return Fixture(
        broker.log_dir,
        dumps,
        home / "ledger.json",
        wire,
        broker.request_log,
        expired.result(),
        time.monotonic() - started,
    )


def restart(broker: Broker, ledger: Ledger) -> None:
    """A clean broker restart while an idempotent producer is mid-stream and a transaction is open."""
    bootstrap = broker.bootstrap
    idempotent = ledger.entry("restart", librdkafka_clients.CLIENT, None, None, "acknowledged")
    producer = librdkafka_clients.producer(bootstrap, **{"max.in.flight.requests.per.connection": 5})
    librdkafka_clients.send(producer, idempotent, "restart", [0, 1], 300)
    transactional = librdkafka_clients.Transactional(bootstrap, ledger, "restart", "v1-restart")
    entry = transactional.begin("commit across a broker restart", COMMITTED)
    librdkafka_clients.send(transactional.producer, entry, "restart", [0, 1], 20)
    broker.restart()
    transactional.producer.commit_transaction(librdkafka_clients.SECONDS)
    librdkafka_clients.send(producer, idempotent, "restart", [0, 1], 300)
    ledger.notes["restart"] = "broker stopped and started with transaction v1-restart open; it committed after"


def retention(bootstrap: str, ledger: Ledger) -> None:
    """Transactions over several rolled segments, then DeleteRecords into the middle of an aborted one."""
    librdkafka_clients.transactions(bootstrap, ledger, "v1-retention", "retention", [0], 6, pause=0.3)
    aborted = [e for e in ledger.entries if e.workload == "v1-retention" and e.how == "abort"]
    offsets = sorted(aborted[1].offsets["retention-0"])
    before = offsets[len(offsets) // 2]
    log_start = librdkafka_clients.delete_records(bootstrap, "retention", 0, before)
    time.sleep(3)  # the retention check (every second here) deletes the segments below the new log start
    ledger.notes["retention"] = {"delete_records_before": before, "log_start_offset": log_start}
