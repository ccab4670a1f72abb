"""The broker's own `kafka-dump-log` text of every segment of a log dir (DumpLogSegments from the bundle).

Each topic kind is dumped with the decoder an operator would use: `--transaction-log-decoder` for
`__transaction_state`, `--offsets-decoder` for `__consumer_offsets`, plain deep iteration for the rest.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.kafka_broker import jvm

MAIN = "kafka.tools.DumpLogSegments"
DECODERS = {"__transaction_state": ["--transaction-log-decoder"], "__consumer_offsets": ["--offsets-decoder"]}


def dump_log_dir(log_dir: Path, out: Path) -> list[Path]:
    """Write one text file per topic kind into `out` and return them."""
    groups: dict[str, list[Path]] = {}
    for segment in sorted(log_dir.glob("*-*/*.log")):
        topic = segment.parent.name.rsplit("-", 1)[0]
        groups.setdefault(topic if topic in DECODERS else "topics", []).append(segment)
    out.mkdir(parents=True, exist_ok=True)

    def dump(name: str) -> Path:
        files = ",".join(str(s) for s in groups[name])
        text = jvm.run(MAIN, "--deep-iteration", "--print-data-log", *DECODERS.get(name, []), "--files", files)
        path = out / f"{name.strip('_')}.txt"
        path.write_text(text)
        return path

    with ThreadPoolExecutor(max(len(groups), 1)) as tools:  # the kinds at once: each JVM mostly starts up
        return list(tools.map(dump, sorted(groups)))
