"""The small text files of a Kafka log directory, in the formats the broker writes and the ingest reads.

`meta.properties` (KRaft, version 1), the four log-dir offset checkpoints and `leader-epoch-checkpoint`
(`0`, a count, then one entry per line; spec §1.2), and `partition.metadata` (`version: 0`, `topic_id:`).
"""

from __future__ import annotations

from collections.abc import Iterable

FIXED_CLOCK_LINE = "#Thu Jan 01 00:00:00 UTC 2026"  # the properties header date; a fixed clock keeps runs identical


def meta_properties(node_id: int, cluster_id: str, directory_id: str) -> str:
    return (
        f"#\n{FIXED_CLOCK_LINE}\nnode.id={node_id}\ndirectory.id={directory_id}\nversion=1\ncluster.id={cluster_id}\n"
    )


def checkpoint_text(lines: Iterable[str]) -> str:
    """`CheckpointFile` layout: version 0, entry count, entries."""
    entries = list(lines)
    return "\n".join(["0", str(len(entries)), *entries]) + "\n"


def offset_checkpoint(entries: Iterable[tuple[str, int, int]]) -> str:
    return checkpoint_text(f"{topic} {partition} {offset}" for topic, partition, offset in sorted(entries))


def leader_epoch_checkpoint(entries: Iterable[tuple[int, int]]) -> str:
    return checkpoint_text(f"{epoch} {start_offset}" for epoch, start_offset in entries)


def partition_metadata(topic_id: str) -> str:
    return f"version: 0\ntopic_id: {topic_id}\n"
