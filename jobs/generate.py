"""Entry point of `produce-audit generate`: write a generated Kafka log root (no Spark involved).

Usage: python jobs/generate.py --out DIR --batches N [OPTIONS]  (OPTIONS as for the CLI; see --help)
"""

import sys

from pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["generate", *sys.argv[1:]]))
