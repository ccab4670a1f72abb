"""Log-dir inputs as the driver lists them: their files, the `.log` segments among them and the brokers holding them.

A root is listed once per run (on an object store every listing is paid for and slow) and the listing is handed to
every reader of log dirs: the segment decoder, the readers of the files beside the segments and of the coordinator
topics, and the incremental ingest. It holds names, sizes and modification times; the only content read is a log
dir's `meta.properties`, once, for its broker id and cluster id.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from pyarrow import fs as pafs

from pipeline.config import IngestSettings
from pipeline.errors import InputError
from pipeline.sources.filesystems import resolve, uri_scheme
from pipeline.sources.log_dir_names import META_PROPERTIES, PARTITION_DIR, SEGMENT_FILE

log = logging.getLogger(__name__)

_META_PROPERTIES_MAX_BYTES = 64 * 1024
_PROPERTY_LINE = re.compile(r"^[ \t]*([^#!\s=:]+)[ \t]*[=:][ \t]*(.*?)[ \t]*$", re.MULTILINE)
_DIR_SUFFIX_MEANING = {
    "-delete": "partition scheduled for deletion",
    "-future": "future replica of an alter-log-dirs move",
    "-stray": "stray replica the broker will delete",
}


@dataclass(frozen=True)
class SegmentFile:
    """One `.log` segment to decode; `location` is a local path or a URI that executors open as is.

    A task decodes the entries that start in the byte range [start, end) of the file; `end` None means up to
    the end of the file as the task finds it. `size` and `mtime_ns` (nanoseconds since the epoch, None when the
    filesystem gives no modification time) are those of the listing; the incremental ingest compares them.
    """

    location: str
    topic: str
    partition: int
    broker_id: int | None
    segment_base_offset: int
    size: int
    start: int = 0
    end: int | None = None
    mtime_ns: int | None = None
    cluster_id: str = ""  # the log dir's cluster (`LogDirIdentity`)


@dataclass(frozen=True)
class LogDirIdentity:
    """The broker holding a log dir, from its `meta.properties`: the broker id (None when the file names none) and
    the cluster id, which is the run's `ingest.cluster_id` when the file names none ("" when that is unset)."""

    broker_id: int | None
    cluster_id: str


@dataclass(frozen=True)
class SkippedDir:
    location: str
    reason: str


@dataclass(frozen=True)
class RootListing:
    """Every file under a log root, from one recursive listing on the driver (see `listing_of`)."""

    root: str  # the input as the caller spelled it
    filesystem: pafs.FileSystem
    base: str  # the root's path on `filesystem`
    location: str  # the root as file locations start: a URI root keeps its scheme
    files: dict[str, int]  # path relative to the root -> size, sorted
    mtimes_ns: dict[str, int | None]  # path relative to the root -> modification time, if the filesystem has one
    cluster_id: str  # the cluster of a log dir whose meta.properties names none (`ingest.cluster_id`)
    _identities: dict[str, LogDirIdentity] = field(default_factory=dict, init=False, repr=False, compare=False)

    def location_of(self, relative: str) -> str:
        return _join(self.location, relative)

    def identity(self, log_dir: str) -> LogDirIdentity:
        """Broker and cluster id of a log dir given relative to the root, ".." being the root's parent; read once."""
        if log_dir not in self._identities:
            properties = _meta_properties(self.filesystem, self.base, log_dir, self.files)
            where = self.location_of(f"{log_dir}/{META_PROPERTIES}" if log_dir else META_PROPERTIES)
            self._identities[log_dir] = LogDirIdentity(
                _broker_id(properties, where), properties.get("cluster.id") or self.cluster_id
            )
        return self._identities[log_dir]


@dataclass(frozen=True)
class Discovery:
    """Log roots as listed, the segments among their files (each file once) and the dirs left out."""

    listings: list[RootListing]
    segments: list[SegmentFile]
    skipped: list[SkippedDir]


def discover_segments(roots: list[str], ingest: IngestSettings) -> Discovery:
    """List each root and find its segment files, on the driver, without reading them.

    A root is a partition dir `<topic>-<partition>`, a broker log dir holding them (with `meta.properties`,
    which names the broker), or any directory above those, such as one holding several broker log dirs.
    Dirs whose names end with one of `ingest.skip_dir_suffixes` are skipped and reported. A root that is
    missing or holds no segment file raises InputError.
    """
    skipped: list[SkippedDir] = []
    listings = [list_root(root, ingest.skip_dir_suffixes, skipped, ingest.cluster_id) for root in roots]
    return segments_of(listings, skipped)


def segments_of(listings: list[RootListing], skipped: list[SkippedDir]) -> Discovery:
    """The segments of listed roots; a root without any raises InputError. Overlapping roots give a file once."""
    unique: dict[str, SegmentFile] = {}
    for listing in listings:
        found = _listed_segments(listing)
        if not found:
            raise InputError(listing.root, "no <20-digit offset>.log segment file in any <topic>-<partition> directory")
        for segment in found:
            unique.setdefault(segment.location, segment)
    return Discovery(listings, list(unique.values()), skipped)


