"""spark-submit entry point: `produce-audit audit`, audit the batches table of a warehouse.

Usage: spark-submit [OPTIONS] jobs/audit.py [ARGS]  (ARGS as for the CLI; see ./spark-submit.sh)
"""

import sys

from pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["audit", *sys.argv[1:]]))
