"""Seeded mutations of real files, the inputs of the decoder fuzzing (benchmarks/fuzz_suite.py and its CI subset).

Binary files get what a broken disk, a bad copy or a hostile writer produces: bit flips, extreme values in
length and count fields, cuts, inserted or zeroed spans and trailing garbage. Text files (dump-log output,
checkpoints) get what editing, pasting and truncation produce: dropped, duplicated and cut lines, swapped tokens,
numbers replaced with huge or negative values, and the binary mutations of their UTF-8 bytes. Every mutation
returns a short description (kind and where) so a failing case can be named and replayed.
"""

from __future__ import annotations

import random
import re
import struct

# Values that overflow the reader's int16/int32/int64 fields, or their sums, or Python's int() digit limit.
EXTREME_NUMBERS = (
    "-1",
    "0",
    "-2147483649",
    "2147483648",
    "-9223372036854775809",
    "9223372036854775807",
    "9223372036854775808",
    "18446744073709551616",
    "99999999999999999999999999999999",
    "9" * 5000,
)
_FIELDS = {"int16": struct.Struct(">h"), "int32": struct.Struct(">i"), "int64": struct.Struct(">q")}
_NUMBER = re.compile(r"-?\d+")
_TOKEN = re.compile(r"\S+")


def mutate_bytes(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One binary mutation of `data` (which may be empty): (description, mutated bytes)."""
    buffer = bytearray(data)
    kinds = ["flip", "int16", "int32", "int32", "int64", "cut", "insert", "zero", "garbage"]
    kind = rng.choice(kinds if buffer else ["garbage"])
    at = rng.randrange(len(buffer)) if buffer else 0
    if kind == "flip":
        buffer[at] ^= 1 << rng.randrange(8)
    elif kind in _FIELDS:  # a length, count, offset or position field, or any bytes
        field = _FIELDS[kind]
        high = (1 << (8 * field.size - 1)) - 1
        at = max(0, min(at, len(buffer) - field.size))
        value = rng.choice([0, -1, 1, 13, 60, high, -high - 1, rng.randint(-high - 1, high)])
        buffer[at : at + field.size] = field.pack(value)
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


def mutate_text(text: str, rng: random.Random) -> tuple[str, str]:
    """One text mutation of `text`: (description, mutated text). Line breaks are kept as they were."""
    lines = text.splitlines(keepends=True)
    kind = rng.choice(["drop", "duplicate", "swap", "number", "number", "truncate", "bytes"] if lines else ["bytes"])
    if kind == "bytes":
        description, data = mutate_bytes(text.encode(), rng)
        return f"bytes:{description}", data.decode("utf-8", errors="replace")
    at = rng.randrange(len(lines))
    line = lines[at]
    if kind == "drop":
        del lines[at]
    elif kind == "duplicate":
        lines.insert(at, line)
    elif kind == "truncate":
        lines[at] = line[: rng.randrange(len(line) + 1)]
    elif kind == "swap":
        tokens = list(_TOKEN.finditer(line))
        if len(tokens) >= 2:
            first, second = sorted(rng.sample(tokens, 2), key=lambda match: match.start())
            lines[at] = (
                line[: first.start()]
                + second.group()
                + line[first.end() : second.start()]
                + first.group()
                + line[second.end() :]
            )
    else:
        numbers = list(_NUMBER.finditer(line))
        if numbers:
            number = rng.choice(numbers)
            lines[at] = line[: number.start()] + rng.choice(EXTREME_NUMBERS) + line[number.end() :]
    return f"{kind}@line {at + 1}", "".join(lines)
