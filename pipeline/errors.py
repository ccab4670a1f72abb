"""Errors that end a run with exit code 2 and one clear message naming the path (and byte position)."""

from __future__ import annotations


class InputError(Exception):
    """Unusable input: a missing root, an unreadable file, a file of the wrong format."""

    def __init__(self, path: str, message: str, position: int | None = None) -> None:
        self.path = path
        self.position = position
        where = f"{path} at byte {position}" if position is not None else path
        super().__init__(f"{where}: {message}")
