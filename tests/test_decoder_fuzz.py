"""Hostile bytes never crash or hang the segment decoder: seeded mutations of real and sample segments
(bit flips, extreme length fields, cuts, inserted and zeroed spans, trailing garbage) all decode to rows that
say what was found, and streaming the file in small windows gives the same rows as decoding it whole."""

from __future__ import annotations

import io
import random
import signal
import struct
from pathlib import Path

import pyarrow as pa
import pytest

from pipeline.sources.kafka_format import decode_segment, iter_decoded
from schemas.batches import STATUS_BAD_MAGIC, STATUS_LEGACY, STATUS_OK, STATUS_TOO_SMALL, STATUS_TRUNCATED

REPO = Path(__file__).resolve().parent.parent
STATUSES = {STATUS_OK, STATUS_LEGACY, STATUS_TRUNCATED, STATUS_TOO_SMALL, STATUS_BAD_MAGIC}
MUTATIONS_PER_SEGMENT = 60
SECONDS_PER_CASE = 20


def _segments(realdata_root: Path | None) -> list[tuple[str, bytes]]:
    paths = sorted((REPO / "samples").rglob("*.log"))
    if realdata_root is not None:
        paths += sorted((realdata_root / "broker-segments").rglob("*.log"))[:12]
    return [(str(path), path.read_bytes()) for path in paths if path.stat().st_size > 0]


def _mutate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    buffer = bytearray(data)
    kind = rng.choice(["flip", "length", "cut", "insert", "zero", "garbage"])
    at = rng.randrange(len(buffer))
    if kind == "flip":
        buffer[at] ^= 1 << rng.randrange(8)
    elif kind == "length":  # batch lengths sit at offset 8 of an entry; hit one or any 4 bytes
        value = rng.choice([0, -1, 13, 60, 2**31 - 1, -(2**31), rng.randrange(-(2**31), 2**31)])
        at = min(at, len(buffer) - 4)
        struct.pack_into(">i", buffer, at, value)
    elif kind == "cut":
        del buffer[at:]
    elif kind == "insert":
        buffer[at:at] = rng.randbytes(rng.randrange(1, 65))
    elif kind == "zero":
        end = min(len(buffer), at + rng.randrange(1, 200))
        buffer[at:end] = bytes(end - at)
    else:
        buffer += rng.randbytes(rng.randrange(1, 300))
    return f"{kind}@{at}", bytes(buffer)


@pytest.fixture
def time_limit():
    def expire(signum, frame):
        raise TimeoutError(f"decoding took over {SECONDS_PER_CASE} s")

    previous = signal.signal(signal.SIGALRM, expire)
    yield lambda: signal.alarm(SECONDS_PER_CASE)
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_mutated_segments_decode_to_rows_that_say_what_was_found(request, time_limit):
    realdata = request.getfixturevalue("realdata") if (REPO.parent / "shared" / "realdata").is_dir() else None
    segments = _segments(realdata)
    assert len(segments) >= 5
    rng = random.Random(20261125)
    cases = 0
    for path, original in segments:
        for _ in range(MUTATIONS_PER_SEGMENT):
            mutation, data = _mutate(original, rng)
            where = f"{path} {mutation}"
            time_limit()
            whole = decode_segment(data)
            streamed = list(iter_decoded(io.BytesIO(data).read, len(data), window_bytes=rng.choice([17, 64, 500])))
            signal.alarm(0)
            rows = whole.select(["position", "size_bytes", "entry_status"]).to_pylist()
            assert {row["entry_status"] for row in rows} <= STATUSES, where
            positions = [row["position"] for row in rows]
            assert positions == sorted(positions) and all(0 <= p < len(data) for p in positions), where
            assert all(row["position"] + row["size_bytes"] <= len(data) for row in rows), where
            assert (pa.concat_tables(streamed) if streamed else whole.slice(0, 0)).equals(whole), where
            cases += 1
    assert cases >= 5 * MUTATIONS_PER_SEGMENT