def list_root(root: str, skip_suffixes: list[str], skipped: list[SkippedDir], cluster_id: str = "") -> RootListing:
    """One recursive listing of a log root, leaving out (and reporting in `skipped`) dirs with a skip suffix.

    Raises InputError if the root is missing or not a directory.
    """
    filesystem, path = resolve(root)
    info = filesystem.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        raise InputError(root, "log root does not exist")
    if info.type != pafs.FileType.Directory:
        raise InputError(root, "log root is not a directory")
    base = path.rstrip("/")
    entries = filesystem.get_file_info(pafs.FileSelector(base, recursive=True))
    return listing_of(root, filesystem, base, entries, skip_suffixes, skipped, cluster_id)


def listing_of(
    root: str,
    filesystem: pafs.FileSystem,
    base: str,
    entries: list[pafs.FileInfo],
    skip_suffixes: list[str],
    skipped: list[SkippedDir],
    cluster_id: str = "",
) -> RootListing:
    """The listing of a root from the entries of its recursive listing, made by whoever listed it first.

    `cluster_id` is the cluster of the log dirs whose meta.properties names none."""
    location = root if uri_scheme(root) else base
    files = _kept_files(entries, base, location, skip_suffixes, skipped)
    return RootListing(
        root,
        filesystem,
        base,
        location,
        {relative: info.size for relative, info in files.items()},
        {relative: info.mtime_ns for relative, info in files.items()},
        cluster_id,
    )


def _listed_segments(listing: RootListing) -> list[SegmentFile]:
    """The segments of a root: every `<20 digits>.log` whose parent is `<topic>-<partition>`.

    The root may be a partition dir, a broker log dir, or any directory above them. The log dir of a
    partition is its parent; its `meta.properties`, when there is one, gives the broker and cluster id.
    """
    segments: list[SegmentFile] = []
    for relative, size in listing.files.items():
        *dirs, name = relative.split("/")
        segment = SEGMENT_FILE.fullmatch(name)
        if segment is None:
            continue
        partition_dir = dirs[-1] if dirs else listing.base.rsplit("/", 1)[-1]
        partition = PARTITION_DIR.fullmatch(partition_dir)
        if partition is None:
            log.debug("ignoring %s: its directory is not named <topic>-<partition>", listing.location_of(relative))
            continue
        identity = listing.identity("/".join(dirs[:-1]) if dirs else "..")
        segments.append(
            SegmentFile(
                location=listing.location_of(relative),
                topic=partition["topic"],
                partition=int(partition["partition"]),
                broker_id=identity.broker_id,
                segment_base_offset=int(segment["base_offset"]),
                size=size,
                mtime_ns=listing.mtimes_ns[relative],
                cluster_id=identity.cluster_id,
            )
        )
    return segments


def _kept_files(
    entries: list[pafs.FileInfo], base: str, location: str, skip_suffixes: list[str], skipped: list[SkippedDir]
) -> dict[str, pafs.FileInfo]:
    """Files under `base` (relative path -> listing entry, sorted), leaving out directories with a skip suffix."""
    files: dict[str, pafs.FileInfo] = {}
    skipped_here: set[str] = set()
    for entry in entries:
        if entry.type != pafs.FileType.File:
            continue
        relative = entry.path[len(base) + 1 :]
        *dirs, _ = relative.split("/")
        excluded = next((depth for depth, name in enumerate(dirs) if name.endswith(tuple(skip_suffixes))), None)
        if excluded is None:
            files[relative] = entry
        elif (skipped_dir := "/".join(dirs[: excluded + 1])) not in skipped_here:
            skipped_here.add(skipped_dir)
            suffix = next(suffix for suffix in skip_suffixes if dirs[excluded].endswith(suffix))
            reason = f"name ends with {suffix!r}: {_DIR_SUFFIX_MEANING.get(suffix, 'listed in skip_dir_suffixes')}"
            log.debug("skipping %s (%s)", _join(location, skipped_dir), reason)
            skipped.append(SkippedDir(_join(location, skipped_dir), reason))
    return dict(sorted(files.items()))


def _meta_properties(filesystem: pafs.FileSystem, base: str, log_dir: str, files: dict[str, int]) -> dict[str, str]:
    """The properties of a log dir's meta.properties ({} without the file); meta.properties before Kafka 0.10.1
    has no `cluster.id`.

    `log_dir` is relative to the root; ".." is the root's parent, for a root that is a partition dir.
    """
    relative = f"{log_dir}/{META_PROPERTIES}" if log_dir else META_PROPERTIES
    if log_dir == "..":
        fs_path = f"{base.rsplit('/', 1)[0]}/{META_PROPERTIES}"
        if filesystem.get_file_info(fs_path).type != pafs.FileType.File:
            return {}
    elif relative in files:
        fs_path = f"{base}/{relative}"
    else:
        return {}
    with filesystem.open_input_stream(fs_path) as stream:
        text = stream.read(_META_PROPERTIES_MAX_BYTES).decode("utf-8", errors="replace")
    return dict(_PROPERTY_LINE.findall(text))


def _broker_id(properties: dict[str, str], where: str) -> int | None:
    """`node.id` (KRaft) or `broker.id` (ZooKeeper mode)."""
    for key in ("node.id", "broker.id"):
        value = properties.get(key)
        if value is not None:
            if value.lstrip("-").isdigit():
                return int(value)
            log.warning("%s: %s=%r is not an integer", where, key, value)
    return None


def _join(parent: str, name: str) -> str:
    return f"{parent.rstrip('/')}/{name}"
