"""Kafka's primitive types over one key or value, bounds-checked, shared by the decoders of both topics."""

from __future__ import annotations

import struct
from typing import Any

INTEGERS = {1: struct.Struct(">b"), 2: struct.Struct(">h"), 4: struct.Struct(">i"), 8: struct.Struct(">q")}
INT32_BYTES = 4


class DecodeError(ValueError):
    """Bytes that do not hold what the schema says; the message names the byte position."""


class FixedFields:
    """Consecutive fixed-width integer fields, each (column, description, size in bytes), read as one struct."""

    def __init__(self, *fields: tuple[str, str, int]) -> None:
        self.fields = fields
        self.columns = tuple(column for column, _, _ in fields)
        self.layout = struct.Struct(">" + "".join(INTEGERS[size].format[1:] for _, _, size in fields))


class Reader:
    """Kafka's primitive types (`ByteBufferAccessor`/`Readable`) over one key or value, bounds-checked."""

    def __init__(self, data: bytes, what: str) -> None:
        self.data = data
        self.end = len(data)
        self.what = what
        self.position = 0

    def fail(self, reason: str, position: int | None = None) -> DecodeError:
        return DecodeError(f"{self.what} byte {self.position if position is None else position}: {reason}")

    def remaining(self) -> int:
        return self.end - self.position

    def _fixed(self, size: int, field: str) -> int:
        position = self.position
        if position + size > self.end:
            raise self.fail(f"{field} needs {size} bytes, {self.end - position} left")
        self.position = position + size
        return INTEGERS[size].unpack_from(self.data, position)[0]

    def fields(self, fields: FixedFields, into: dict[str, Any]) -> None:
        """Consecutive fixed-width fields read `into` the row with one unpack; a short buffer is read field by
        field, so the error names the field it cuts and the fields before it are kept."""
        position = self.position
        if position + fields.layout.size <= self.end:
            self.position = position + fields.layout.size
            into.update(zip(fields.columns, fields.layout.unpack_from(self.data, position), strict=True))
            return
        for column, description, size in fields.fields:
            into[column] = self._fixed(size, description)

    def int32_array(self, count: int) -> list[int]:
        """`count` int32s; `count` comes from `array_length`, which checked that they are there."""
        position = self.position
        self.position = position + INT32_BYTES * count
        return list(struct.unpack_from(f">{count}i", self.data, position))

    def int8(self, field: str) -> int:
        return self._fixed(1, field)

    def int16(self, field: str) -> int:
        return self._fixed(2, field)

    def int32(self, field: str) -> int:
        return self._fixed(4, field)

    def int64(self, field: str) -> int:
        return self._fixed(8, field)

    def uvarint(self, field: str) -> int:
        """`ByteUtils.readUnsignedVarint`: at most 5 bytes."""
        start, value = self.position, 0
        for shift in range(0, 35, 7):
            if self.position >= len(self.data):
                raise self.fail(f"{field} ends inside its varint", start)
            byte = self.data[self.position]
            self.position += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value & 0xFFFFFFFF
        raise self.fail(f"{field} varint is longer than 5 bytes", start)

    def _text(self, length: int | None, field: str, start: int, nullable: bool) -> str | None:
        if length is None:
            if not nullable:
                raise self.fail(f"{field} is null but not nullable", start)
            return None
        if length > self.remaining():
            raise self.fail(f"{field} of {length} bytes runs past the end ({self.remaining()} left)", start)
        raw = bytes(self.data[self.position : self.position + length])
        self.position += length
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"{field} is not UTF-8 ({exc.reason})", start) from None

    def string(self, field: str, nullable: bool = False) -> str | None:
        """int16 length (-1 = null) + UTF-8."""
        start = self.position
        length = self.int16(f"{field} length")
        if length < -1:
            raise self.fail(f"{field} length {length} is negative", start)
        return self._text(None if length == -1 else length, field, start, nullable)

    def compact_string(self, field: str, nullable: bool = False) -> str | None:
        """uvarint length + 1 (0 = null) + UTF-8."""
        start = self.position
        length = self.uvarint(f"{field} length")
        return self._text(None if length == 0 else length - 1, field, start, nullable)

    def _count(self, count: int | None, min_item_bytes: int, field: str, start: int, nullable: bool) -> int | None:
        if count is None:
            if not nullable:
                raise self.fail(f"{field} is null but not nullable", start)
            return None
        if count * min_item_bytes > self.remaining():
            raise self.fail(
                f"{field} of {count} entries needs at least {count * min_item_bytes} bytes, {self.remaining()} left",
                start,
            )
        return count

    def array_length(self, field: str, min_item_bytes: int, nullable: bool = False) -> int | None:
        """int32 count (-1 = null), checked against the bytes left."""
        start = self.position
        count = self.int32(f"{field} length")
        if count < -1:
            raise self.fail(f"{field} length {count} is negative", start)
        return self._count(None if count == -1 else count, min_item_bytes, field, start, nullable)

    def compact_array_length(self, field: str, min_item_bytes: int, nullable: bool = False) -> int | None:
        """uvarint count + 1 (0 = null), checked against the bytes left."""
        start = self.position
        count = self.uvarint(f"{field} length")
        return self._count(None if count == 0 else count - 1, min_item_bytes, field, start, nullable)

    def tagged_fields(self, known: dict[int, tuple[str, int]], into: dict[str, Any]) -> None:
        """A flexible struct's tagged-field section: known integer tags go `into` by column name, others are skipped."""
        start = self.position
        count = self._count(self.uvarint("tagged field count"), 2, "tagged fields", start, False)
        previous = -1
        for _ in range(count or 0):
            start = self.position
            tag = self.uvarint("tag")
            if tag <= previous:
                raise self.fail(f"tag {tag} does not follow tag {previous}", start)
            previous = tag
            size = self.uvarint(f"tag {tag} size")
            if size > self.remaining():
                raise self.fail(f"tag {tag} of {size} bytes runs past the end ({self.remaining()} left)", start)
            if tag in known:
                column, width = known[tag]
                if size != width:
                    raise self.fail(f"tag {tag} ({column}) has {size} bytes, expected {width}", start)
                into[column] = self._fixed(width, column)
            else:
                self.position += size
