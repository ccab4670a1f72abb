"""SEQ anomalies: idempotent sequences that skip, repeat, overlap or fail to restart at 0."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.generate.anomalies.registry import Kind, anomaly
from pipeline.generate.anomalies.targets import (
    draw_records,
    extends_chain,
    open_pair,
    send,
)

if TYPE_CHECKING:
    from pipeline.generate.anomalies.injector import AnomalyInjector


@anomaly("duplicate-batch", "SEQ-004", "CRITICAL")
def duplicate_batch(inj: AnomalyInjector, kind: Kind) -> bool:
    found = inj.idempotent(extends_chain)
    if found is None:
        return False
    producer, partition, entry = found
    base, sequence, delta, records, attributes, timestamp, epoch = entry.recent[inj.rng.below(len(entry.recent))]
    offset = partition.append(producer.pid, epoch, sequence, records, attributes, timestamp, delta)
    inj.claim(partition, producer.pid)
    inj.truth(kind, partition, producer.pid, offset, f"a retry of the batch at offset {base} written again")
    return True


@anomaly("sequence-gap", "SEQ-001", "ERROR")
def sequence_gap(inj: AnomalyInjector, kind: Kind) -> bool:
    found = inj.idempotent(extends_chain)
    if found is None:
        return False
    producer, partition, _ = found
    skipped = producer.sequences[partition.index]
    offset = send(inj, producer, partition, sequence=skipped + 3)
    inj.claim(partition, producer.pid)
    inj.truth(kind, partition, producer.pid, offset, f"sequences {skipped}..{skipped + 2} never written")
    return True


@anomaly("overlapping-retry", "SEQ-005", "CRITICAL")
def overlapping_retry(inj: AnomalyInjector, kind: Kind) -> bool:
    found = inj.idempotent(extends_chain)
    if found is None:
        return False
    producer, partition, _ = found
    following = producer.sequences[partition.index]
    records = inj.rng.between(2, 8)
    offset = send(inj, producer, partition, sequence=following - 1, records=records)
    inj.claim(partition, producer.pid)
    inj.truth(kind, partition, producer.pid, offset, f"a re-batched retry repeats sequence {following - 1}")
    return True


@anomaly("new-epoch-keeps-sequence", "SEQ-003", "ERROR")
def new_epoch_keeps_sequence(inj: AnomalyInjector, kind: Kind) -> bool:
    found = inj.idempotent(extends_chain)
    if found is None:
        return False
    producer, partition, _ = found
    following = producer.sequences[partition.index]
    producer.bump_epoch()
    offset = send(inj, producer, partition, sequence=following)
    inj.claim(partition, producer.pid)
    inj.truth(kind, partition, producer.pid, offset, f"epoch {producer.epoch} continues at sequence {following}")
    return True


@anomaly("resume-at-fence-epoch", "SEQ-002", "ERROR", consequences=("EPO-004",))
def resume_at_fence_epoch(inj: AnomalyInjector, kind: Kind) -> bool:
    """After a fence abort the old instance carries on at the abort marker's epoch with its old sequences."""
    pair = open_pair(inj)
    if pair is None:
        return False
    producer, partition = pair
    following = producer.sequences.get(partition.index, 0)
    if following == 0:
        return False
    sim = inj.sim
    producer.coordinator_abort(sim)
    producer.fenced = False  # no InitProducerId: the epoch stays at the marker's
    producer.sequences = {partition.index: following}
    producer.begin(sim, [partition])
    offset = producer.write(sim, producer.txn, partition, draw_records(inj))
    producer.end(sim, True)
    inj.claim(partition, producer.pid)
    inj.truth(
        kind, partition, producer.pid, offset, f"data at the fence epoch {producer.epoch} from sequence {following}"
    )
    return True
