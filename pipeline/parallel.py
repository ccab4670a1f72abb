"""Independent Spark jobs run side by side from driver threads.

A small job leaves cores idle while the driver plans, schedules and commits it; a few jobs in flight at once
keep them busy. PySpark maps each Python thread to a JVM thread, and the scheduler shares the executors
between concurrent jobs, so this is safe for jobs that write different outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

CONCURRENT_JOBS = 4

Result = TypeVar("Result")


def side_by_side(tasks: Mapping[str, Callable[[], Result]]) -> dict[str, Result]:
    """Run every task, at most CONCURRENT_JOBS at a time; the first failure is raised once all have ended."""
    if len(tasks) <= 1:
        return {name: task() for name, task in tasks.items()}
    with ThreadPoolExecutor(max_workers=CONCURRENT_JOBS, thread_name_prefix="spark-job") as pool:
        futures = {name: pool.submit(task) for name, task in tasks.items()}
        return {name: future.result() for name, future in futures.items()}
