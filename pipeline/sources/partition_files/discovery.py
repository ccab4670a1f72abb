"""The files beside segments, from the listings of the log roots on the driver: which partition dir or log dir each
belongs to, and which file names Kafka would not have written (leftovers of deletes, cleanings and swaps, foreign
files).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyarrow import fs as pafs

from pipeline.sources.log_dir_names import META_PROPERTIES, PARTITION_DIR
from pipeline.sources.log_roots import LogDirIdentity, RootListing
from pipeline.sources.partition_files.entries import (
    LEADER_EPOCH_CHECKPOINT,
    OFFSET_INDEX_SUFFIX,
    PARTITION_METADATA_FILE,
    SEGMENT_SUFFIXES,
    TIME_INDEX_SUFFIX,
    FileDescriptor,
    problem_row,
)
from schemas.checkpoints import CHECKPOINT_KINDS
from schemas.file_problems import PROBLEM_FILE_NAME, PROBLEM_LEFTOVER_FILES

_SEGMENT_FAMILY = re.compile(rf"^(?P<offset>\d{{20}})\.(?P<suffix>{'|'.join(SEGMENT_SUFFIXES)})$")
_LEFTOVER = re.compile(rf"^\d+\.(?:{'|'.join(SEGMENT_SUFFIXES)})\.(?P<suffix>deleted|cleaned|swap)$")
_LEFTOVER_MEANING = {
    "deleted": "renamed for asynchronous deletion and not removed yet",
    "cleaned": "output of a log-cleaner pass that did not finish; the broker deletes it at startup",
    "swap": "a segment replacement (compaction or split) that did not finish; the broker completes it at startup",
}
_OFFSET_NAMED = re.compile(r"^\d+\.")
_LOG_DIR_FILES = {META_PROPERTIES, ".kafka_cleanshutdown", "bootstrap.checkpoint", *CHECKPOINT_KINDS}
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class PartitionFileDiscovery:
    files: list[FileDescriptor]
    naming_problems: list[dict[str, Any]]  # FILE_PROBLEMS rows (SEG-001)


def naming_problem(name: str) -> str | None:
    """Why a file name in a partition dir breaks SEG-001, or None. Only names that look like segment, index
    or snapshot files are judged; other files (`.gitkeep`, KRaft `quorum-state`, ...) are not the log's."""
    leftover = _LEFTOVER.match(name)
    if leftover:
        return f"leftover .{leftover['suffix']} file: {_LEFTOVER_MEANING[leftover['suffix']]}"
    family = _SEGMENT_FAMILY.match(name)
    if family:
        return None if int(family["offset"]) <= _INT64_MAX else "the offset in the name exceeds the int64 range"
    if _OFFSET_NAMED.match(name) or name.endswith(tuple(f".{suffix}" for suffix in SEGMENT_SUFFIXES)):
        return f"not a 20-digit zero-padded offset with one of the suffixes .{', .'.join(SEGMENT_SUFFIXES)}"
    return None


def leftovers_message(names: list[str]) -> str:
    """One line for a partition dir's leftover files: how many of each kind and what the broker does with them."""
    by_suffix: dict[str, list[str]] = {}
    for name in names:
        by_suffix.setdefault(_LEFTOVER.match(name)["suffix"], []).append(name)
    kinds = "; ".join(
        f"{len(found)} .{suffix} ({_LEFTOVER_MEANING[suffix]}): {', '.join(found[:3])}{', ...' * (len(found) > 3)}"
        for suffix, found in sorted(by_suffix.items())
    )
    return f"{len(names)} leftover file(s), normal broker state its next start clears: {kinds}"


def discover_partition_files(listings: list[RootListing]) -> PartitionFileDiscovery:
    """The files to decode under each listed root, and SEG-001 naming problems, without reading files.

    A directory named `<topic>-<partition>` is a partition dir unless it holds a log-dir file (`meta.properties`,
    an offset checkpoint, ...). Offset checkpoints are taken from every other directory, and from the root's
    parent when the root is a partition dir.
    """
    files: dict[str, FileDescriptor] = {}  # by location: partition-dir roots of one log dir share its checkpoints
    problems: dict[str, dict[str, Any]] = {}
    for listing in listings:
        for file in _root_files(listing, problems):
            files.setdefault(file.location, file)
    return PartitionFileDiscovery(list(files.values()), list(problems.values()))


