"""SEG and LEP anomalies: segment names, index files, partition.metadata and leader-epoch checkpoints."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline.generate.anomalies.registry import Kind, anomaly
from pipeline.generate.anomalies.targets import (
    epoch_started,
    finish_partition,
)
from pipeline.generate.partition_log import DataPartition
from pipeline.sources.kafka_format.encoding import segment_file_name

if TYPE_CHECKING:
    from pipeline.generate.anomalies.injector import AnomalyInjector

# --- SEG -------------------------------------------------------------------------------------------------


def _roll_hook(inj: AnomalyInjector, kind: Kind, hook) -> bool:
    partitions = inj.partitions(lambda p: not p.compacted and p.roll_hook is None and inj.slot_free(p, "roll"))
    if not partitions:
        return False
    partition = inj.rng.choice(partitions)
    inj.claim_slot(partition, "roll")
    inj.hooks_waiting[kind.name] += 1
    partition.roll_hook = hook
    return True


@anomaly("segment-base-gap", "SEG-002", "WARN", consequences=("FMT-012",))
def segment_base_gap(inj: AnomalyInjector, kind: Kind) -> bool:
    def hook(log: DataPartition) -> tuple[int, int] | None:
        base = log.next_offset
        if not epoch_started(log):
            return None
        log.skip_offsets(2)
        inj.hooks_waiting[kind.name] -= 1
        inj.truth(kind, log, None, base + 2, f"segment {base} starts with offset {base + 2}")
        return base, base

    return _roll_hook(inj, kind, hook)


@anomaly("segment-overlap", "SEG-003", "ERROR", consequences=("SEG-002", "SNP-002"))
def segment_overlap(inj: AnomalyInjector, kind: Kind) -> bool:
    def hook(log: DataPartition) -> tuple[int, int] | None:
        following = log.next_offset
        entries = log.aborted.get(log.segment_base)
        if entries and entries[-1][2] == following - 1:  # its .txnindex entry would fall outside the segment
            return None
        inj.hooks_waiting[kind.name] -= 1
        inj.truth(kind, log, None, log.last_entry_base, f"next segment named {following - 1}, one offset early")
        return following - 1, following

    return _roll_hook(inj, kind, hook)


def _index_mutation(inj: AnomalyInjector, kind: Kind, attribute: str, change) -> bool:
    partitions = inj.partitions(lambda p: not p.compacted and inj.slot_free(p, attribute))
    if not partitions:
        return False
    partition = inj.rng.choice(partitions)
    inj.claim_slot(partition, attribute)

    def mutation(offsets, times) -> bool:
        detail = change(offsets, times)
        if detail:
            inj.hooks_waiting[kind.name] -= 1
            inj.truth(kind, partition, None, None, f"segment {partition.writer.base_offset}: {detail}")
        return bool(detail)

    inj.hooks_waiting[kind.name] += 1
    setattr(partition.writer, attribute, mutation)
    return True


@anomaly("offset-index-entry", "SEG-004", "WARN", consequences=("SEG-005",))  # time entries are looked up through it
def offset_index_entry(inj: AnomalyInjector, kind: Kind) -> bool:
    def change(offsets, times) -> str | None:
        if not offsets:
            return None
        offsets[-1] += 1
        return f"the last .index entry points at byte {offsets[-1]}, inside a batch"

    return _index_mutation(inj, kind, "offset_index_mutation", change)


@anomaly("time-index-entry", "SEG-005", "WARN")
def time_index_entry(inj: AnomalyInjector, kind: Kind) -> bool:
    def change(offsets, times) -> str | None:
        if not times:
            return None
        times[-2] -= 1
        return f"the last .timeindex entry has timestamp {times[-2]}, one below its batch's"

    return _index_mutation(inj, kind, "time_index_mutation", change)


@anomaly("misnamed-file", "SEG-001", "WARN", at_finish=True)
def misnamed_file(inj: AnomalyInjector, kind: Kind) -> bool:
    """A segment copied aside under a name no broker writes (a leftover .swap or .deleted is normal: INFO)."""
    partition = finish_partition(inj, "misnamed")
    if partition is None:
        return False
    name = segment_file_name(partition.segment_bases[0], ".log.bak")
    partition.extra_files[name] = b""
    inj.truth(kind, partition, None, None, f"{name} beside the segments")
    return True


@anomaly("zero-topic-id", "SEG-006", "WARN", at_finish=True)
def zero_topic_id(inj: AnomalyInjector, kind: Kind) -> bool:
    partition = finish_partition(inj, "partition.metadata")
    if partition is None:
        return False
    partition.text_hooks["partition.metadata"] = lambda text: "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n"
    inj.truth(kind, partition, None, None, "partition.metadata with the zero topic id")
    return True


# --- LEP -------------------------------------------------------------------------------------------------


def _checkpoint(
    inj: AnomalyInjector, kind: Kind, change, located, condition=lambda p: True, also: str | None = None
) -> bool:
    """Change the partition's leader-epoch-checkpoint text; `located` gives the offset the finding names and
    `also` another slot the change depends on."""
    partition = finish_partition(
        inj, "leader-epoch-checkpoint", lambda p: condition(p) and (also is None or inj.slot_free(p, also))
    )
    if partition is None:
        return False
    if also is not None:
        inj.claim_slot(partition, also)

    def hook(text: str) -> str:
        lines = text.splitlines()
        change(lines)
        return "\n".join(lines) + "\n"

    partition.text_hooks["leader-epoch-checkpoint"] = hook
    inj.truth(kind, partition, None, located(partition), "leader-epoch-checkpoint changed")
    return True


@anomaly("epoch-checkpoint-count", "LEP-001", "ERROR", at_finish=True)
def epoch_checkpoint_count(inj: AnomalyInjector, kind: Kind) -> bool:
    def change(lines: list[str]) -> None:
        lines[1] = str(int(lines[1]) + 1)

    return _checkpoint(inj, kind, change, lambda partition: None)


@anomaly("epoch-checkpoint-order", "LEP-002", "ERROR", at_finish=True)
def epoch_checkpoint_order(inj: AnomalyInjector, kind: Kind) -> bool:
    def change(lines: list[str]) -> None:
        lines[-2], lines[-1] = lines[-1], lines[-2]

    return _checkpoint(
        inj, kind, change, lambda partition: partition.leader_epochs[-2][1], lambda p: len(p.leader_epochs) >= 2
    )


@anomaly("epoch-checkpoint-start", "LEP-003", "WARN", at_finish=True)
def epoch_checkpoint_start(inj: AnomalyInjector, kind: Kind) -> bool:
    def change(lines: list[str]) -> None:
        epoch, _ = lines[2].split()
        lines[2] = f"{epoch} 1"

    def room(partition: DataPartition) -> bool:  # the cleaner may have removed the first batch of a compacted log
        return not partition.compacted and (len(partition.leader_epochs) == 1 or partition.leader_epochs[1][1] > 1)

    # located at the epoch's first batch; checked only at or above the log start, which must stay 0
    return _checkpoint(inj, kind, change, lambda partition: 0, room, also="log-start")
