"""VACUUM for both backends, by delta-rs: it keeps the files of the versions named, which delta-spark cannot.

delta-spark's VACUUM keeps every snapshot younger than the retention and no older one, so a run published
before the retention would lose its files to it while the embedded backend keeps them; one implementation for
both keeps `produce-audit vacuum --keep-runs` meaning the same whichever backend wrote the tables.
"""

from __future__ import annotations

import posixpath

from deltalake import DeltaTable


def vacuum(location: str, retention_hours: int, keep_versions: list[int]) -> int:
    """Remove files no kept snapshot reads and older than the retention, uncommitted leftovers included.

    Returns the data files removed. Hadoop's local filesystem leaves a `.NAME.crc` checksum beside each file
    delta-spark writes; no snapshot names those, so they go too, but they are not counted.
    """
    removed = DeltaTable(location).vacuum(
        retention_hours=retention_hours,
        dry_run=False,
        enforce_retention_duration=False,
        full=True,
        keep_versions=keep_versions or None,
    )
    return sum(1 for path in removed if not _hadoop_checksum(path))


def _hadoop_checksum(path: str) -> bool:
    name = posixpath.basename(path)
    return name.startswith(".") and name.endswith(".crc")
