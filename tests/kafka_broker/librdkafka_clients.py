"""Workloads of confluent-kafka (librdkafka) producers: idempotent ones, and transactional ones on V1.

librdkafka implements no KIP-890 part 2, so on a broker that offers transaction.version 2 its transactional
producers still use the V1 protocol (AddPartitionsToTxn, one epoch for many transactions): these workloads are
the V1 half of the fixture, the Java client (java_clients.py) the V2 half.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import confluent_kafka
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.kafka_broker.ledger import ABORTED, COMMITTED, Entry, Ledger

CLIENT = f"confluent-kafka {confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]})"
SECONDS = 30


def create_topics(bootstrap: str, topics: dict[str, tuple[int, dict[str, str]]], replication: int = 1) -> None:
    """name -> (partitions, topic configs)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(name, partitions, replication, config=config) for name, (partitions, config) in topics.items()]
    for future in admin.create_topics(new).values():
        future.result(SECONDS)


def delete_records(bootstrap: str, topic: str, partition: int, before: int) -> int:
    """DeleteRecords up to `before`; returns the log start offset the broker reports."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, partition, before)])
    return next(iter(futures.values())).result(SECONDS).low_watermark


def producer(bootstrap: str, **config) -> Producer:
    settings = {"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True}
    return Producer({**settings, **config})


def send(
    producer: Producer, entry: Entry, topic: str, partitions: Sequence[int], count: int, keys: int | None = None
) -> None:
    """Produce `count` records round-robin over `partitions` and wait until each is acknowledged; with `keys`, the
    records carry that many keys in turn (for a compacted topic)."""
    failures = []

    def delivered(error, message):
        if error is None:
            entry.acked(message.topic(), message.partition(), message.offset())
        else:
            failures.append(error)

    for i in range(count):
        value = f"{entry.workload}:{entry.transactional_id}:{i}".encode() * 4
        key = None if keys is None else f"key-{i % keys}".encode()
        producer.produce(topic, key=key, value=value, partition=partitions[i % len(partitions)], on_delivery=delivered)
        producer.poll(0)
    if producer.flush(SECONDS) or failures:
        raise RuntimeError(f"{entry.workload}: records not acknowledged: {failures[:3]}")


class Transactional:
    """One transactional producer instance and the ledger entries of the transactions it ends."""

    def __init__(self, bootstrap: str, ledger: Ledger, workload: str, transactional_id: str, **config):
        self.ledger, self.workload, self.transactional_id = ledger, workload, transactional_id
        self.producer = producer(bootstrap, **{"transactional.id": transactional_id, **config})
        self.producer.init_transactions(SECONDS)

    def begin(self, how: str, outcome: str) -> Entry:
        self.producer.begin_transaction()
        return self.ledger.entry(self.workload, CLIENT, self.transactional_id, outcome, how)

    def run(self, topic: str, partitions: Sequence[int], count: int, commit: bool) -> Entry:
        """One whole transaction: its records acknowledged, then committed or aborted."""
        entry = self.begin("commit" if commit else "abort", COMMITTED if commit else ABORTED)
        send(self.producer, entry, topic, partitions, count)
        (self.producer.commit_transaction if commit else self.producer.abort_transaction)(SECONDS)
        return entry


def idempotent(bootstrap: str, ledger: Ledger, topic: str, producers: int = 2, count: int = 3000) -> None:
    """Idempotent producers, five requests in flight, small batches, so many batches are pipelined."""
    for _ in range(producers):
        entry = ledger.entry("idempotent", CLIENT, None, None, "acknowledged")
        client = producer(bootstrap, **{"max.in.flight.requests.per.connection": 5, "batch.size": 4096, "retries": 100})
        send(client, entry, topic, [0, 1, 2], count)


def transactions(
    bootstrap: str,
    ledger: Ledger,
    workload: str,
    topic: str,
    partitions: Sequence[int],
    rounds: int,
    pause: float,
    marker_alone: int | None = None,
) -> None:
    """Commits and aborts in turn, `pause` apart so that segment.ms rolls a segment for each.

    Transaction number `marker_alone` waits `pause` before its end too, so its marker opens a segment of its own.
    """
    client = Transactional(bootstrap, ledger, workload, f"{workload}-txn")
    for index in range(rounds):
        commit = index % 2 == 0
        entry = client.begin("commit" if commit else "abort", COMMITTED if commit else ABORTED)
        send(client.producer, entry, topic, partitions, 30)
        if index == marker_alone:
            time.sleep(pause)
        (client.producer.commit_transaction if commit else client.producer.abort_transaction)(SECONDS)
        time.sleep(pause)


def zombie(bootstrap: str, ledger: Ledger, topic: str) -> None:
    """A second instance of the same transactional id fences the first, whose open transaction is aborted."""
    first = Transactional(bootstrap, ledger, "v1-zombie", "v1-zombie")
    entry = first.begin("fenced", ABORTED)
    send(first.producer, entry, topic, [0, 1], 10)
    second = Transactional(bootstrap, ledger, "v1-zombie", "v1-zombie")
    _expect_failure(lambda: first.producer.commit_transaction(SECONDS), "the fenced instance committed")
    second.run(topic, [0, 1], 10, commit=True)


def timeout(bootstrap: str, ledger: Ledger, topic: str, timeout_ms: int = 2000) -> None:
    """A transaction left open past transaction.timeout.ms: the coordinator aborts it and bumps the epoch."""
    client = Transactional(bootstrap, ledger, "v1-timeout", "v1-timeout", **{"transaction.timeout.ms": timeout_ms})
    entry = client.begin("timeout", ABORTED)
    send(client.producer, entry, topic, [1, 2], 10)
    time.sleep(timeout_ms / 1000 + 3)  # the abort check runs every second (broker setting)
    _expect_failure(lambda: client.producer.commit_transaction(SECONDS), "the timed-out transaction committed")
    ledger.notes["v1-timeout"] = "commit after the timeout failed as expected"


def offsets(bootstrap: str, ledger: Ledger, source: str, topic: str) -> None:
    """Consume-transform-produce: consumed offsets committed inside the transaction (send_offsets_to_transaction)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "v1-eos-group", "enable.auto.commit": False,
         "isolation.level": "read_committed", "auto.offset.reset": "earliest"}
    )  # fmt: skip
    consumer.assign([TopicPartition(source, 0, 0)])
    client = Transactional(bootstrap, ledger, "v1-offsets", "v1-eos")
    for commit in (True, False, True):
        consumed = consumer.consume(20, SECONDS)
        entry = client.begin("commit" if commit else "abort", COMMITTED if commit else ABORTED)
        send(client.producer, entry, topic, [2], len(consumed))
        positions = consumer.position([TopicPartition(source, 0)])
        client.producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), SECONDS)
        (client.producer.commit_transaction if commit else client.producer.abort_transaction)(SECONDS)
        if not commit:
            consumer.seek(TopicPartition(source, 0, positions[0].offset - len(consumed)))
    consumer.close()


def leader(bootstrap: str, topic: str, partition: int) -> int:
    """The node id that leads the partition now."""
    metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=SECONDS)
    return metadata.topics[topic].partitions[partition].leader


def _expect_failure(call: Callable[[], None], what: str) -> None:
    try:
        call()
    except KafkaException:
        return
    raise AssertionError(what)
