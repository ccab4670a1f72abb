"""The warehouse lock: one writer at a time, stale locks of dead runs taken over, never two holders."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.tables.lock import (
    HEARTBEAT_SECONDS,
    LOCK_FILE,
    Holder,
    WarehouseLock,
    WarehouseLockedError,
    this_machine,
)


def _write_holder(warehouse: Path, **fields) -> Path:
    holder = {
        "run_id": "20260101T000000Z-dead00",
        "command": "run",
        "host": "elsewhere",
        "machine": "elsewhere:boot:1",
        "pid": 1,
        "started_at": "2026-01-01T00:00:00Z",
    }
    holder.update(fields)
    path = warehouse / LOCK_FILE
    warehouse.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(holder))
    return path


def _age(path: Path, seconds: float) -> None:
    moment = time.time() - seconds
    os.utime(path, (moment, moment))


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_second_writer_fails_naming_the_holder(tmp_path):
    with WarehouseLock(str(tmp_path), "20260101T000000Z-aaaaaa", "run"), pytest.raises(WarehouseLockedError) as raised:
        WarehouseLock(str(tmp_path), "20260101T000001Z-bbbbbb", "audit").acquire()
    message = str(raised.value)
    assert "20260101T000000Z-aaaaaa" in message and f"pid {os.getpid()}" in message
    assert "\n" not in message


def test_release_removes_the_lock_and_lets_the_next_writer_in(tmp_path):
    with WarehouseLock(str(tmp_path), "first", "run"):
        assert (tmp_path / LOCK_FILE).exists()
    assert not (tmp_path / LOCK_FILE).exists()
    with WarehouseLock(str(tmp_path), "second", "run") as lock:
        assert Holder(**json.loads((tmp_path / LOCK_FILE).read_text())) == lock.holder


def test_the_lock_of_a_dead_process_on_this_machine_is_taken_over(tmp_path):
    _write_holder(tmp_path, machine=this_machine(), pid=_dead_pid())
    with WarehouseLock(str(tmp_path), "taker", "run"):
        assert json.loads((tmp_path / LOCK_FILE).read_text())["run_id"] == "taker"


def test_a_live_process_keeps_its_lock_whatever_its_age(tmp_path):
    path = _write_holder(tmp_path, machine=this_machine(), pid=os.getpid())
    _age(path, 60)
    with pytest.raises(WarehouseLockedError):
        WarehouseLock(str(tmp_path), "taker", "run").acquire()


def test_another_machine_keeps_its_lock_while_its_heartbeat_is_fresh(tmp_path):
    path = _write_holder(tmp_path)
    _age(path, 30)
    with pytest.raises(WarehouseLockedError):
        WarehouseLock(str(tmp_path), "taker", "run", stale_after=300).acquire()


def test_another_machine_loses_its_lock_when_its_heartbeat_stopped(tmp_path):
    path = _write_holder(tmp_path)
    _age(path, 301)
    with WarehouseLock(str(tmp_path), "taker", "run", stale_after=300):
        assert json.loads(path.read_text())["run_id"] == "taker"


@pytest.mark.parametrize("content, age, stale", [("", 5, False), ("{not json", HEARTBEAT_SECONDS + 5, True)])
def test_an_unreadable_lock_is_stale_only_once_a_heartbeat_would_have_come(tmp_path, content, age, stale):
    path = tmp_path / LOCK_FILE
    path.write_text(content)
    _age(path, age)
    lock = WarehouseLock(str(tmp_path), "taker", "run")
    if stale:
        lock.acquire()
        lock.release()
    else:
        with pytest.raises(WarehouseLockedError):
            lock.acquire()


def test_release_leaves_a_lock_another_run_took_over(tmp_path):
    lock = WarehouseLock(str(tmp_path), "slow", "run")
    lock.acquire()
    _write_holder(tmp_path, run_id="newer")  # as if "slow" had been judged stale and taken over
    lock.release()
    assert json.loads((tmp_path / LOCK_FILE).read_text())["run_id"] == "newer"


def _contend(warehouse: str, index: int, spans) -> None:
    for attempt in range(200):
        try:
            with WarehouseLock(warehouse, f"run-{index}-{attempt}", "run"):
                started = time.time()
                time.sleep(0.05)
                spans.append((started, time.time()))
                return
        except WarehouseLockedError:
            time.sleep(0.01)


def test_processes_racing_for_the_lock_never_hold_it_together(tmp_path):
    with multiprocessing.Manager() as manager:
        spans = manager.list()
        workers = [multiprocessing.Process(target=_contend, args=(str(tmp_path), i, spans)) for i in range(8)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        held = sorted(spans)
    assert len(held) == 8
    for (_, end), (start, _) in zip(held, held[1:], strict=False):
        assert start >= end


def test_racing_takeovers_of_one_stale_lock_leave_one_holder(tmp_path):
    with multiprocessing.Manager() as manager:
        spans = manager.list()
        _write_holder(tmp_path, machine=this_machine(), pid=_dead_pid())
        workers = [multiprocessing.Process(target=_contend, args=(str(tmp_path), i, spans)) for i in range(6)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
        held = sorted(spans)
    assert len(held) == 6
    for (_, end), (start, _) in zip(held, held[1:], strict=False):
        assert start >= end
