"""FMT anomalies: batches and segment tails the way corruption or a faulty writer leaves them."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import TYPE_CHECKING

from pipeline.generate.anomalies.registry import Kind, anomaly
from pipeline.generate.anomalies.targets import (
    draw_records,
    end_with_marker,
    epoch_started,
    extends_chain,
    finish_partition,
    idempotent_batch,
    send,
)
from pipeline.generate.encode import (
    MUTATE_CRC,
    MUTATE_HEADER_COUNT,
    MUTATE_MARKER_SEQUENCE,
    MUTATE_MAX_TIMESTAMP,
    MUTATE_UNUSED_ATTRIBUTE,
)
from pipeline.generate.partition_log import DataPartition
from pipeline.sources.kafka_format.encoding import encode_batch

if TYPE_CHECKING:
    from pipeline.generate.anomalies.injector import AnomalyInjector


@anomaly("crc-mismatch", "FMT-004", "ERROR")
def crc_mismatch(inj: AnomalyInjector, kind: Kind) -> bool:
    return idempotent_batch(inj, kind, "one bit of the stored CRC flipped", mutation=MUTATE_CRC)


@anomaly("record-structure", "FMT-006", "ERROR")
def record_structure(inj: AnomalyInjector, kind: Kind) -> bool:
    return idempotent_batch(inj, kind, "last record's header count -1 (CRC valid)", mutation=MUTATE_HEADER_COUNT)


@anomaly("count-inconsistent", "FMT-007", "ERROR")
def count_inconsistent(inj: AnomalyInjector, kind: Kind) -> bool:
    return idempotent_batch(inj, kind, "lastOffsetDelta one above the record count", extra_offsets=1)


@anomaly("max-timestamp", "FMT-008", "WARN")
def max_timestamp(inj: AnomalyInjector, kind: Kind) -> bool:
    return idempotent_batch(inj, kind, "maxTimestamp one above the records'", mutation=MUTATE_MAX_TIMESTAMP)


@anomaly("unused-attribute-bit", "FMT-005", "WARN")
def unused_attribute_bit(inj: AnomalyInjector, kind: Kind) -> bool:
    return idempotent_batch(inj, kind, "attribute bit 7 set", mutation=MUTATE_UNUSED_ATTRIBUTE)


@anomaly("legacy-batch-with-epoch", "FMT-009", "WARN")
def legacy_batch_with_epoch(inj: AnomalyInjector, kind: Kind) -> bool:
    partitions = inj.partitions(lambda p: not p.compacted and inj.free(p, -1))
    if not partitions:
        return False
    partition = inj.rng.choice(partitions)
    records = draw_records(inj)
    offset = partition.append(-1, 0, -1, records, 0, inj.sim.clock, records - 1)
    inj.claim(partition, -1)
    inj.truth(kind, partition, None, offset, "no producer id but epoch 0")
    return True


@anomaly("marker-with-sequence", "FMT-010", "ERROR")
def marker_with_sequence(inj: AnomalyInjector, kind: Kind) -> bool:
    return end_with_marker(
        inj, kind, "a COMMIT marker with baseSequence 0", lambda p, t: {"mutation": MUTATE_MARKER_SEQUENCE}
    )


@anomaly("offsets-not-increasing", "FMT-011", "ERROR")
def offsets_not_increasing(inj: AnomalyInjector, kind: Kind) -> bool:
    def fits(producer, partition, entry) -> bool:  # no roll: the batch stays behind its predecessor in one segment
        room = partition.segment_bytes - partition.segment_size
        return extends_chain(producer, partition, entry) and partition.segment_size > 0 and room > 400

    found = inj.idempotent(fits)
    if found is None or not epoch_started(found[1]):
        return False
    producer, partition, _ = found
    offset = send(inj, producer, partition, base_offset=partition.next_offset - 1)
    inj.claim(partition, producer.pid)
    inj.truth(kind, partition, producer.pid, offset, "base offset repeats the previous batch's last offset")
    return True


@anomaly("offset-gap", "FMT-012", "WARN")
def offset_gap(inj: AnomalyInjector, kind: Kind) -> bool:
    found = inj.idempotent(lambda producer, partition, entry: extends_chain(producer, partition, entry))
    if found is None or not epoch_started(found[1]):
        return False
    producer, partition, _ = found
    partition.skip_offsets(3)
    offset = send(inj, producer, partition)
    inj.claim(partition, producer.pid)
    inj.truth(kind, partition, producer.pid, offset, "three offsets left unused before the batch")
    return True


@anomaly("leader-epoch-regression", "FMT-013", "ERROR")
def leader_epoch_regression(inj: AnomalyInjector, kind: Kind) -> bool:
    def earlier_epoch_written(partition: DataPartition) -> bool:
        epochs = partition.leader_epochs
        return len(epochs) >= 2 and epochs[-2][1] < epochs[-1][1] and epoch_started(partition)

    found = inj.idempotent(
        lambda producer, partition, entry: (
            extends_chain(producer, partition, entry) and earlier_epoch_written(partition)
        )
    )
    if found is None:
        if not inj.partitions(lambda p: not p.compacted and len(p.leader_epochs) >= 2):
            inj.rng.choice(inj.partitions(lambda p: not p.compacted)).bump_leader_epoch()  # a legitimate election
        return False
    producer, partition, _ = found
    earlier = partition.leader_epochs[-2][0]
    offset = send(inj, producer, partition, leader_epoch=earlier)
    inj.claim(partition, producer.pid)
    inj.truth(kind, partition, producer.pid, offset, f"partition leader epoch {earlier} after {partition.leader_epoch}")
    return True


def _tail(inj: AnomalyInjector, kind: Kind, content: Callable[[int], bytes], detail: str) -> bool:
    partition = finish_partition(inj, "tail")
    if partition is None:
        return False
    partition.tail = content(partition.next_offset)
    inj.truth(kind, partition, None, partition.next_offset, detail)
    return True


@anomaly("torn-tail", "FMT-001", "WARN", at_finish=True)
def torn_tail(inj: AnomalyInjector, kind: Kind) -> bool:
    return _tail(inj, kind, lambda offset: encode_batch(offset, 3)[:40], "the first 40 bytes of a batch end the log")


@anomaly("entry-too-small", "FMT-002", "ERROR", at_finish=True)
def entry_too_small(inj: AnomalyInjector, kind: Kind) -> bool:
    return _tail(inj, kind, lambda offset: struct.pack(">qi", offset, 10) + bytes(5), "an entry of size 10")


@anomaly("bad-magic", "FMT-003", "ERROR", at_finish=True)
def bad_magic(inj: AnomalyInjector, kind: Kind) -> bool:
    def entry(offset: int) -> bytes:
        content = bytearray(encode_batch(offset, 1))
        content[16] = 7
        return bytes(content)

    return _tail(inj, kind, entry, "an entry with magic byte 7")
