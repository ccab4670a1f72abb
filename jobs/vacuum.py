"""spark-submit entry point: `produce-audit vacuum`, delete files no kept table version reads.

Usage: spark-submit [OPTIONS] jobs/vacuum.py [ARGS]  (ARGS as for the CLI; see ./spark-submit.sh)
"""

import sys

from pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["vacuum", *sys.argv[1:]]))
