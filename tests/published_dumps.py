"""The published `kafka-dump-log` excerpts of ../shared/realdata/dumplog-text: what each holds besides dump lines."""

from __future__ import annotations

from pathlib import Path

# Shell prompts, continuation lines, `...`/`# ...` elisions and prose of each published excerpt.
EXPECTED_UNKNOWN_LINES = {
    "ableasdale-kafka-transactions-README-01.txt": 0,
    "ableasdale-kafka-transactions-README-02.txt": 1,
    "ableasdale-kafka-transactions-README-03.txt": 1,
    "ableasdale-kafka-transactions-README-04.txt": 1,
    "ableasdale-kafka-transactions-README-05.txt": 1,
    "ableasdale-kafka-transactions-README-06.txt": 1,
    "ableasdale-kafka-transactions-README-07.txt": 1,
    "ableasdale-kafka-transactions-README-08.txt": 1,
    "ableasdale-kafka-transactions-README-09.txt": 0,
    "ableasdale-kafka-transactions-README-10.txt": 1,
    "ableasdale-kafka-transactions-README-11.txt": 1,
    "ableasdale-kafka-transactions-README-12.txt": 1,
    "ableasdale-kafka-transactions-README-13.txt": 0,
    "faderskd-blog-2023-11-29-kafka-transactions-01.txt": 2,
    "faderskd-blog-2023-11-29-kafka-transactions-02.txt": 2,
    "faderskd-blog-2023-11-29-kafka-transactions-03.txt": 1,
    "fvaleri-strimzi-debugging-session001-2320da94-L89.txt": 1,
    "fvaleri-strimzi-debugging-session001-72cfd1de-L105.txt": 2,
    "fvaleri-strimzi-debugging-session001-8d3e0715-L142.txt": 1,
    "fvaleri-strimzi-debugging-session001-97f8afad-L85.txt": 1,
    "fvaleri-strimzi-debugging-session008-5f15e509-L93.txt": 2,
    "fvaleri-strimzi-debugging-session008-63aadccc-L104.txt": 4,
    "fvaleri-strimzi-debugging-session008-e7fa2b0a-L51.txt": 4,
    "fvaleri-strimzi-debugging-session010-01.txt": 2,
    "fvaleri-strimzi-debugging-session010-02.txt": 4,
    "fvaleri-strimzi-debugging-session010-03.txt": 2,
    "klog-readSnapshotFromKafka2Dump-L28.txt": 0,
    "klog-readSnapshotFromKafka3Dump-L44.txt": 0,
    "klog-testWithDeepIterationWithControlRecords-L167.txt": 0,
    "klog-testWithTransactionLogDecoder-L204.txt": 0,
    "strimzi-blog-2023-05-03-kafka-transactions-01.txt": 6,
    "strimzi-blog-2023-05-03-kafka-transactions-02.txt": 2,
}
# The published file without a `Dumping` line: read_dumplog refuses it, parse_dump still reads it.
HEADERLESS_DUMP = "ableasdale-kafka-transactions-README-13.txt"


def dump_text(realdata: Path, name: str) -> str:
    return (realdata / "dumplog-text" / name).read_text(encoding="utf-8", errors="replace")