def _root_files(listing: RootListing, problems: dict[str, dict[str, Any]]) -> Iterator[FileDescriptor]:
    directories: dict[str, dict[str, int]] = {}
    for relative, size in listing.files.items():
        directory, _, name = relative.rpartition("/")
        directories.setdefault(directory, {})[name] = size
    root_is_partition_dir = False
    for directory, names in directories.items():
        prefix = f"{directory}/" if directory else ""
        partition = PARTITION_DIR.fullmatch(
            directory.rpartition("/")[2] if directory else listing.base.rpartition("/")[2]
        )
        if partition is None or not _LOG_DIR_FILES.isdisjoint(names):
            for kind in CHECKPOINT_KINDS:
                if kind in names:
                    location = listing.location_of(prefix + kind)
                    identity = listing.identity(directory)
                    yield FileDescriptor(
                        location,
                        kind,
                        None,
                        None,
                        identity.broker_id,
                        None,
                        names[kind],
                        cluster_id=identity.cluster_id,
                    )
            continue
        root_is_partition_dir = root_is_partition_dir or not directory
        log_dir = directory.rpartition("/")[0] if directory else ".."
        yield from _partition_dir_files(
            listing,
            prefix,
            names,
            partition["topic"],
            int(partition["partition"]),
            listing.identity(log_dir),
            problems,
        )
    if root_is_partition_dir:
        yield from _parent_checkpoints(listing, listing.identity(".."))


def _partition_dir_files(
    listing: RootListing,
    prefix: str,
    names: dict[str, int],
    topic: str,
    partition: int,
    identity: LogDirIdentity,
    problems: dict[str, dict[str, Any]],
) -> Iterator[FileDescriptor]:
    broker_id, cluster_id = identity.broker_id, identity.cluster_id
    leftovers = sorted(name for name in names if _LEFTOVER.match(name))
    if leftovers:
        location = listing.location_of(prefix + leftovers[0])
        message = leftovers_message(leftovers)
        problems[location] = problem_row(
            PROBLEM_LEFTOVER_FILES, topic, partition, location, None, message, broker_id, cluster_id
        )
    for name, size in names.items():
        location = listing.location_of(prefix + name)
        if _LEFTOVER.match(name):
            continue
        problem = naming_problem(name)
        if problem is not None:
            problems[location] = problem_row(
                PROBLEM_FILE_NAME, topic, partition, location, None, f"{name}: {problem}", broker_id, cluster_id
            )
            continue
        if name in (LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA_FILE):
            yield FileDescriptor(location, name, topic, partition, broker_id, None, size, cluster_id=cluster_id)
            continue
        family = _SEGMENT_FAMILY.match(name)
        if family is None or family["suffix"] == "log":
            continue
        offset, suffix = family["offset"], family["suffix"]
        log_name, offset_index_name = f"{offset}.log", f"{offset}.{OFFSET_INDEX_SUFFIX}"
        yield FileDescriptor(
            location,
            suffix,
            topic,
            partition,
            broker_id,
            int(offset),
            size,
            log_location=listing.location_of(prefix + log_name) if log_name in names else None,
            offset_index_location=(
                listing.location_of(prefix + offset_index_name)
                if suffix == TIME_INDEX_SUFFIX and offset_index_name in names
                else None
            ),
            cluster_id=cluster_id,
        )


def _parent_checkpoints(listing: RootListing, identity: LogDirIdentity) -> Iterator[FileDescriptor]:
    """The offset checkpoints of the log dir above a partition-dir root, which the listing does not reach."""
    parent_path = listing.base.rpartition("/")[0]
    parent_location = listing.location.rstrip("/").rpartition("/")[0]
    infos = listing.filesystem.get_file_info([f"{parent_path}/{kind}" for kind in CHECKPOINT_KINDS])
    for kind, info in zip(CHECKPOINT_KINDS, infos, strict=True):
        if info.type == pafs.FileType.File:
            yield FileDescriptor(
                f"{parent_location}/{kind}",
                kind,
                None,
                None,
                identity.broker_id,
                None,
                info.size,
                cluster_id=identity.cluster_id,
            )
