"""The run: a cluster, its producers and a clock, stepped once per client batch.

Each step advances a millisecond clock by 1-3 ms, fires the coordinator's due timers (transaction
timeouts, clients waking from a hang), lets the anomaly injector act when one is due, and has one active
producer, drawn at random, send one batch; so producers interleave on every partition. Leader elections bump
partition leader epochs at steps drawn up front. At the end every partition is flushed and closed as on a
clean shutdown and the log-dir files are written.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from pipeline.generate import layout
from pipeline.generate.anomalies.catalog import catalog
from pipeline.generate.anomalies.injector import AnomalyInjector
from pipeline.generate.anomalies.replicas import ReplicaFaults
from pipeline.generate.cluster import TOPICS, TRANSACTIONAL_TOPICS, build_cluster
from pipeline.generate.coordinator import Coordinator
from pipeline.generate.options import GenerateOptions
from pipeline.generate.partition_log import DataPartition, TransactionStatePartition
from pipeline.generate.producers import (
    ABORT_CHECK_INTERVAL_MS,
    IdempotentProducer,
    LegacyProducer,
    Producer,
    TransactionalProducer,
)
from pipeline.generate.rand import STREAM_COMPACTION, STREAM_SIMULATION, Rng
from pipeline.generate.replicas import Copy, replicate
from schemas.checkpoints import CLEANER_OFFSET, LOG_START_OFFSET, RECOVERY_POINT, REPLICATION_OFFSET

START_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: a fixed clock, so runs are identical
TRANSACTIONAL_SHARE = 0.3
LEGACY_SHARE = 0.05
WRAPPING_EVERY = 40  # every 40th idempotent producer starts its sequences just below the int32 limit
TRANSACTION_TIMEOUTS_MS = (30_000, 60_000, 60_000, 120_000)
APPLICATIONS = ("checkout", "billing", "fulfilment", "ledger")


class Simulation:
    def __init__(self, options: GenerateOptions) -> None:
        self.options = options
        root = options.out
        self.rng = Rng(options.seed, STREAM_SIMULATION)
        self.cluster = build_cluster(options.seed, options.partitions, options.brokers, options.replication_factor)
        compaction_rng = Rng(options.seed, STREAM_COMPACTION)
        topic_ids = self.cluster.topic_ids
        self.partitions = [
            DataPartition(
                index,
                placement,
                root,
                topic_ids[placement.topic],
                options.segment_bytes,
                self.cluster.is_compacted(placement.topic),
                compaction_rng,
            )
            for index, placement in enumerate(self.cluster.data_partitions)
        ]
        self.state_partitions = [
            TransactionStatePartition(placement, root, topic_ids[placement.topic], options.segment_bytes)
            for placement in self.cluster.transaction_state_partitions
        ]
        self.coordinator = Coordinator(self.state_partitions)
        self.clock = START_MS
        self.step = 0
        self.stats: Counter[str] = Counter()
        self._events: list[tuple[int, int, Callable, tuple]] = []
        self._event_count = 0
        self._next_pid = 1000 * self.rng.between(1, 40)
        self.producers = self._producers()
        self.hot = self._hot_producer() if options.hot_producer else None
        self.active: list[Producer] = list(self.producers)
        self.retired: set[Producer] = set()
        self._leader_changes = sorted(
            (self.rng.below(options.batches), partition.index)
            for partition in self.partitions
            for _ in range(self.rng.below(3))
        )
        self.anomalies = AnomalyInjector(self, catalog())

    def new_pid(self) -> int:
        self._next_pid += 1
        return self._next_pid

    def _producers(self) -> list[Producer]:
        rng, count = self.rng, self.options.producers
        by_topic: dict[str, list[DataPartition]] = {}
        for partition in self.partitions:
            by_topic.setdefault(partition.topic, []).append(partition)
        topics = [topic for topic in TOPICS if topic in by_topic]
        transactional_targets = [p for topic in TRANSACTIONAL_TOPICS for p in by_topic.get(topic, [])]
        transactional = round(count * TRANSACTIONAL_SHARE) if transactional_targets else 0
        legacy = int(count * LEGACY_SHARE)
        producers: list[Producer] = []
        for index in range(transactional):
            transactional_id = f"{APPLICATIONS[index % len(APPLICATIONS)]}-processor-{index}"
            timeout = rng.choice(TRANSACTION_TIMEOUTS_MS)
            producers.append(
                TransactionalProducer(
                    transactional_id, self.new_pid(), rng.between(0, 5), timeout, transactional_targets
                )
            )
        for index in range(legacy):
            producers.append(LegacyProducer(-1, -1, by_topic[topics[index % len(topics)]]))
        for index in range(count - transactional - legacy):
            targets = by_topic[topics[index % len(topics)]]
            producers.append(IdempotentProducer(self.new_pid(), 0, targets, wraps=index % WRAPPING_EVERY == 1))
        return rng.sample(producers, len(producers))

    def _hot_producer(self) -> IdempotentProducer:
        """A producer of one partition, outside the drawn ones (no anomaly is injected into it): drawn instead of
        them at 1 step in P+1, it writes as many of its partition's batches as the others together."""
        plain = next(partition for partition in self.partitions if not partition.compacted)
        return IdempotentProducer(self.new_pid(), 0, [plain], wraps=False)

    # --- timers -------------------------------------------------------------------------------------------

    def schedule(self, time: int, callback: Callable, *args) -> None:
        self._event_count += 1
        heapq.heappush(self._events, (time, self._event_count, callback, args))

    def _run_events(self, until: int) -> None:
        while self._events and self._events[0][0] <= until:
            time, _, callback, args = heapq.heappop(self._events)
            self.clock = max(self.clock, time)
            callback(self, *args)

    def stall(self, producer: TransactionalProducer) -> None:
        """The client hangs past its transaction timeout; the coordinator aborts, then the client wakes up."""
        self.active.remove(producer)
        wake = self.clock + producer.timeout_ms + ABORT_CHECK_INTERVAL_MS + self.rng.between(5_000, 30_000)
        self.schedule(wake, Simulation._wake, producer)

    def _wake(self, producer: Producer) -> None:
        if producer not in self.retired:
            self.active.append(producer)

    def retire(self, producer: Producer) -> None:
        self.retired.add(producer)
        if producer in self.active:
            self.active.remove(producer)

    def lull(self, minutes: int) -> None:
        """Producers finish their transactions and go quiet; only the coordinator's timers run meanwhile."""
        for producer in self.active:
            if isinstance(producer, TransactionalProducer) and producer.txn is not None:
                producer.end(self, commit=True)
        until = self.clock + minutes * 60_000
        self._run_events(until)
        self.clock = until

    # --- the run ------------------------------------------------------------------------------------------

    def run(self) -> None:
        rng, anomalies, changes = self.rng, self.anomalies, self._leader_changes
        for step in range(self.options.batches):
            self.step = step
            self.clock += 1 + rng.below(3)
            if self._events and self._events[0][0] <= self.clock:
                self._run_events(self.clock)
            if step >= anomalies.next_step:
                anomalies.at_step()
            while changes and changes[0][0] <= step:
                self.partitions[changes.pop(0)[1]].bump_leader_epoch()
            hot, active = self.hot, self.active
            if hot is not None and rng.below(len(self.partitions) + 1) == 0:
                hot.send(self)
            else:
                active[rng.below(len(active))].send(self)
        self.finish()

    def finish(self) -> None:
        self.anomalies.at_finish()
        for partition in [*self.partitions, *self.state_partitions]:
            partition.finish()
        self.copies = self._replicate() if self.options.replication_factor > 1 else []
        self._write_log_dirs()
        self.anomalies.write_ground_truth(self.options.out)
        self.stats["markers"] = sum(partition.markers for partition in self.partitions)
        self.stats["coordinator_records"] = sum(partition.next_offset for partition in self.state_partitions)
        self.stats["bytes"] = sum(path.stat().st_size for path in self.options.out.rglob("*") if path.is_file())

    def _replicate(self) -> list[Copy]:
        """The follower copies of every partition, data and `__transaction_state`, some departing (replica faults)."""
        departures = ReplicaFaults(self.anomalies).inject()
        return replicate([*self.partitions, *self.state_partitions], self.options.out, departures)

    def _write_log_dirs(self) -> None:
        """Each broker's log-dir files; a follower copy is listed as its log dir holds it (its end as recovery
        point and log end, its high watermark as replication offset), beside the partitions it leads."""
        cluster = self.cluster
        for broker_id in range(cluster.brokers):
            log_dir = self.options.out / f"broker-{broker_id}"
            log_dir.mkdir(parents=True, exist_ok=True)
            (log_dir / "meta.properties").write_text(
                layout.meta_properties(broker_id, cluster.cluster_id, cluster.directory_ids[broker_id])
            )
            hosted = [p for p in [*self.partitions, *self.state_partitions] if p.broker_id == broker_id]
            ends = [(p.topic, p.partition, p.next_offset) for p in hosted]
            copies = [copy for copy in self.copies if copy.broker_id == broker_id]
            copied = [copy.partition for copy in copies]
            checkpoints = {
                RECOVERY_POINT: ends + [(c.topic, c.number, c.end) for c in copies],
                REPLICATION_OFFSET: ends + [(c.topic, c.number, c.high_watermark) for c in copies],
                LOG_START_OFFSET: [(p.topic, p.partition, p.log_start_offset) for p in [*hosted, *copied]],
                CLEANER_OFFSET: [
                    (p.topic, p.partition, p.cleaned_until) for p in [*hosted, *copied] if p.cleaned_until > 0
                ],
            }
            for name, entries in checkpoints.items():
                (log_dir / name).write_text(layout.offset_checkpoint(entries))


def write_log_root(options: GenerateOptions) -> Simulation:
    """Generate the log root `options.out`; returns the finished simulation (for its statistics)."""
    Path(options.out).mkdir(parents=True, exist_ok=True)
    simulation = Simulation(options)
    simulation.run()
    return simulation
