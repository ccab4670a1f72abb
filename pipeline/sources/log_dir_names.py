"""How Kafka names what it writes in a log dir (spec §1.2): partition dirs, segment files, `meta.properties`.

The one copy every reader uses, so a directory one reader takes for a partition is never one another ignores.
"""

from __future__ import annotations

import re

META_PROPERTIES = "meta.properties"
SEGMENT_FILE = re.compile(r"(?P<base_offset>\d{20})\.log")
# `<topic>-<partition>`, and the renamed dir of a partition being deleted, moved to another log dir or left behind:
# `<topic>-<partition>.<unique id>-delete|-future|-stray` (UnifiedLog.logDeleteDirName, logFutureDirName,
# logStrayDirName). Whether such dirs are read at all is `ingest.skip_dir_suffixes`.
PARTITION_DIR = re.compile(r"(?P<topic>.+)-(?P<partition>\d+)(?:\.\w+-(?P<suffix>delete|future|stray))?")
