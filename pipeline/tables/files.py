"""Files under the warehouse beside its Delta tables (reports, the lock, leftovers of killed runs), reached
without Spark: local paths directly, URIs through pyarrow's filesystems."""

from __future__ import annotations

import re

import pyarrow.fs as pafs

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_HADOOP_SCHEMES = {"s3a": "s3", "s3n": "s3"}  # Spark's Hadoop names for filesystems pyarrow knows as s3


def is_uri(location: str) -> bool:
    return _URI.match(location) is not None


def filesystem(location: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem holding `location` and the location's path in it."""
    scheme = _URI.match(location)
    if scheme is None:
        return pafs.LocalFileSystem(), location.rstrip("/") or "/"
    arrow_uri = _HADOOP_SCHEMES.get(scheme.group(1), scheme.group(1)) + location[len(scheme.group(1)) :]
    files, path = pafs.FileSystem.from_uri(arrow_uri.rstrip("/"))
    return files, path.rstrip("/")


def remove_tree(files: pafs.FileSystem, path: str) -> bool:
    """Delete a folder and everything in it; False when it was not there."""
    if files.get_file_info(path).type == pafs.FileType.NotFound:
        return False
    files.delete_dir(path)
    return True


def children(files: pafs.FileSystem, path: str) -> list[str]:
    """The paths directly inside folder `path` (none when it is missing)."""
    if files.get_file_info(path).type != pafs.FileType.Directory:
        return []
    return [info.path for info in files.get_file_info(pafs.FileSelector(path))]
