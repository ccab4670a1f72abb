"""spark-submit entry point: `produce-audit report`, summarise an audit run.

Usage: spark-submit [OPTIONS] jobs/report.py [ARGS]  (ARGS as for the CLI; see ./spark-submit.sh)
"""

import sys

from pipeline.cli import main

if __name__ == "__main__":
    sys.exit(main(["report", *sys.argv[1:]]))
