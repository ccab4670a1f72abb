"""spark-submit entry point: `produce-audit run`, ingest, audit and report in one go.

Usage: spark-submit [OPTIONS] jobs/run.py [ARGS]  (ARGS as for the CLI; see ./spark-submit.sh)
"""

import sys

from pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
