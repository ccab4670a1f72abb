"""Workloads of the Java client: java/TransactionsV2.java compiled against the bundle's kafka-clients and run.

The Java client is the one that speaks Transactions V2 (KIP-890 part 2) to a broker that finalizes
transaction.version 2, so its transactions are the V2 half of the fixture.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.kafka_broker import jvm
from tests.kafka_broker.ledger import Ledger

SOURCE = Path(__file__).with_name("java") / "TransactionsV2.java"
MAIN = "TransactionsV2"


def compile_program(classes: Path) -> Path:
    classes.mkdir(parents=True, exist_ok=True)
    command = [jvm.java("javac") or "javac", "-d", str(classes), "-cp", jvm.classpath(), str(SOURCE)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"javac failed:\n{done.stderr[-3000:]}")
    return classes


def transactions_v2(bootstrap: str, ledger: Ledger, classes: Path, topic: str, source: str, partitions: list[str]):
    """Run every V2 workload; the broker's DescribeProducers answer for `partitions` goes into the ledger notes."""
    output = jvm.run(MAIN, bootstrap, topic, source, *partitions, timeout=300, extra_classpath=(classes,))
    document = json.loads(output.strip().splitlines()[-1])
    ledger.extend(document["entries"])
    ledger.notes["describe_producers"] = document["producers"]
