"""Hostile bytes and text never crash or hang a decoder: the seeded CI subset of benchmarks/fuzz_suite.py.

Every decoder kind (segments, batch records, `__transaction_state` segments and records, producer snapshots,
`.txnindex`, `.index`/`.timeindex`, checkpoints, `partition.metadata`, kafka-dump-log text) gets a few hundred
mutations of its real seeds from ../shared/realdata (the segment kinds also of the bundled samples), through the
same case runner as the benchmark: no exception but the decoder's own, no case over its time limit, and output
that keeps the decoder's contract (rows load into their tables, positions inside the input, streaming equals
whole). The first tests show the runner does report each kind of failure.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
REALDATA = (REPO.parent / "shared" / "realdata").resolve()
sys.path.insert(0, str(REPO / "benchmarks"))  # the benchmark's modules, shared rather than copied

from fuzz_targets import Seed, Target, fits, load_targets, run_cases  # noqa: E402

from schemas.txn_index import TXN_INDEX  # noqa: E402

KINDS = (
    "segment",
    "records",
    "transaction_state_segment",
    "coordinator_record",
    "snapshot",
    "txnindex",
    "offset_index",
    "time_index",
    "leader_epoch_checkpoint",
    "offset_checkpoint",
    "partition_metadata",
    "dumplog",
)
CASES_PER_KIND = 400
SECONDS_PER_CASE = 20
SEED = 20261125


@pytest.fixture(scope="module")
def targets() -> dict[str, Target]:
    samples = sorted((REPO / "samples").rglob("*.log"))
    return {target.kind: target for target in load_targets(REALDATA if REALDATA.is_dir() else None, samples)}


def _target(run) -> Target:
    unchanged = lambda seed, rng: ("none", seed.data)  # noqa: E731
    return Target("probe", "a stand-in decoder", [Seed("probe", b"\x00" * 8)], unchanged, run)


def test_the_runner_reports_crashes_hangs_and_malformed_output():
    def crash(seed, data, rng):
        raise KeyError("position")

    def hang(seed, data, rng):
        while True:
            time.sleep(0.01)

    def malformed(seed, data, rng):
        fits([{"position": 2**63}], TXN_INDEX, "txn_index")

    outcomes = {}
    for name, run, seconds in (("crash", crash, 10), ("hang", hang, 0.2), ("malformed", malformed, 10)):
        tally = run_cases(_target(run), 2, random.Random(1), seconds)
        outcomes[name] = [(failure.outcome, failure.seed, failure.mutation) for failure in tally.failures]
    assert outcomes == {name: [(name, "probe", "none")] * 2 for name in ("crash", "hang", "malformed")}
    assert "KeyError" in run_cases(_target(crash), 1, random.Random(1), seconds=1).failures[0].error


def test_every_decoder_kind_has_seeds(targets):
    if not REALDATA.is_dir():
        pytest.skip(f"real Kafka data not found at {REALDATA} (it lives in ../shared/realdata beside the repo)")
    assert sorted(targets) == sorted(KINDS)
    assert all(target.seeds for target in targets.values())


@pytest.mark.parametrize("kind", KINDS)
def test_mutated_inputs_decode_without_crash_hang_or_malformed_output(targets, kind):
    if kind not in targets:
        pytest.skip(f"real Kafka data not found at {REALDATA} (it lives in ../shared/realdata beside the repo)")
    tally = run_cases(targets[kind], CASES_PER_KIND, random.Random(f"{SEED}:{kind}"), SECONDS_PER_CASE)
    assert tally.inputs == CASES_PER_KIND
    assert [f"{f.outcome}: {f.seed} {f.mutation}: {f.error}" for f in tally.failures] == []
