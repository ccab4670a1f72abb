"""IDX anomalies: `.txnindex` entries missing, wrong, extra or misplaced."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from itertools import islice
from typing import TYPE_CHECKING

from pipeline.generate.anomalies.registry import Kind, anomaly
from pipeline.generate.anomalies.targets import (
    outside_transaction,
)
from pipeline.generate.partition_log import DataPartition

if TYPE_CHECKING:
    from pipeline.generate.anomalies.injector import AnomalyInjector

RECENT_ENTRIES = 8
# The newest entries of a partition looked at for them: once every producer of a partition is claimed none is
# usable, and a look through all its entries at each try took longer the longer the run.
LOOKED_AT = 256


def _abort_entries(inj: AnomalyInjector, slot: str | None = None) -> list[tuple[DataPartition, int, list[int]]]:
    """(partition, segment base, entry) of the newest `.txnindex` entries of clean ABORTs with a free pair, a
    few per partition (whose `slot`, if given, is free) among its LOOKED_AT newest: a bounded look, however long
    the run."""
    found = []
    for partition in inj.partitions(lambda p: not p.compacted and (slot is None or inj.slot_free(p, slot))):
        newest = islice(_newest_entries(partition), LOOKED_AT)
        usable = (
            (partition, segment, entry)
            for segment, entry in newest
            if (partition.index, entry[2]) not in inj.protected_markers and inj.free(partition, entry[0])
        )
        found.extend(reversed(list(islice(usable, RECENT_ENTRIES))))
    return found


def _newest_entries(partition: DataPartition) -> Iterator[tuple[int, list[int]]]:
    """(segment base, entry) of the partition's `.txnindex` entries, newest first."""
    for segment in sorted(partition.aborted, reverse=True):
        for entry in reversed(partition.aborted[segment]):
            yield segment, entry


def _insert_entry(partition: DataPartition, segment: int, entry: list[int]) -> None:
    entries = partition.aborted.setdefault(segment, [])
    entries.insert(bisect.bisect([item[2] for item in entries], entry[2]), entry)


def _index_entry(
    inj: AnomalyInjector, kind: Kind, change: Callable[[DataPartition, int, list[int]], str], slot: str | None = None
) -> bool:
    """Change the newest usable `.txnindex` entry of a random partition (whose `slot`, if given, it claims)."""
    found = _abort_entries(inj, slot)
    if not found:
        return False
    partition = inj.rng.choice(found)[0]
    partition, segment, entry = [item for item in found if item[0] is partition][-1]
    detail = change(partition, segment, entry)
    if slot is not None:
        inj.claim_slot(partition, slot)
    inj.claim(partition, entry[0])
    inj.protect(partition, entry[2])
    inj.truth(kind, partition, entry[0], entry[2], detail)
    return True


@anomaly("missing-abort-entry", "IDX-001", "CRITICAL")
def missing_abort_entry(inj: AnomalyInjector, kind: Kind) -> bool:
    def remove(partition, segment, entry) -> str:
        partition.aborted[segment].remove(entry)
        return "the .txnindex entry of this ABORT is missing"

    return _index_entry(inj, kind, remove)


@anomaly("wrong-first-offset", "IDX-002", "CRITICAL")
def wrong_first_offset(inj: AnomalyInjector, kind: Kind) -> bool:
    def shift(partition, segment, entry) -> str:
        entry[1] += 1
        return f"entry first offset {entry[1]}, one above the transaction's"

    return _index_entry(inj, kind, shift, slot="log-start")  # not raised below a moved log start


@anomaly("wrong-last-stable-offset", "IDX-004", "WARN")
def wrong_last_stable_offset(inj: AnomalyInjector, kind: Kind) -> bool:
    def lso(partition, segment, entry) -> str:
        entry[3] = entry[2]
        return f"entry LSO {entry[3]} (the marker offset)"

    return _index_entry(inj, kind, lso)


@anomaly("corrupt-index-entry", "IDX-006", "ERROR")
def corrupt_index_entry(inj: AnomalyInjector, kind: Kind) -> bool:
    def version(partition, segment, entry) -> str:
        entry[4] = 1
        return "entry version 1"

    return _index_entry(inj, kind, version)


@anomaly("entry-in-wrong-segment", "IDX-007", "ERROR")
def entry_in_wrong_segment(inj: AnomalyInjector, kind: Kind) -> bool:
    found = [item for item in _abort_entries(inj) if item[1] > item[0].segment_bases[0]]
    if not found:
        return False
    partition, segment, entry = inj.rng.choice(found)
    previous = max(base for base in partition.segment_bases if base < segment)
    partition.aborted[segment].remove(entry)
    partition.aborted.setdefault(previous, []).append(entry)
    inj.claim(partition, entry[0])
    inj.protect(partition, entry[2])
    inj.truth(kind, partition, entry[0], entry[2], f"entry written to the index of segment {previous}")
    return True


@anomaly("orphan-entry", "IDX-003", "CRITICAL")
def orphan_entry(inj: AnomalyInjector, kind: Kind) -> bool:
    found = [
        partition
        for partition in inj.partitions(lambda p: not p.compacted and p.last_commit is not None)
        if (partition.index, partition.last_commit[2]) not in inj.protected_markers
        and inj.free(partition, partition.last_commit[0])
    ]
    if not found:
        return False
    partition = inj.rng.choice(found)
    pid, first, offset, segment = partition.last_commit
    _insert_entry(partition, segment, [pid, first, offset, offset + 1, 0])
    inj.claim(partition, pid)
    inj.protect(partition, offset)
    inj.truth(kind, partition, pid, offset, "a .txnindex entry for a COMMIT marker")
    return True


@anomaly("empty-abort-entry", "IDX-005", "WARN", consequences=("TXN-003",))
def empty_abort_entry(inj: AnomalyInjector, kind: Kind) -> bool:
    """An aborted transaction had added a partition it never wrote to; its index got a pre-2.8 empty entry."""
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
    producer.add_partition(sim, producer.txn, partition)
    offset = producer.end(sim, False)[partition.index]
    lso = min(partition.open_txns.values(), default=offset + 1)
    _insert_entry(partition, partition.segment_base, [producer.pid, offset, offset, lso, 0])
    inj.claim(partition, producer.pid)
    inj.protect(partition, offset)
    inj.truth(kind, partition, producer.pid, offset, "entry for an ABORT that closed no transaction")
    return True
