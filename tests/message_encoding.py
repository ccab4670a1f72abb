"""Kafka's unsigned varint, for the tests that write coordinator-topic messages from their schemas."""

from __future__ import annotations


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
