"""TSL and XTX anomalies: `__transaction_state` records against the state machine and against the markers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.generate.anomalies.registry import Kind, anomaly
from pipeline.generate.anomalies.targets import (
    draw_records,
    end_with_marker,
    idle_producers,
    open_pair,
    outside_transaction,
    state_record_truth,
)
from pipeline.generate.coordinator import NO_START
from pipeline.generate.partition_log import MAX_SEQUENCE
from pipeline.generate.producers import names
from pipeline.sources.kafka_format.layout import COMPRESSION_GZIP
from schemas.transaction_log import COMPLETE_COMMIT, DEAD, EMPTY, ONGOING

if TYPE_CHECKING:
    from pipeline.generate.anomalies.injector import AnomalyInjector

TRANSACTION_MAX_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms default, as the audit assumes
TOO_LARGE_TIMEOUT_MS = 1_200_000

# --- TSL -------------------------------------------------------------------------------------------------


@anomaly("unknown-key-version", "TSL-001", "WARN")
def unknown_key_version(inj: AnomalyInjector, kind: Kind) -> bool:
    return _extra_empty_record(inj, kind, "a record keyed with key version 1", key_version=1)


@anomaly("compressed-coordinator-batch", "TSL-015", "WARN")
def compressed_coordinator_batch(inj: AnomalyInjector, kind: Kind) -> bool:
    return _extra_empty_record(inj, kind, "an Empty record (same epoch) in a gzip batch", compression=COMPRESSION_GZIP)


def _extra_empty_record(inj: AnomalyInjector, kind: Kind, detail: str, **shape) -> bool:
    """Another Empty record of an idle producer at its epoch (a legal repeat), shaped by `shape`."""
    idle = idle_producers(inj)
    if not idle:
        return False
    producer = inj.rng.choice(idle)
    state_record_truth(inj, kind, producer, producer.record(inj.sim, EMPTY, None, NO_START, **shape), detail)
    return True


@anomaly("empty-with-partitions", "TSL-004", "ERROR")
def empty_with_partitions(inj: AnomalyInjector, kind: Kind) -> bool:
    idle = idle_producers(inj)
    if not idle:
        return False
    producer = inj.rng.choice(idle)
    producer.epoch += 1  # an InitProducerId whose Empty record keeps partitions
    producer.sequences = {}
    record = producer.record(inj.sim, EMPTY, names(producer.targets[:2]), NO_START)
    state_record_truth(inj, kind, producer, record, "Empty record with partitions")
    return True


@anomaly("complete-with-partitions", "TSL-005", "ERROR")
def complete_with_partitions(inj: AnomalyInjector, kind: Kind) -> bool:
    pair = open_pair(inj)
    if pair is None:
        return False
    producer, _ = pair
    producer.end(inj.sim, True, complete_lists_partitions=True)
    state_record_truth(inj, kind, producer, producer.last_record, "CompleteCommit still lists the partitions")
    return True


@anomaly("duplicate-complete", "TSL-006", "ERROR")
def duplicate_complete(inj: AnomalyInjector, kind: Kind) -> bool:
    pair = open_pair(inj)
    if pair is None:
        return False
    producer, _ = pair
    start = producer.txn.start_ms
    producer.end(inj.sim, True)
    record = producer.record(inj.sim, COMPLETE_COMMIT, [], start)
    state_record_truth(inj, kind, producer, record, "CompleteCommit written twice")
    return True


@anomaly("double-epoch-bump", "TSL-007", "ERROR", consequences=("EPO-006",))
def double_epoch_bump(inj: AnomalyInjector, kind: Kind) -> bool:
    idle = idle_producers(inj)
    if not idle:
        return False
    producer = inj.rng.choice(idle)
    record = producer.init_producer_id(inj.sim, bump=2)
    state_record_truth(inj, kind, producer, record, f"Empty at epoch {producer.epoch}, two above")
    return True


@anomaly("prepare-extra-partition", "TSL-008", "ERROR")
def prepare_extra_partition(inj: AnomalyInjector, kind: Kind) -> bool:
    pair = open_pair(inj)
    if pair is None:
        return False
    producer, _ = pair
    extra = [p for p in producer.targets if p not in producer.txn.added]
    if not extra:
        return False
    txn = producer.txn
    listed = inj.rng.choice(extra)
    producer.end(inj.sim, True, prepare_extra=names([listed]))
    inj.claim(listed, producer.pid)  # a later marker of this epoch there would meet this decision
    state_record_truth(inj, kind, producer, txn.prepare_record, "PrepareCommit lists a partition never added")
    return True


@anomaly("timeout-changed", "TSL-009", "ERROR")
def timeout_changed(inj: AnomalyInjector, kind: Kind) -> bool:
    pair = open_pair(inj)
    if pair is None:
        return False
    producer, _ = pair
    txn = producer.txn
    changed = producer.timeout_ms + 15_000 if producer.timeout_ms + 15_000 <= TRANSACTION_MAX_TIMEOUT_MS else 15_000
    producer.end(inj.sim, True, prepare_timeout_ms=changed)
    state_record_truth(inj, kind, producer, txn.prepare_record, f"PrepareCommit changes the timeout to {changed}")
    return True


@anomaly("timeout-too-large", "TSL-010", "WARN")
def timeout_too_large(inj: AnomalyInjector, kind: Kind) -> bool:
    # TSL-010 is reported once per id and timeout value, so each id gets this timeout once
    idle = [producer for producer in idle_producers(inj) if producer.timeout_ms != TOO_LARGE_TIMEOUT_MS]
    if not idle:
        return False
    producer = inj.rng.choice(idle)
    producer.timeout_ms = TOO_LARGE_TIMEOUT_MS
    record = producer.init_producer_id(inj.sim)
    state_record_truth(inj, kind, producer, record, f"transaction timeout {TOO_LARGE_TIMEOUT_MS} ms")
    return True


@anomaly("time-regression", "TSL-011", "WARN")
def time_regression(inj: AnomalyInjector, kind: Kind) -> bool:
    pair = open_pair(inj)
    if pair is None:
        return False
    producer, _ = pair
    txn = producer.txn
    txn.claimed = True
    earlier = producer.last_record_ms - 1
    record = producer.record(inj.sim, ONGOING, names(txn.added), txn.start_ms, last_update_ms=earlier)
    state_record_truth(inj, kind, producer, record, f"last update {earlier}, before the previous record's")
    return True


@anomaly("early-tombstone", "TSL-013", "WARN")
def early_tombstone(inj: AnomalyInjector, kind: Kind) -> bool:
    idle = idle_producers(inj, retiring=True)
    if not idle:
        return False
    producer = inj.rng.choice(idle)
    record = inj.sim.coordinator.tombstone(producer.transactional_id, inj.sim.clock)
    inj.sim.retire(producer)
    state_record_truth(inj, kind, producer, record, "tombstone minutes after the last update")
    return True


@anomaly("dead-state", "TSL-003", "ERROR")
def dead_state(inj: AnomalyInjector, kind: Kind) -> bool:
    idle = idle_producers(inj, retiring=True)
    if not idle:
        return False
    producer = inj.rng.choice(idle)
    record = producer.record(inj.sim, DEAD, None, NO_START)
    inj.sim.retire(producer)
    state_record_truth(inj, kind, producer, record, "Dead persisted")
    return True


@anomaly("shared-producer-id", "TSL-014", "CRITICAL", consequences=("TSL-014", "XTX-011"))
def shared_producer_id(inj: AnomalyInjector, kind: Kind) -> bool:
    idle = idle_producers(inj, retiring=True)
    if not idle:
        return False
    producer = inj.rng.choice(idle)
    clone = f"{producer.transactional_id}-clone"
    sim = inj.sim
    record = sim.coordinator.write(
        clone, producer.pid, producer.epoch, producer.timeout_ms, EMPTY, None, sim.clock, NO_START
    )
    sim.retire(producer)  # no transaction of its may be open at the end: the clone's Empty would confirm it hanging
    state_record_truth(inj, kind, producer, record, f"{clone} gets producer id {producer.pid} too")
    return True


# --- XTX -------------------------------------------------------------------------------------------------


@anomaly("marker-contradicts-decision", "XTX-001", "CRITICAL")
def marker_contradicts_decision(inj: AnomalyInjector, kind: Kind) -> bool:
    """An ABORT marker where the coordinator prepared a commit; under TV1 no other transaction of the epoch on
    that partition may abort (its decision would excuse the marker), so the producer keeps away from it."""

    def first_of_epoch(producer, partition) -> bool:
        return producer.epoch not in partition.producers[producer.pid].marker_epochs

    def abort(producer, partition) -> dict:
        producer.forbidden.add(partition.index)
        return {"commit": False}

    return end_with_marker(inj, kind, "ABORT marker after PrepareCommit", abort, first_of_epoch)


@anomaly("admin-abort", "XTX-003", "WARN", consequences=("TXN-003", "EPO-006"))
def admin_abort(inj: AnomalyInjector, kind: Kind) -> bool:
    """kafka-transactions.sh abort on a partition the coordinator never listed for the producer's epoch."""
    candidates = [
        (p, t) for p in inj.transactional(lambda p: p.initialized and not p.fenced) for t in outside_transaction(inj, p)
    ]
    if not candidates:
        return False
    producer, partition = inj.rng.choice(candidates)
    offset = partition.marker(producer.pid, producer.epoch, False, producer.coordinator_epoch(inj.sim), inj.sim.clock)
    producer.forbidden.add(partition.index)
    inj.claim(partition, producer.pid)
    inj.protect(partition, offset)
    inj.truth(kind, partition, producer.pid, offset, "ABORT marker without a coordinator decision")
    return True


