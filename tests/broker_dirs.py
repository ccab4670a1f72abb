"""The real broker dirs of ../shared/realdata, grouped for tests that read several of them in one go."""

from __future__ import annotations

from pathlib import Path


def apart_by_partition(dirs: list[Path]) -> list[list[str]]:
    """The dirs in as few groups as hold no partition name twice: several dirs hold copies of one unnamed replica,
    which must not be read together, while dirs of different partitions read together as they read alone."""
    groups: list[tuple[set[str], list[str]]] = []
    for directory in dirs:
        names = {log.parent.name for log in directory.rglob("*.log")}
        group = next((group for group in groups if not group[0] & names), None)
        if group is None:
            groups.append((set(), []))
            group = groups[-1]
        group[0].update(names)
        group[1].append(str(directory))
    return [members for _, members in groups]
