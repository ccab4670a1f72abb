"""One writer per warehouse: `<warehouse>/_lock` names the run that holds it.

Two runs writing one warehouse would replace each other's rows and could publish a mix, so every command that
writes tables (ingest, audit, run, vacuum) takes the lock first and a second one fails at once with a message
naming the holder. The holder refreshes the file's modification time while it runs (a heartbeat). A lock whose
process is gone (same machine, pid no longer running) or whose heartbeat stopped long ago is stale: the next
run takes it over, after which it rolls the tables back to their last published versions
(pipeline.tables.publication).

On a local or POSIX filesystem the file is created with O_EXCL, and a stale one is removed under an advisory
lock on the warehouse folder only while it still names the stale run, so two runs can never both hold it. Object
stores without conditional writes get a best-effort lock: write, wait, read back.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

import pyarrow.fs as pafs

from pipeline.errors import InputError
from pipeline.tables.files import filesystem, is_uri

log = logging.getLogger(__name__)

LOCK_FILE = "_lock"
HEARTBEAT_SECONDS = 20.0
STALE_AFTER_SECONDS = 300.0  # a heartbeat older than this means the holder is gone, wherever it ran
_SETTLE_SECONDS = 1.0  # object stores: how long a written lock must stay ours before it counts


class WarehouseLockedError(InputError):
    """Another live run holds the warehouse."""


@dataclass(frozen=True)
class Holder:
    run_id: str
    command: str
    host: str
    machine: str  # host, boot and pid namespace: pids are comparable only within one
    pid: int
    started_at: str

    def describe(self) -> str:
        return f"run {self.run_id} ({self.command}, pid {self.pid} on {self.host}, since {self.started_at})"


def this_machine() -> str:
    """Host name, boot id and pid namespace, where the system has them."""
    parts = [socket.gethostname()]
    with suppress(OSError):
        parts.append(Path("/proc/sys/kernel/random/boot_id").read_text().strip())
    with suppress(OSError):
        parts.append(str(os.stat("/proc/self/ns/pid").st_ino))
    return ":".join(parts)


class WarehouseLock:
    """Context manager holding `<warehouse>/_lock` for one command."""

    def __init__(self, warehouse: str, run_id: str, command: str, stale_after: float = STALE_AFTER_SECONDS) -> None:
        self.warehouse = warehouse.rstrip("/")
        self.location = f"{self.warehouse}/{LOCK_FILE}"
        self.stale_after = stale_after
        self.holder = Holder(
            run_id=run_id,
            command=command,
            host=socket.gethostname(),
            machine=this_machine(),
            pid=os.getpid(),
            started_at=datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        )
        self._files, self._path = filesystem(self.location)
        self._local = not is_uri(self.warehouse)
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None

    def __enter__(self) -> WarehouseLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None):
        self.release()

    def acquire(self) -> None:
        for _ in range(3):  # a takeover that loses a race to another run starts over
            if self._create():
                self._start_heartbeat()
                return
            current = self._read()
            if current is not None and current.run_id == self.holder.run_id:
                raise InputError(self.location, "this run already holds the lock")
            age = self._age()
            if age is None:  # released meanwhile: try to create it again, never move what may be another's now
                continue
            reason = self._stale_reason(current, age)
            if reason is None:
                holder = current.describe() if current is not None else "a run that is writing its lock file"
                raise WarehouseLockedError(
                    self.warehouse,
                    f"locked by {holder}; wait for it to end (if that process is gone, the lock "
                    f"is taken over once its heartbeat is {self.stale_after:.0f} s old, or remove {self.location})",
                )
            log.warning("taking over the lock of %s: %s", current.describe() if current else "an unknown run", reason)
            self._discard_stale(current)
        raise WarehouseLockedError(self.warehouse, "other runs keep taking the lock; try again")

    def release(self) -> None:
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
            self._heartbeat = None
        current = self._read()
        if current is not None and current.run_id == self.holder.run_id:
            self._files.delete_file(self._path)

    def _create(self) -> bool:
        data = json.dumps(asdict(self.holder), sort_keys=True).encode()
        if self._local:
            os.makedirs(os.path.dirname(self._path), exist_ok=True)
            try:
                handle = os.open(self._path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(handle, "wb") as out:
                out.write(data)
            return True
        if self._files.get_file_info(self._path).type != pafs.FileType.NotFound:
            return False
        with self._files.open_output_stream(self._path) as out:
            out.write(data)
        time.sleep(_SETTLE_SECONDS)
        current = self._read()
        return current is not None and current.run_id == self.holder.run_id

    def _read(self, path: str | None = None) -> Holder | None:
        path = path or self._path
        try:
            with self._files.open_input_stream(path) as stream:
                return Holder(**json.loads(stream.read().decode()))
        except (FileNotFoundError, ValueError, TypeError, UnicodeDecodeError):
            return None
        except OSError as exc:
            if self._files.get_file_info(path).type == pafs.FileType.NotFound:
                return None
            raise InputError(self.location, f"cannot read the warehouse lock: {exc}") from None

    def _age(self) -> float | None:
        info = self._files.get_file_info(self._path)
        if info.type == pafs.FileType.NotFound or info.mtime is None:
            return None
        return time.time() - info.mtime.timestamp()

    def _stale_reason(self, current: Holder | None, age: float) -> str | None:
        if current is None:  # torn or foreign content: the writer died between create and write
            return "its content is unreadable" if age > HEARTBEAT_SECONDS else None
        if current.machine == self.holder.machine and not _running(current.pid):
            return f"process {current.pid} is no longer running"
        if age > self.stale_after:
            return f"its heartbeat stopped {age:.0f} s ago"
        return None

    def _discard_stale(self, stale: Holder | None) -> None:
        """Remove the stale lock file, and nothing a live run put in its place.

        On a local or POSIX filesystem takeovers take turns (an advisory lock on the warehouse folder, which the
        system releases when a process dies), and each removes the file only if it still names the stale run and
        is still stale: two runs judging one lock stale can then never remove the lock the first of them took
        next. Elsewhere the file is moved aside, and put back if what moved was a lock another run had just taken
        in its place.
        """
        if self._local:
            with _one_at_a_time(self.warehouse):
                current, age = self._read(), self._age()
                if age is not None and _same_run(current, stale) and self._stale_reason(current, age) is not None:
                    with suppress(FileNotFoundError):
                        self._files.delete_file(self._path)
            return
        aside = f"{self._path}.stale-{secrets.token_hex(4)}"
        try:
            self._files.move(self._path, aside)
        except OSError:
            return  # another run moved it first; the next create decides
        moved = self._read(aside)
        if moved is not None and not _same_run(moved, stale):
            with suppress(OSError):
                self._files.move(aside, self._path)
        with suppress(OSError):
            self._files.delete_file(aside)

    def _start_heartbeat(self) -> None:
        self._stop.clear()
        self._heartbeat = threading.Thread(target=self._beat, name="warehouse-lock-heartbeat", daemon=True)
        self._heartbeat.start()

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_SECONDS):
            try:
                if self._local:
                    os.utime(self._path)
                else:
                    with self._files.open_output_stream(self._path) as out:
                        out.write(json.dumps(asdict(self.holder), sort_keys=True).encode())
            except OSError as exc:
                log.warning("could not refresh the warehouse lock %s: %s", self.location, exc)


def _same_run(current: Holder | None, stale: Holder | None) -> bool:
    """Whether the lock file read now is the stale one (an unreadable file stays unreadable)."""
    return current.run_id == stale.run_id if current is not None and stale is not None else current is stale


@contextmanager
def _one_at_a_time(folder: str) -> Iterator[None]:
    """An exclusive advisory lock on `folder` (flock) while the block runs."""
    handle = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
