"""A table's Delta log by delta-rs, for both backends: existence, version, history, a write's commit, RESTORE.

These read only the `_delta_log` files, and RESTORE commits from them alone, without Spark: delta-spark would
load a snapshot of the table and run Spark jobs for each (a dozen for one RESTORE; BENCHMARKS.md, "Delta
backends"). Both backends write ordinary Delta logs, so one implementation answers alike for tables either wrote.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from deltalake import DeltaTable

NO_TABLE = -1  # the version "before" a table's first commit


def exists(location: str) -> bool:
    return DeltaTable.is_deltatable(location)


def version(location: str) -> int:
    """The latest version; NO_TABLE when there is no table."""
    if not exists(location):
        return NO_TABLE
    return _log(location).version()


def partition_columns(location: str) -> list[str]:
    """The latest snapshot's partition columns."""
    return list(_log(location).metadata().partition_columns)


def history(location: str, limit: int | None = None) -> list[dict[str, Any]]:
    """Commits newest first: version, timestamp (UTC datetime), operation, parameters (strings, as delta-spark's)."""
    return [
        {
            "version": commit["version"],
            "timestamp": datetime.fromtimestamp(commit["timestamp"] / 1000, tz=UTC),
            "operation": commit["operation"],
            "parameters": {
                key: value if isinstance(value, str) else json.dumps(value)
                for key, value in (commit.get("operationParameters") or {}).items()
            },
        }
        for commit in _log(location).history(limit)
    ]


def find_commit(location: str, write_id: str, base_version: int) -> int | None:
    """The version of the commit carrying `write_id` in commitInfo.userMetadata, made after `base_version`.

    Only the commits since `base_version` (the latest version before the write) are read: the write's is among
    them whichever other writers committed meanwhile, and older ones cannot be it.
    """
    if not exists(location):
        return None
    table = _log(location)
    latest = table.version()
    if latest <= base_version:
        return None
    for commit in table.history(limit=latest - base_version):
        if commit.get("userMetadata") == write_id:
            return commit["version"]
    return None


def restore(location: str, version: int) -> int:
    """Make the table read as it did at `version` by a RESTORE commit; returns that commit's version."""
    table = DeltaTable(location)
    table.restore(version)
    return table.version()


def _log(location: str) -> DeltaTable:
    # The file list is not needed to read versions and commit infos; loading it would read every add action.
    return DeltaTable(location, without_files=True)
