"""Helpers the anomaly kinds share: finding a target, writing a shaped batch or marker, recording the truth."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.generate.anomalies.registry import Kind
from pipeline.generate.partition_log import MAX_SEQUENCE, DataPartition
from pipeline.generate.producers import RECORDS_PER_BATCH, IdempotentProducer, TransactionalProducer

if TYPE_CHECKING:
    from pipeline.generate.anomalies.injector import AnomalyInjector

MIN_ACTIVE_PRODUCERS = 20  # kinds that retire a producer leave at least this many running


def draw_records(inj: AnomalyInjector) -> int:
    return RECORDS_PER_BATCH[inj.rng.below(len(RECORDS_PER_BATCH))]


def extends_chain(producer: IdempotentProducer, partition: DataPartition, entry) -> bool:
    """The producer's last batch here is at its current epoch, so its next one continues a sequence chain."""
    following = producer.sequences.get(partition.index)
    return (
        entry.epoch == producer.epoch
        and bool(entry.recent)
        and following is not None
        and 8 <= following <= MAX_SEQUENCE - 64
        and entry.last_sequence == following - 1
    )


def send(inj: AnomalyInjector, producer, partition: DataPartition, sequence=None, extra_offsets=0, **fields) -> int:
    """The producer's next batch on the partition, with anomaly fields; its next sequence follows the batch."""
    records = fields.pop("records", None) or draw_records(inj)
    sequence = producer.sequences[partition.index] if sequence is None else sequence
    offset = partition.append(
        producer.pid, producer.epoch, sequence, records, 0, inj.sim.clock, records - 1 + extra_offsets, **fields
    )
    producer.sequences[partition.index] = (sequence + records + extra_offsets) & MAX_SEQUENCE
    return offset


def idempotent_batch(inj: AnomalyInjector, kind: Kind, detail: str, condition=extends_chain, **fields) -> bool:
    """One batch of an idempotent producer, shaped by `fields`, where it continues its sequence chain."""
    found = inj.idempotent(condition)
    if found is None:
        return False
    producer, partition, _ = found
    offset = send(inj, producer, partition, **fields)
    inj.claim(partition, producer.pid)
    inj.truth(kind, partition, producer.pid, offset, detail)
    return True


def epoch_started(partition: DataPartition) -> bool:
    """The current leader epoch already has a batch (an offset change now would not move its start)."""
    return partition.leader_epochs[-1][1] < partition.next_offset


def open_pair(inj: AnomalyInjector):
    """A producer with an unclaimed transaction and one of its partitions holding open data, or None."""
    pairs = inj.in_transaction()
    return inj.rng.choice(pairs) if pairs else None


def no_decision_here(producer: TransactionalProducer, partition: DataPartition) -> bool:
    """The producer has no open transaction here and never had a marker at its current epoch here."""
    entry = partition.producers.get(producer.pid)
    return entry is None or (entry.txn_first_offset < 0 and producer.epoch not in entry.marker_epochs)


def outside_transaction(inj: AnomalyInjector, producer: TransactionalProducer) -> list[DataPartition]:
    """Partitions the producer may write to that its open transaction (if any) will not add."""
    planned = [*producer.txn.targets, *producer.txn.added] if producer.txn else []
    return [
        partition
        for partition in producer.targets
        if partition not in planned
        and partition.index not in producer.forbidden
        and inj.free(partition, producer.pid)
        and no_decision_here(producer, partition)
    ]


def end_with_marker(inj: AnomalyInjector, kind: Kind, detail: str, marker_fields, condition=None) -> bool:
    """Commit an unclaimed transaction now, the marker on one of its partitions shaped by `marker_fields`."""
    pairs = [pair for pair in inj.in_transaction() if condition is None or condition(*pair)]
    if not pairs:
        return False
    producer, partition = inj.rng.choice(pairs)
    fields = marker_fields(producer, partition)
    offset = producer.end(inj.sim, True, markers={partition.index: fields})[partition.index]
    inj.claim(partition, producer.pid)
    inj.protect(partition, offset)
    inj.truth(kind, partition, producer.pid, offset, detail)
    return True


def idle_producers(inj: AnomalyInjector, retiring: bool = False) -> list[TransactionalProducer]:
    if retiring and len(inj.sim.active) <= MIN_ACTIVE_PRODUCERS:
        return []
    return inj.transactional(lambda producer: producer.idle)


def state_record_truth(inj: AnomalyInjector, kind: Kind, producer: TransactionalProducer, record, detail: str):
    inj.truth(kind, record.partition, producer.pid, record.offset, detail)


def finish_partition(
    inj: AnomalyInjector, slot: str, condition=lambda partition: True, compacted_ok: bool = True
) -> DataPartition | None:
    """A partition with data whose `slot` is free, claimed for a file-level anomaly at the end of the run."""
    partitions = inj.partitions(
        lambda p: (compacted_ok or not p.compacted) and p.next_offset > 2 and inj.slot_free(p, slot) and condition(p)
    )
    if not partitions:
        return None
    partition = inj.rng.choice(partitions)
    inj.claim_slot(partition, slot)
    return partition
