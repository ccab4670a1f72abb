"""One life of a three-broker cluster through the faults real clusters live with: what the cluster conformance
tests audit.

Replication factor 3 and `min.insync.replicas=2` everywhere. Idempotent producers write while the leader of
one of their partitions is SIGKILLed and started again; librdkafka (Transactions V1) commits, aborts, is fenced
and times out; the coordinator of one of its transactions is SIGKILLed between its send and its commit; a
compacted topic is written transactionally until every broker's cleaner has cleaned it, then written again so
that a second pass removes the markers of transactions whose data is gone; the Java client runs Transactions V2.
Every broker is then stopped cleanly and its log dir is read as it was left, and dumped with kafka-dump-log; one
log dir is also copied while the producers write to it, as operators copy a running broker.

Not here: a group coordinator SIGKILLed between a transaction's offsets and its commit. librdkafka's
send_offsets_to_transaction of the next transaction then blocked past its own timeout (minutes) while the killed
broker was down; consume-transform-produce runs on the single-broker fixture.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.kafka_broker import java_clients, librdkafka_clients
from tests.kafka_broker.broker import BASE_PROPERTIES
from tests.kafka_broker.cluster import Cluster, running, three_brokers
from tests.kafka_broker.dumps import dump_log_dir
from tests.kafka_broker.ledger import ABORTED, COMMITTED, Ledger
from tests.kafka_broker.session import KAFKA_VERSION, ROLL

COMPACTED = "compacted"
TOPICS = {
    "idempotent": (3, {}),
    "v1": (3, ROLL),
    "v2": (3, ROLL),
    COMPACTED: (
        2,
        {
            "cleanup.policy": "compact",
            "segment.ms": "300",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
            "delete.retention.ms": "1000",
        },
    ),
}
CLEANED_SECONDS = 120  # two passes of three cleaners on a busy 2-core machine
LIFE_SECONDS = 900  # about 60 s on an idle 2-core machine


@dataclass(frozen=True)
class ClusterFixture:
    log_dirs: tuple[Path, ...]  # broker 1, 2, 3
    live_copy: Path  # one broker's log dir copied file by file while producers wrote to it
    dumps: tuple[Path, ...]  # kafka-dump-log text of each broker's segments
    ground_truth: Path  # ledger.json
    seconds: float


def run_all(home: Path) -> ClusterFixture:
    """Format, start, run every workload, stop every broker cleanly. `home` must not exist yet."""
    started = time.monotonic()
    cluster = three_brokers(home / "cluster", features={"transaction.version": 2})
    watchdog = threading.Timer(LIFE_SECONDS, _give_up, args=(cluster,))
    watchdog.daemon = True
    watchdog.start()
    try:
        return _life(home, cluster, started)
    finally:
        watchdog.cancel()


def _give_up(cluster: Cluster) -> None:
    """A client call that blocks past its own timeout would hold the test session until CI's limit: kill the
    brokers and end the worker instead, so that its tests fail now."""
    for broker in cluster.brokers:
        if broker.process is not None:
            broker.process.kill()
    sys.stderr.write(f"the cluster life took over {LIFE_SECONDS} s: brokers killed, ending this test process\n")
    sys.stderr.flush()
    os._exit(70)


def _life(home: Path, cluster: Cluster, started: float) -> ClusterFixture:
    ledger = Ledger(notes={"kafka_version": KAFKA_VERSION, "brokers": 3, "replication_factor": 3})
    with ThreadPoolExecutor(1) as javac:  # the client compiles while the brokers start
        compiled = javac.submit(java_clients.compile_program, home / "classes")
        with running(cluster):
            bootstrap = cluster.bootstrap
            librdkafka_clients.create_topics(bootstrap, TOPICS, replication=3)
            leader_killed(cluster, ledger)
            librdkafka_clients.transactions(bootstrap, ledger, "v1-transactions", "v1", [0, 1, 2], 4, pause=0.6)
            librdkafka_clients.zombie(bootstrap, ledger, "v1")
            librdkafka_clients.timeout(bootstrap, ledger, "v1")
            coordinator_killed(cluster, ledger)
            live_copy = compacted(cluster, ledger, home / "live-copy")
            partitions = [f"{topic}-{p}" for topic, (count, _) in TOPICS.items() for p in range(count)]
            java_clients.transactions_v2(bootstrap, ledger, compiled.result(), "v2", "idempotent", partitions)
    ledger.notes["broker_starts"] = {broker.node_id: broker.starts for broker in cluster.brokers}
    ledger.write(home / "ledger.json")
    dumps = tuple(home / "dumps" / f"broker-{broker.node_id}" for broker in cluster.brokers)
    with ThreadPoolExecutor(len(dumps)) as tools:
        list(tools.map(dump_log_dir, [broker.log_dir for broker in cluster.brokers], dumps))
    return ClusterFixture(
        tuple(broker.log_dir for broker in cluster.brokers),
        live_copy,
        dumps,
        home / "ledger.json",
        time.monotonic() - started,
    )


def leader_killed(cluster: Cluster, ledger: Ledger) -> None:
    """Two idempotent producers, five requests in flight; the leader of idempotent-0 is SIGKILLed mid-stream and
    started again a few seconds later, while the producers go on against the new leader."""
    bootstrap = cluster.bootstrap
    victim = cluster.broker(librdkafka_clients.leader(bootstrap, "idempotent", 0))

    def kill_and_start() -> None:
        time.sleep(1.0)
        victim.kill()
        time.sleep(4.0)
        victim.start()

    fault = threading.Thread(target=kill_and_start)
    fault.start()
    try:
        for _ in range(2):
            entry = ledger.entry("idempotent", librdkafka_clients.CLIENT, None, None, "acknowledged")
            client = librdkafka_clients.producer(
                bootstrap, **{"max.in.flight.requests.per.connection": 5, "batch.size": 4096, "retries": 1000}
            )
            for _ in range(10):  # in rounds, so that the kill falls inside the stream
                librdkafka_clients.send(client, entry, "idempotent", [0, 1, 2], 300)
                time.sleep(0.1)
    finally:
        fault.join()
    ledger.notes["leader_killed"] = {"topic_partition": "idempotent-0", "node_id": victim.node_id}


def coordinator_killed(cluster: Cluster, ledger: Ledger) -> None:
    """A V1 transaction whose coordinator is SIGKILLed after the records were acknowledged and before the commit;
    the client commits against the coordinator that takes over, or aborts when told to."""
    bootstrap = cluster.bootstrap
    transactional_id = "v1-coordinator-killed"
    client = librdkafka_clients.Transactional(bootstrap, ledger, "v1-coordinator-killed", transactional_id)
    entry = client.begin("commit after the coordinator was killed", COMMITTED)
    librdkafka_clients.send(client.producer, entry, "v1", [0, 1], 20)
    partitions = int(BASE_PROPERTIES["transaction.state.log.num.partitions"])
    coordinator = cluster.broker(
        librdkafka_clients.leader(bootstrap, "__transaction_state", _java_abs_hash(transactional_id) % partitions)
    )
    coordinator.kill()
    try:
        client.producer.commit_transaction(librdkafka_clients.SECONDS)
    except librdkafka_clients.KafkaException as failure:
        client.producer.abort_transaction(librdkafka_clients.SECONDS)
        entry.outcome, entry.how = ABORTED, f"aborted after the coordinator was killed ({failure})"
    coordinator.start()
    ledger.notes["coordinator_killed"] = {"transactional_id": transactional_id, "node_id": coordinator.node_id}


def compacted(cluster: Cluster, ledger: Ledger, live_copy: Path) -> Path:
    """Commits and aborts of keyed records on the compacted topic until every broker's cleaner has cleaned both
    partitions; then more of them, so that a later pass finds the aborted data gone and removes its markers.
    While the first of them are written, broker 2's log dir is copied file by file, as `rsync -a` would: returns
    where."""
    client = librdkafka_clients.Transactional(cluster.bootstrap, ledger, "compacted", "compacted-txn")
    copying = threading.Thread(target=_copy_live, args=(cluster.broker(2).log_dir, live_copy, ledger))
    for phase in range(2):
        before = {broker.node_id: _cleaner_checkpoint(broker.log_dir) for broker in cluster.brokers}
        for index in range(6):
            if phase == 0 and index == 2:
                copying.start()
            commit = index % 2 == 0
            entry = client.begin("commit" if commit else "abort", COMMITTED if commit else ABORTED)
            librdkafka_clients.send(client.producer, entry, COMPACTED, [0, 1], 40, keys=8)
            (client.producer.commit_transaction if commit else client.producer.abort_transaction)(
                librdkafka_clients.SECONDS
            )
            time.sleep(0.35)  # segment.ms rolls a segment for each transaction
        copying.join()
        _wait_until_cleaned(cluster, before)
    ledger.notes["compacted"] = {"topic": COMPACTED, "cleaned_by_every_broker": True}
    return live_copy


def _copy_live(log_dir: Path, copy: Path, ledger: Ledger) -> None:
    try:
        shutil.copytree(log_dir, copy, copy_function=shutil.copy2)
    except shutil.Error as vanished:  # renamed or deleted while copied: rsync reports them and goes on
        ledger.notes["live_copy_vanished"] = [str(error[0]) for error in vanished.args[0]]
    ledger.notes["live_copy"] = {"node_id": 2}


def _wait_until_cleaned(cluster: Cluster, before: dict[int, dict[str, int]]) -> None:
    """Until the cleaner-offset-checkpoint of every broker has moved past `before` (node id -> its checkpoint) for
    both partitions."""
    deadline = time.monotonic() + CLEANED_SECONDS
    while time.monotonic() < deadline:
        if all(
            _cleaner_checkpoint(broker.log_dir).get(partition, -1) > before[broker.node_id].get(partition, -1)
            for broker in cluster.brokers
            for partition in (f"{COMPACTED} 0", f"{COMPACTED} 1")
        ):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the cleaners did not clean {COMPACTED} within {CLEANED_SECONDS} s")


def _cleaner_checkpoint(log_dir: Path) -> dict[str, int]:
    path = log_dir / "cleaner-offset-checkpoint"
    if not path.exists():
        return {}
    lines = path.read_text().split("\n")[2:]
    return {" ".join(line.split()[:2]): int(line.split()[2]) for line in lines if len(line.split()) == 3}


def _java_abs_hash(text: str) -> int:
    """Kafka's Utils.abs(String.hashCode()): which `__transaction_state` partition coordinates an id."""
    value = 0
    for char in text:
        value = (31 * value + ord(char)) & 0xFFFFFFFF
    signed = value - (1 << 32) if value >= 1 << 31 else value
    return 0 if signed == -(1 << 31) else abs(signed)
