"""The installed `produce-audit run` over log dirs a real broker wrote, and the tables it left, as pandas."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from deltalake import DeltaTable

CLI = Path(sys.executable).parent / "produce-audit"
NOT_INFO = ("WARN", "ERROR", "CRITICAL")
TABLES = ("findings", "transactions", "producer_state", "partition_summary", "batches", "global_transactions")


@dataclass(frozen=True)
class Audit:
    tables: dict[str, pd.DataFrame]

    def findings(self, *, above_info: bool = False) -> pd.DataFrame:
        findings = self.tables["findings"]
        return findings[findings.severity.isin(NOT_INFO)] if above_info else findings

    def topics(self, keep) -> Audit:
        """The rows of the topics `keep(topic)` accepts."""
        return Audit({name: frame[frame.topic.map(keep)] for name, frame in self.tables.items()})


def audits(runs: list[tuple[list[Path | tuple[str, Path]], Path]], conf: Path | None = None) -> list[Audit]:
    """`produce-audit run` over each (inputs, warehouse), all at once: each spends much of its time starting a JVM
    and Spark, which the others fill. An input is a path, or (cluster id, path) for `--cluster-input`. `conf`: a
    config file layered over the shipped one."""
    started = []
    for inputs, warehouse in runs:
        command = [str(CLI), "run", "--warehouse", str(warehouse), "--fail-on", "never"]
        if conf is not None:
            command += ["--conf", str(conf)]
        for path in inputs:
            command += ["--cluster-input", path[0], str(path[1])] if isinstance(path, tuple) else ["--input", str(path)]
        log = warehouse.parent / "stderr.log"  # a file, not a pipe: no run waits for another's output to be read
        with log.open("wb") as stderr:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        started.append((process, log, warehouse))
    done = []
    try:
        for process, log, warehouse in started:
            assert process.wait(timeout=1800) == 0, log.read_text(errors="replace")[-3000:]
            done.append(read_audit(warehouse))
    finally:
        for process, _, _ in started:  # the others' when one failed
            if process.poll() is None:
                process.kill()
    return done


def read_audit(warehouse: Path) -> Audit:
    return Audit({name: DeltaTable(str(warehouse / name)).to_pandas() for name in TABLES})
