"""Crash safety, measured: SIGKILL `run` at random moments and check that readers never see a half-written run.

    python benchmarks/crash_suite.py [--kills 20] [--seed 1] [--work DIR]

The installed `produce-audit` command runs on the bundled sample with the shipped defaults. One uninterrupted
run on its own warehouse gives the expected tables and the time a run takes. A second warehouse gets one
complete run, then `--kills` runs (`--full`, so every step rewrites its tables) each killed with SIGKILL, with
its whole process group, after a random delay between 0 and 1.1 times that duration. After every kill:

- every table of the warehouse loads (delta-rs, latest version);
- the audit tables at the versions of the last published run equal the expected ones (run ids aside): a
  reader sees the previous complete run, never the killed one.

The next killed run takes the dead run's lock over and rolls its commits back before doing its own work. A
final uninterrupted run must give the expected tables again and leave no lock, staging or scratch folder.
Rewrites the crash section of RELIABILITY.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from deltalake import DeltaTable

REPO = Path(__file__).resolve().parent.parent
RELIABILITY_MD = REPO / "RELIABILITY.md"
CLI = Path(sys.executable).parent / "produce-audit"
START, END = "<!-- crash-suite:start -->", "<!-- crash-suite:end -->"
AUDIT_TABLES = ("findings", "transactions", "producer_state", "partition_summary")


def _run(root: Path, warehouse: Path, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [str(CLI), "run", "--input", str(root), "--warehouse", str(warehouse), *extra],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )


def _published(warehouse: Path) -> dict:
    runs = DeltaTable(str(warehouse / "runs")).to_pyarrow_table().to_pylist()
    return max((run for run in runs if run["table_versions"]), key=lambda run: run["finished_at"])


def _published_rows(warehouse: Path) -> dict[str, list[str]]:
    versions = dict(_published(warehouse)["table_versions"])
    rows = {}
    for table in AUDIT_TABLES:
        data = DeltaTable(str(warehouse / table), version=versions[table]).to_pyarrow_table().drop(["run_id"])
        rows[table] = sorted(json.dumps(row, sort_keys=True, default=str) for row in data.to_pylist())
    return rows


def _commits(warehouse: Path) -> dict[str, int]:
    return {
        path.parent.parent.name: len(list(path.parent.glob("*.json")))
        for path in warehouse.glob("*/_delta_log/00000000000000000000.json")
    }


def _all_tables_load(warehouse: Path) -> bool:
    for log in warehouse.glob("*/_delta_log"):
        DeltaTable(str(log.parent)).to_pyarrow_table()
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args(argv)
    from pipeline.samples import generate

    work = args.work or Path(tempfile.mkdtemp(prefix="crash-suite-"))
    root = generate(work / "sample")
    expected_wh, warehouse = work / "expected", work / "killed"
    started = time.monotonic()
    baseline = _run(root, expected_wh)
    assert baseline.wait() == 1, baseline.stderr.read()[-3000:]
    duration = time.monotonic() - started
    expected = _published_rows(expected_wh)
    first = _run(root, warehouse)
    assert first.wait() == 1, first.stderr.read()[-3000:]

    rng = random.Random(args.seed)
    kills = []
    for index in range(args.kills):
        before = _commits(warehouse)
        delay = rng.uniform(0, 1.1 * duration)
        process = _run(root, warehouse, "--full")
        time.sleep(delay)
        finished = process.poll() is not None
        if not finished:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        after = _commits(warehouse)
        changed = sorted(table for table, count in after.items() if count > before.get(table, 0))
        kill = {
            "index": index,
            "delay_s": round(delay, 1),
            "killed": not finished,
            "exit": process.returncode,
            "tables_committed": changed,
            "lock_left": (warehouse / "_lock").exists(),
            "tables_load": _all_tables_load(warehouse),
            "readers_see_complete_run": _published_rows(warehouse) == expected,
        }
        kills.append(kill)
        print(json.dumps(kill), flush=True)

    final = _run(root, warehouse, "--full")
    final_code = final.wait()
    final_ok = (
        final_code == 1
        and _published_rows(warehouse) == expected
        and not (warehouse / "_lock").exists()
        and not (warehouse / "_scratch").exists()
        and not list(warehouse.glob("*/_staging"))
    )
    _write_report(kills, duration, final_code, final_ok)
    ok = final_ok and all(k["tables_load"] and k["readers_see_complete_run"] for k in kills)
    print(json.dumps({"kills": len(kills), "all_consistent": ok, "written": str(RELIABILITY_MD)}))
    return 0 if ok else 1


def _write_report(kills: list[dict], duration: float, final_code: int, final_ok: bool) -> None:
    killed = [k for k in kills if k["killed"]]
    mid_run = [k for k in killed if k["tables_committed"]]
    lines = [
        START,
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} with `python benchmarks/crash_suite.py` "
        f"on {os.cpu_count()} cores ({platform.machine()}, load {os.getloadavg()[0]:.1f} at the end); the sample, "
        f"an uninterrupted run taking {duration:.0f} s.",
        "",
        f"- {len(killed)} of {len(kills)} runs killed with SIGKILL ({len(kills) - len(killed)} had finished before "
        f"their delay); {len(mid_run)} of the killed runs had committed some tables, so they died between commits.",
        f"- Every table loaded after every kill: {all(k['tables_load'] for k in kills)}.",
        "- Readers (the audit tables at the last published versions) saw the previous complete run after every "
        f"kill: {all(k['readers_see_complete_run'] for k in kills)}.",
        f"- The final uninterrupted run: exit {final_code}; tables identical to an uninterrupted run on a fresh "
        f"warehouse (run ids aside), no lock, staging or scratch folder left: {final_ok}.",
        "",
        "| # | killed after (s) | killed | tables the killed run had committed | lock left | readers on complete run |",
        "|---|---|---|---|---|---|",
        *(
            f"| {k['index']} | {k['delay_s']} | {'yes' if k['killed'] else 'finished'} | "
            f"{', '.join(k['tables_committed']) or '-'} | {'yes' if k['lock_left'] else 'no'} | "
            f"{'yes' if k['readers_see_complete_run'] else '**no**'} |"
            for k in kills
        ),
        END,
    ]
    text = RELIABILITY_MD.read_text() if RELIABILITY_MD.exists() else f"# Reliability\n\n{START}\n{END}\n"
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    RELIABILITY_MD.write_text(head + "\n".join(lines) + tail)


if __name__ == "__main__":
    sys.exit(main())
