"""Detail lines for the parts of a step (a listing, each table written): what was done, how much, how fast, in how
long. They are logged at DEBUG: at INFO a run says once per major step that it ended (pipeline.cli,
pipeline.ingest, pipeline.audit_step, pipeline.report_step), since a line per table tells someone reading a nightly
log nothing to act on.

The numbers come from what a step already knows (a listing, a Delta log's file statistics, an aggregate the
report computed); measuring progress never starts a Spark job of its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Step:
    """A running step; set `count` (and `unit`) once known, and `detail` for anything else worth saying."""

    what: str
    count: int | None = None
    unit: str = "rows"
    detail: str = ""
    started: float = field(default_factory=time.monotonic)

    def describe(self) -> str:
        elapsed = time.monotonic() - self.started
        done = f"{self.what}: done in {elapsed:.1f} s"
        if self.count is not None:
            rate = f", {self.count / elapsed:,.0f} {self.unit}/s" if elapsed > 0 else ""
            done = f"{self.what}: {self.count:,} {self.unit} in {elapsed:.1f} s{rate}"
        return f"{done} ({self.detail})" if self.detail else done


@contextmanager
def timed(log: logging.Logger, what: str) -> Iterator[Step]:
    """Log `what` at DEBUG when it starts and, with its count, rate and elapsed time, when it ends without an
    error."""
    step = Step(what)
    log.debug("%s ...", what)
    yield step
    log.debug("%s", step.describe())