@anomaly("unadded-partition", "XTX-004", "ERROR", consequences=("XTX-003",))
def unadded_partition(inj: AnomalyInjector, kind: Kind) -> bool:
    """A pre-KIP-890 client writes to a partition it never added; an admin abort closes it afterwards."""
    candidates = [
        (producer, partition)
        for producer in inj.transacting()
        if producer.txn.added
        for partition in outside_transaction(inj, producer)
    ]
    if not candidates:
        return False
    producer, partition = inj.rng.choice(candidates)
    sim = inj.sim
    sequence = producer.sequences.get(partition.index, 0)
    records = draw_records(inj)
    offset = partition.data(producer.pid, producer.epoch, sequence, records, True, sim.clock)
    producer.sequences[partition.index] = (sequence + records) & MAX_SEQUENCE
    producer.end(sim, inj.rng.chance(0.5))
    marker = partition.marker(producer.pid, producer.epoch, False, producer.coordinator_epoch(sim), sim.clock)
    producer.forbidden.add(partition.index)
    inj.claim(partition, producer.pid)
    inj.protect(partition, marker)
    inj.truth(kind, partition, producer.pid, offset, f"no AddPartitionsToTxn; admin ABORT at {marker}")
    return True


@anomaly("low-coordinator-epoch", "XTX-007", "ERROR")
def low_coordinator_epoch(inj: AnomalyInjector, kind: Kind) -> bool:
    return end_with_marker(
        inj,
        kind,
        "marker coordinator epoch below the Prepare record's leader epoch",
        lambda producer, partition: {"coordinator_epoch": producer.coordinator_epoch(inj.sim) - 1},
        lambda producer, partition: partition.producers[producer.pid].last_marker is None,
    )
