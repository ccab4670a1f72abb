"""`python -m tests.kafka_broker --out DIR`: run the broker and every workload once and keep what it wrote.

DIR/broker/data is the broker's log dir (audit it with `produce-audit run --input DIR/broker/data`),
DIR/dumps its kafka-dump-log text, DIR/ledger.json what the clients saw.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tests.kafka_broker import jvm
from tests.kafka_broker.session import run_all


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.kafka_broker", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="a directory that does not exist yet")
    args = parser.parse_args()
    reason = jvm.missing()
    if reason:
        print(f"cannot run the broker: {reason}", file=sys.stderr)
        return 2
    if args.out.exists():
        print(f"{args.out} exists; give a new directory", file=sys.stderr)
        return 2
    fixture = run_all(args.out)
    print(f"log dir {fixture.log_dir}\ndumps {fixture.dumps}\nledger {fixture.ground_truth}")
    print(f"{fixture.seconds:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
