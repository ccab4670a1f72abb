"""`produce-audit run --input kafka://...` against the live broker, as a user of a managed cluster runs it: over the
SASL_PLAINTEXT listener with SCRAM-SHA-256, once with the right password and once with a wrong one, side by side,
while the broker still serves (before the session stops it and its log dir is audited)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.kafka_broker.audits import CLI

USER, PASSWORD = "audit", "audit-secret"
PASSWORD_VARIABLE = "PRODUCE_AUDIT_TEST_KAFKA_PASSWORD"


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    stderr: str
    warehouse: Path


@dataclass(frozen=True)
class WireRuns:
    uri: str
    audited: Outcome  # the right password
    refused: Outcome  # a wrong one


def wire_runs(sasl_bootstrap: str, home: Path) -> WireRuns:
    """Both runs, started together; each waits for the other's JVM start instead of after it."""
    home.mkdir(parents=True)
    conf = home / "wire.yaml"
    kafka = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_username": USER,
        "sasl_password_env": PASSWORD_VARIABLE,
    }
    conf.write_text(yaml.safe_dump({"kafka": kafka}))
    uri = f"kafka://{sasl_bootstrap}"
    started = {}
    for name, password in (("audited", PASSWORD), ("refused", "not-the-password")):
        warehouse = home / name / "wh"
        warehouse.parent.mkdir()
        command = [str(CLI), "run", "--input", uri, "--warehouse", str(warehouse), "--conf", str(conf)]
        log = warehouse.parent / "stderr.log"
        with log.open("wb") as stderr:
            process = subprocess.Popen(
                [*command, "--fail-on", "never"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env={**os.environ, PASSWORD_VARIABLE: password},
            )
        started[name] = (process, log, warehouse)
    outcomes = {}
    for name, (process, log, warehouse) in started.items():
        code = process.wait(timeout=900)
        outcomes[name] = Outcome(code, log.read_text(errors="replace"), warehouse)
    return WireRuns(uri, **outcomes)
