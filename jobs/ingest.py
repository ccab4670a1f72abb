"""spark-submit entry point: `produce-audit ingest`, load Kafka log roots into the batches table.

Usage: spark-submit [OPTIONS] jobs/ingest.py [ARGS]  (ARGS as for the CLI; see ./spark-submit.sh)
"""

import sys

from pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["ingest", *sys.argv[1:]]))
