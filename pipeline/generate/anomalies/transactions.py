"""TXN and LSO anomalies: broken transaction structure on a partition, and transactions left open."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.generate.anomalies.registry import Kind, anomaly
from pipeline.generate.anomalies.targets import (
    draw_records,
    end_with_marker,
    finish_partition,
    idle_producers,
    open_pair,
    send,
)
from pipeline.generate.partition_log import DataPartition

if TYPE_CHECKING:
    from pipeline.generate.anomalies.injector import AnomalyInjector

CLOCK_SKEW_MS = 20 * 60_000
EARLY_FRACTION = 0.6  # hanging transactions need the rest of the run to hang visibly

# --- TXN -------------------------------------------------------------------------------------------------


@anomaly("plain-batch-in-transaction", "TXN-001", "ERROR", consequences=("TXN-006",))
def plain_batch_in_transaction(inj: AnomalyInjector, kind: Kind) -> bool:
    pair = open_pair(inj)
    if pair is None:
        return False
    producer, partition = pair
    offset = send(inj, producer, partition)
    inj.claim(partition, producer.pid)
    inj.truth(kind, partition, producer.pid, offset, "a non-transactional batch inside the open transaction")
    return True


@anomaly("mixed-modes", "TXN-006", "WARN")
def mixed_modes(inj: AnomalyInjector, kind: Kind) -> bool:
    candidates = [
        (producer, partition)
        for producer in idle_producers(inj)
        for partition in producer.targets
        if partition.index not in producer.forbidden
        and inj.free(partition, producer.pid)
        and (entry := partition.producers.get(producer.pid)) is not None
        and entry.marker_epochs
        and entry.txn_first_offset < 0
    ]
    if not candidates:
        return False
    producer, partition = inj.rng.choice(candidates)
    offset = send(inj, producer, partition, sequence=producer.sequences.get(partition.index, 0))
    inj.claim(partition, producer.pid)
    inj.truth(kind, partition, producer.pid, offset, "a transactional producer writes a non-transactional batch")
    return True


@anomaly("transactions-merged", "TXN-002", "CRITICAL", consequences=("EPO-006",))
def transactions_merged(inj: AnomalyInjector, kind: Kind) -> bool:
    """A fence abort's marker is lost on one partition; the new instance's transaction writes there."""
    pair = open_pair(inj)
    if pair is None:
        return False
    producer, partition = pair
    sim = inj.sim
    producer.coordinator_abort(sim, lost=partition)
    producer.init_producer_id(sim)
    producer.begin(sim, [partition])
    offset = producer.write(sim, producer.txn, partition, draw_records(inj))
    producer.end(sim, True)  # one marker closes both transactions
    inj.claim(partition, producer.pid)
    inj.truth(kind, partition, producer.pid, offset, f"epoch {producer.epoch} data joins the unaborted transaction")
    return True


@anomaly("coordinator-epoch-regression", "TXN-004", "ERROR", consequences=("XTX-007",))
def coordinator_epoch_regression(inj: AnomalyInjector, kind: Kind) -> bool:
    def earlier_marker(producer, partition) -> bool:
        last = partition.producers[producer.pid].last_marker
        return last is not None and last[3] >= 1

    return end_with_marker(
        inj,
        kind,
        "a marker from a zombie coordinator (coordinator epoch one below)",
        lambda producer, partition: {"coordinator_epoch": partition.producers[producer.pid].last_marker[3] - 1},
        earlier_marker,
    )


@anomaly("long-transaction", "TXN-005", "WARN")
def long_transaction(inj: AnomalyInjector, kind: Kind) -> bool:
    """A client whose clock is 20 minutes behind starts a transaction that commits at once."""
    candidates = [
        (producer, partition)
        for producer in idle_producers(inj)
        for partition in producer.targets
        if partition.index not in producer.forbidden and inj.free(partition, producer.pid)
    ]
    if not candidates:
        return False
    producer, partition = inj.rng.choice(candidates)
    sim = inj.sim
    producer.begin(sim, [partition])
    producer.write(sim, producer.txn, partition, draw_records(inj), timestamp=sim.clock - CLOCK_SKEW_MS)
    offset = producer.end(sim, True)[partition.index]
    inj.claim(partition, producer.pid)
    inj.protect(partition, offset)
    inj.truth(kind, partition, producer.pid, offset, "committed 20 minutes after the first batch's timestamp")
    return True


# --- LSO -------------------------------------------------------------------------------------------------


@anomaly("hanging-transaction", "LSO-002", "ERROR", consequences=("XTX-002", "XTX-005", "LSO-001"), limit=3)
def hanging_transaction(inj: AnomalyInjector, kind: Kind) -> bool:
    """The coordinator aborts, but the marker for one partition never arrives; traffic pauses for 25 minutes."""
    if inj.sim.step > inj.sim.options.batches * EARLY_FRACTION:
        return False
    pair = open_pair(inj)
    if pair is None:
        return False
    producer, partition = pair
    first = partition.producers[producer.pid].txn_first_offset
    producer.coordinator_abort(inj.sim, lost=partition)
    producer.forbidden.add(partition.index)
    inj.claim(partition, producer.pid)
    inj.request_lull()
    inj.truth(kind, partition, producer.pid, first, "the ABORT marker for this partition was lost")
    return True


@anomaly("log-start-past-open-transaction", "LSO-003", "WARN", consequences=("LSO-001", "SNP-002"), at_finish=True)
def log_start_past_open_transaction(inj: AnomalyInjector, kind: Kind) -> bool:
    """DeleteRecords moved the log start offset inside the oldest open transaction."""

    def oldest_open_free(partition: DataPartition) -> bool:
        if not partition.open_txns:
            return False
        pid = min(partition.open_txns, key=partition.open_txns.get)
        return inj.free(partition, pid)

    partition = finish_partition(inj, "log-start", oldest_open_free, compacted_ok=False)
    if partition is None:
        return False
    pid = min(partition.open_txns, key=partition.open_txns.get)
    first = partition.open_txns[pid]
    partition.log_start_offset = first + 1
    inj.claim(partition, pid)
    inj.truth(kind, partition, pid, first, f"log start offset {first + 1}")
    return True
