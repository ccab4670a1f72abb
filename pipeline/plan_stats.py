"""What the driver spent on each Spark plan: planning time, plan nodes and serialized plan size.

Plans are the audit's fixed cost: a plan that grows with the number of rules or inputs makes the driver slow
and, past a few MiB per task, runs it out of memory. Every plan the audit executes is measured here before it
runs; the totals are logged and recorded in the run's `runs.counts` (`plan.*`), so a regression shows in
every run. The serialized size is that of the physical plan, the bulk of what a task binary carries.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from pyspark.sql import DataFrame

log = logging.getLogger(__name__)


@dataclass
class PlanStats:
    plans: int = 0
    planning_ms: int = 0
    max_nodes: int = 0
    max_bytes: int = 0
    largest: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def measure(self, df: DataFrame, name: str) -> None:
        """Plan `df` now (analysis, optimisation, physical planning) and record what that cost."""
        started = time.perf_counter()
        plan = df._jdf.queryExecution().executedPlan()
        elapsed_ms = int((time.perf_counter() - started) * 1000)
        nodes = len(plan.treeString().splitlines())
        size = _serialized_size(df, plan)
        with self._lock:  # plans are measured from concurrent threads
            self.plans += 1
            self.planning_ms += elapsed_ms
            self.max_nodes = max(self.max_nodes, nodes)
            if size > self.max_bytes:
                self.max_bytes, self.largest = size, name
        log.debug("plan %s: %d nodes, %d bytes, planned in %d ms", name, nodes, size, elapsed_ms)

    def counts(self) -> dict[str, int]:
        """For `runs.counts`."""
        return {
            "plan.plans": self.plans,
            "plan.planning_ms": self.planning_ms,
            "plan.max_nodes": self.max_nodes,
            "plan.max_bytes": self.max_bytes,
        }

    def describe(self) -> str:
        return (
            f"{self.plans} plans, {self.planning_ms / 1000:.1f} s of planning, largest {self.max_nodes} nodes, "
            f"{self.max_bytes / 1024:.0f} KiB serialized ({self.largest})"
        )


def _serialized_size(df: DataFrame, plan) -> int:
    jvm = df.sparkSession._jvm
    serializer = jvm.org.apache.spark.SparkEnv.get().closureSerializer().newInstance()
    return int(serializer.serialize(plan, jvm.scala.reflect.ClassTag.apply(plan.getClass())).limit())
