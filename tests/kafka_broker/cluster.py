"""Three Kafka brokers on loopback as operators run them: each a combined broker and controller of one KRaft
quorum, replication factor 3 and `min.insync.replicas=2` for every topic, the internal ones included."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.kafka_broker.broker import Broker, _base64_uuid

REPLICATED = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    # a follower out of sync for longer leaves the ISR; short, so that a killed broker's partitions move on quickly
    "replica.lag.time.max.ms": "5000",
    "log.cleaner.backoff.ms": "500",
    # Kafka's default, not the one-node fixture's 0: segments the cleaner replaced wait as .deleted files, and a
    # clean stop leaves them, as on the clusters operators copy
    "log.segment.delete.delay.ms": "60000",
    # The cluster stops whole, three nodes that are also its controllers. A controlled shutdown waits for the quorum
    # to commit that the broker may go; the node whose turn comes after two others left waits for ever (seen in a
    # suite run: "No controller appears to be active", the broker still there after 90 s). Without it each broker
    # still closes every log cleanly (flush, snapshots, the clean-shutdown marker); leadership does not move first.
    "controlled.shutdown.enable": "false",
}


@dataclass
class Cluster:
    brokers: list[Broker]

    @property
    def bootstrap(self) -> str:
        return ",".join(broker.bootstrap for broker in self.brokers)

    def broker(self, node_id: int) -> Broker:
        return next(broker for broker in self.brokers if broker.node_id == node_id)

    def start(self) -> None:
        offsets = [broker.launch() for broker in self.brokers]
        for broker, offset in zip(self.brokers, offsets, strict=True):
            broker.wait_started(offset)

    def stop(self) -> None:
        """Every broker stopped cleanly, side by side."""
        with ThreadPoolExecutor(len(self.brokers)) as pool:
            for done in [pool.submit(broker.stop) for broker in self.brokers]:
                done.result()


def three_brokers(home: Path, features: dict[str, int]) -> Cluster:
    """Three nodes of one new cluster, formatted, not started."""
    cluster_id = _base64_uuid()
    brokers = [
        Broker(home / f"broker-{node}", features, node_id=node, cluster_id=cluster_id, settings=REPLICATED)
        for node in (1, 2, 3)
    ]
    voters = ",".join(broker.voter for broker in brokers)
    for broker in brokers:
        broker.voters = voters
        broker.format()
    return Cluster(brokers)


@contextmanager
def running(cluster: Cluster) -> Iterator[Cluster]:
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
