"""SNP anomalies: producer-state snapshots that are corrupt, stray, or disagree with the log."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.generate.anomalies.registry import Kind, anomaly
from pipeline.generate.anomalies.targets import (
    finish_partition,
)
from pipeline.generate.partition_log import DataPartition, SnapshotEntry
from pipeline.generate.segment_writer import snapshot_bytes
from pipeline.sources.kafka_format.encoding import segment_file_name

if TYPE_CHECKING:
    from pipeline.generate.anomalies.injector import AnomalyInjector


def _snapshot_hook(inj: AnomalyInjector, kind: Kind, change, slot: str | None = None) -> bool:
    """Have the next snapshot of a partition written through `change(entries) -> (entries or bytes, pid, detail)`."""
    partitions = inj.partitions(
        lambda p: (
            not p.compacted
            and p.snapshot_hook is None
            and p.next_offset > 0
            and (slot is None or inj.slot_free(p, slot))
        )
    )
    if not partitions:
        return False
    partition = inj.rng.choice(partitions)
    if slot is not None:
        inj.claim_slot(partition, slot)

    def hook(log: DataPartition, offset: int, entries: list[SnapshotEntry]) -> bytes | None:
        changed = change(entries)
        if changed is None:
            return None
        content, pid, detail = changed
        inj.hooks_waiting[kind.name] -= 1
        inj.truth(kind, log, pid, offset, f"snapshot {offset}: {detail}")
        return content if isinstance(content, bytes) else snapshot_bytes(content)

    inj.hooks_waiting[kind.name] += 1
    partition.snapshot_hook = hook
    return True


@anomaly("diverging-snapshot", "SNP-003", "ERROR")
def diverging_snapshot(inj: AnomalyInjector, kind: Kind) -> bool:
    def change(entries: list[SnapshotEntry]):
        for index, entry in enumerate(entries):
            if 0 <= entry[1] < 32767:
                entries[index] = (entry[0], entry[1] + 1, *entry[2:])
                return entries, entry[0], f"producer {entry[0]} at epoch {entry[1] + 1}, one above the log"
        return None

    return _snapshot_hook(inj, kind, change)


@anomaly("phantom-open-transaction", "SNP-004", "ERROR", consequences=("SNP-003", "SNP-005"))
def phantom_open_transaction(inj: AnomalyInjector, kind: Kind) -> bool:
    def change(entries: list[SnapshotEntry]):
        for index, entry in enumerate(entries):
            pid, epoch, last_sequence, last_offset, delta, timestamp, coordinator_epoch, txn_first = entry
            if txn_first < 0 <= last_offset:
                phantom = last_offset - delta
                entries[index] = (pid, epoch, last_sequence, last_offset, delta, timestamp, coordinator_epoch, phantom)
                return entries, pid, f"producer {pid} with an open transaction from offset {phantom}"
        return None

    return _snapshot_hook(inj, kind, change, slot="log-start")  # not raised below a moved log start


@anomaly("corrupt-snapshot", "SNP-001", "WARN")
def corrupt_snapshot(inj: AnomalyInjector, kind: Kind) -> bool:
    def change(entries: list[SnapshotEntry]):
        content = bytearray(snapshot_bytes(entries))
        content[2] ^= 0x01  # a bit of the stored CRC
        return bytes(content), None, "CRC-32C mismatch"

    return _snapshot_hook(inj, kind, change)


@anomaly("stray-snapshot", "SNP-002", "WARN", at_finish=True)
def stray_snapshot(inj: AnomalyInjector, kind: Kind) -> bool:
    partition = finish_partition(inj, "stray-snapshot")
    if partition is None:
        return False
    offset = partition.next_offset + 5
    partition.extra_files[segment_file_name(offset, ".snapshot")] = snapshot_bytes(partition.snapshot_entries())
    inj.truth(kind, partition, None, offset, "a snapshot above the log end offset")
    return True
