"""The clients: idempotent, transactional and legacy (non-idempotent) producers.

Each `send` produces one batch the way a Kafka 3.x client and broker would leave it on disk. Sequence
numbers are kept per (partition, producer id, epoch) and wrap after 2147483647; a new epoch starts every
partition at 0. Retries of in-flight batches (at most 5 per partition) are answered by the broker from its
duplicate window, so they leave nothing on disk; they are only counted.

Transactional producers follow the coordinator's state machine (TV1): InitProducerId writes Empty, the first
batch to a partition adds it (Ongoing with the partitions so far), EndTxn writes Prepare*, the markers with the
coordinator epoch go to every added partition, then Complete*. A transaction that outlives its timeout is
aborted by the coordinator with an epoch bump (markers at epoch + 1), and so is the open transaction of an
instance fenced by a new one with the same transactional id; the client then gets epoch + 2 from
InitProducerId.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from pipeline.generate.coordinator import NO_START, Record
from pipeline.generate.partition_log import MAX_SEQUENCE, DataPartition
from schemas.transaction_log import COMPLETE_ABORT, COMPLETE_COMMIT, EMPTY, ONGOING, PREPARE_ABORT, PREPARE_COMMIT

if TYPE_CHECKING:
    from collections import Counter
    from collections.abc import Callable

    from pipeline.generate.coordinator import Coordinator
    from pipeline.generate.rand import Rng

RECORDS_PER_BATCH = (1,) * 30 + (2,) * 20 + (3,) * 15 + (4,) * 10 + (5,) * 8 + (6,) * 7 + (7,) * 5 + (8,) * 5
RETRY_PROBABILITY = 0.001
EPOCH_BUMP_PROBABILITY = 0.0002  # idempotent producer: OUT_OF_ORDER_SEQUENCE_NUMBER, bumpIdempotentProducerEpoch
RESTART_PROBABILITY = 0.0001  # idempotent producer restarts with a new producer id
COMMIT_PROBABILITY = 0.9
IDLE_RESTART_PROBABILITY = 0.003  # per transaction: a new instance while no transaction is open
FENCE_PROBABILITY = 0.002  # per transaction: a new instance while this one's transaction is open
STALL_PROBABILITY = 0.002  # per transaction: the client hangs past transaction.timeout.ms
ABORT_CHECK_INTERVAL_MS = 10_000  # transaction.abort.timed.out.transaction.cleanup.interval.ms


class ProducerSimulation(Protocol):
    """What a producer uses of the simulation it sends in: its clock, draws, coordinator, timers and counters. A
    protocol, so that this module does not import the simulation, which makes the producers."""

    rng: Rng
    clock: int
    stats: Counter[str]
    coordinator: Coordinator

    def new_pid(self) -> int: ...

    def schedule(self, time: int, callback: Callable, *args) -> None: ...

    def stall(self, producer: TransactionalProducer) -> None: ...

    def retire(self, producer: Producer) -> None: ...


class Producer:
    """What every client has: a producer id (or -1), an epoch and the partitions it writes to."""

    def __init__(self, pid: int, epoch: int, targets: list[DataPartition]) -> None:
        self.pid = pid
        self.epoch = epoch
        self.targets = targets
        self.sequences: dict[int, int] = {}  # partition index -> next sequence

    def send(self, sim: ProducerSimulation) -> None:
        raise NotImplementedError


class LegacyProducer(Producer):
    """`enable.idempotence=false`: no producer id, epoch or sequence."""

    def send(self, sim: ProducerSimulation) -> None:
        rng = sim.rng
        target = self.targets[rng.below(len(self.targets))]
        target.data(-1, -1, -1, RECORDS_PER_BATCH[rng.below(len(RECORDS_PER_BATCH))], False, sim.clock)


class IdempotentProducer(Producer):
    """An idempotent producer; `wraps` ones start their sequences just below 2147483647 (history deleted)."""

    def __init__(self, pid: int, epoch: int, targets: list[DataPartition], wraps: bool) -> None:
        super().__init__(pid, epoch, targets)
        self.wraps = wraps

    def first_sequence(self, sim: ProducerSimulation) -> int:
        return MAX_SEQUENCE - sim.rng.below(400) if self.wraps else 0

    def bump_epoch(self) -> None:
        self.epoch += 1
        self.sequences = {}
        self.wraps = False

    def send(self, sim: ProducerSimulation) -> None:
        rng = sim.rng
        draw = rng.random()
        if draw < EPOCH_BUMP_PROBABILITY:
            self.bump_epoch()
        elif draw < EPOCH_BUMP_PROBABILITY + RESTART_PROBABILITY:
            self.pid, self.epoch, self.sequences, self.wraps = sim.new_pid(), 0, {}, False
        target = self.targets[rng.below(len(self.targets))]
        records = RECORDS_PER_BATCH[rng.below(len(RECORDS_PER_BATCH))]
        sequence = self.sequences.get(target.index)
        if sequence is None:
            sequence = self.first_sequence(sim)
        target.data(self.pid, self.epoch, sequence, records, False, sim.clock)
        self.sequences[target.index] = (sequence + records) & MAX_SEQUENCE
        if rng.random() < RETRY_PROBABILITY:
            sim.stats["retries_absorbed"] += 1


@dataclass
class Transaction:
    targets: list[DataPartition]
    planned: int
    added: list[DataPartition] = field(default_factory=list)
    sent: int = 0
    start_ms: int = NO_START
    fence_at: int = 0  # batch count at which a new instance fences this one (0: never)
    stall_at: int = 0  # batch count after which the client hangs past its timeout (0: never)
    claimed: bool = False  # an anomaly works on this transaction
    prepare_record: Record | None = None


class TransactionalProducer(Producer):
    def __init__(
        self, transactional_id: str, pid: int, epoch: int, timeout_ms: int, targets: list[DataPartition]
    ) -> None:
        super().__init__(pid, epoch, targets)
        self.transactional_id = transactional_id
        self.timeout_ms = timeout_ms
        self.txn: Transaction | None = None
        self.initialized = False
        self.fenced = False  # the coordinator bumped the epoch; the next send re-initialises
        self.forbidden: set[int] = set()  # partitions anomalies keep this producer away from
        self.next_targets: list[DataPartition] | None = None  # the partitions of the next transaction, if decided
        self.last_record_ms = -1
        self.last_record: Record | None = None

    # --- coordinator transitions ------------------------------------------------------------------------

    def record(self, sim: ProducerSimulation, state: int, partitions, start_ms: int, **kw) -> Record:
        self.last_record_ms = kw.get("last_update_ms", sim.clock)
        self.last_record = sim.coordinator.write(
            self.transactional_id,
            self.pid,
            self.epoch,
            self.timeout_ms,
            state,
            partitions,
            sim.clock,
            start_ms,
            **kw,
        )
        return self.last_record

    def init_producer_id(self, sim: ProducerSimulation, bump: int = 1) -> Record:
        """InitProducerId: Empty at the next epoch (the first call keeps the epoch it was given)."""
        if self.initialized:
            self.epoch += bump
        self.initialized = True
        self.fenced = False
        self.sequences = {}
        return self.record(sim, EMPTY, None, NO_START)

    @property
    def idle(self) -> bool:
        """Initialised, not fenced, no transaction open: the next send starts one."""
        return self.initialized and not self.fenced and self.txn is None

    # --- sending ------------------------------------------------------------------------------------------

    def begin(self, sim: ProducerSimulation, targets: list[DataPartition] | None = None) -> Transaction | None:
        """A new transaction over `targets`, by default up to four partitions drawn from the allowed ones."""
        rng = sim.rng
        if targets is None:
            targets, self.next_targets = self.next_targets, None
        if targets is None:
            allowed = [target for target in self.targets if target.index not in self.forbidden]
            targets = rng.sample(allowed, rng.between(1, min(4, len(allowed)))) if allowed else []
        if not targets:
            return None
        txn = Transaction(targets, rng.between(len(targets), 12))
        draw = rng.random()
        if draw < FENCE_PROBABILITY:
            txn.fence_at = rng.between(1, txn.planned)
        elif draw < FENCE_PROBABILITY + STALL_PROBABILITY:
            txn.stall_at = rng.between(1, txn.planned)
        self.txn = txn
        return txn

    def send(self, sim: ProducerSimulation) -> None:
        if not self.initialized or self.fenced:
            self.init_producer_id(sim)
        txn = self.txn
        if txn is None:
            if sim.rng.chance(IDLE_RESTART_PROBABILITY):
                self.init_producer_id(sim)
            txn = self.begin(sim)
            if txn is None:  # anomalies left it no partition to write to
                sim.retire(self)
                return
        rng = sim.rng
        # the first batches go to each target in turn, so every partition of the transaction gets data
        target = txn.targets[txn.sent] if txn.sent < len(txn.targets) else rng.choice(txn.targets)
        self.write(sim, txn, target, RECORDS_PER_BATCH[rng.below(len(RECORDS_PER_BATCH))])
        txn.sent += 1
        if txn.sent == txn.fence_at:
            sim.stats["fences"] += 1
            self.coordinator_abort(sim)
            self.init_producer_id(sim)
        elif txn.sent == txn.stall_at:
            sim.stall(self)
        elif txn.sent >= txn.planned:
            self.end(sim, commit=rng.chance(COMMIT_PROBABILITY))

    def add_partition(self, sim: ProducerSimulation, txn: Transaction, target: DataPartition) -> None:
        """AddPartitionsToTxn: Ongoing with the partitions so far (the first add starts the timeout clock)."""
        if txn.start_ms == NO_START:
            txn.start_ms = sim.clock
            sim.schedule(txn.start_ms + self.timeout_ms + sim.rng.below(ABORT_CHECK_INTERVAL_MS), self.timed_out, txn)
        txn.added.append(target)
        self.record(sim, ONGOING, names(txn.added), txn.start_ms)

    def write(
        self,
        sim: ProducerSimulation,
        txn: Transaction,
        target: DataPartition,
        records: int,
        timestamp: int | None = None,
    ) -> int:
        if target not in txn.added:
            self.add_partition(sim, txn, target)
        sequence = self.sequences.get(target.index, 0)
        offset = target.data(
            self.pid, self.epoch, sequence, records, True, sim.clock if timestamp is None else timestamp
        )
        self.sequences[target.index] = (sequence + records) & MAX_SEQUENCE
        return offset

    def end(
        self,
        sim: ProducerSimulation,
        commit: bool,
        markers: dict[int, dict] | None = None,
        prepare_extra: list[tuple[str, int]] = (),
        prepare_timeout_ms: int | None = None,
        complete_lists_partitions: bool = False,
    ) -> dict[int, int]:
        """EndTxn: Prepare*, a marker on every added partition, Complete*; returns the marker offsets.

        The optional arguments are for anomalies: per partition index, marker fields that differ from the
        decision (`commit`, `coordinator_epoch`, `mutation`); partitions the Prepare record lists too; a
        timeout the Prepare record changes to; a Complete record that keeps the partitions.
        """
        txn = self.txn
        if prepare_timeout_ms is not None:
            self.timeout_ms = prepare_timeout_ms
        txn.prepare_record = self.record(
            sim, PREPARE_COMMIT if commit else PREPARE_ABORT, names(txn.added) + list(prepare_extra), txn.start_ms
        )
        offsets = {}
        for target in txn.added:
            marker = (markers or {}).get(target.index, {})
            offsets[target.index] = target.marker(
                self.pid,
                self.epoch,
                marker.get("commit", commit),
                marker.get("coordinator_epoch", self.coordinator_epoch(sim)),
                sim.clock,
                marker.get("mutation", 0),
            )
        completed = names(txn.added) if complete_lists_partitions else []
        self.record(sim, COMPLETE_COMMIT if commit else COMPLETE_ABORT, completed, txn.start_ms)
        self.txn = None
        return offsets

    def coordinator_abort(
        self, sim: ProducerSimulation, lost: DataPartition | None = None, jump: DataPartition | None = None
    ) -> dict[int, int]:
        """Timeout or fence: PrepareAbort at epoch + 1, ABORT markers at that epoch, CompleteAbort.

        `lost`: a partition whose marker never arrives; `jump`: a partition whose marker carries epoch + 2.
        Returns the marker offsets.
        """
        txn = self.txn
        self.epoch += 1
        self.record(sim, PREPARE_ABORT, names(txn.added), txn.start_ms)
        offsets = {}
        for target in txn.added:
            if target is not lost:
                epoch = self.epoch + 1 if target is jump else self.epoch
                offsets[target.index] = target.marker(self.pid, epoch, False, self.coordinator_epoch(sim), sim.clock)
        self.record(sim, COMPLETE_ABORT, [], txn.start_ms)
        self.txn = None
        self.fenced = True
        return offsets

    def coordinator_epoch(self, sim: ProducerSimulation) -> int:
        return sim.coordinator.partition_of(self.transactional_id).coordinator_epoch

    def timed_out(self, sim: ProducerSimulation, txn: Transaction) -> None:
        """The coordinator's periodic check found the transaction past its timeout."""
        if self.txn is txn:
            sim.stats["timeout_aborts"] += 1
            self.coordinator_abort(sim)


def names(partitions: list[DataPartition]) -> list[tuple[str, int]]:
    return [(partition.topic, partition.partition) for partition in partitions]
