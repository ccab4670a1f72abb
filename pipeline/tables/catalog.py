"""Render the table reference (docs/tables.md) from `schemas/`: `python -m pipeline.tables.catalog [OUT]`.

Each table's module holds its StructType, its partition columns (`<NAME>_PARTITION_BY`) and `COLUMN_MEANINGS`,
one line per column; the module docstring says what a row is.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path
from types import ModuleType

from schemas import SCHEMAS

DEFAULT_OUT = Path(__file__).resolve().parents[2] / "docs" / "tables.md"


def table_module(name: str) -> ModuleType:
    return importlib.import_module(f"schemas.{name}")


def render() -> str:
    lines = [
        "# Table schemas",
        "",
        "Generated from `schemas/` by `python -m pipeline.tables.catalog`; do not edit by hand.",
        "Every table is a Delta table under the warehouse, `WH/<table>/`; the audit's tables carry the `run_id` of",
        "the run that wrote them, and `runs` says which table versions each run published (README, *A run is all",
        "or nothing*). Types are Spark SQL types.",
        "",
        *[f"- [`{name}`](#{name})" for name in SCHEMAS],
        "",
    ]
    for name, struct in SCHEMAS.items():
        module = table_module(name)
        meanings = module.COLUMN_MEANINGS
        partition_by = getattr(module, f"{name.upper()}_PARTITION_BY", None)
        layout = f"Partitioned by {', '.join(f'`{c}`' for c in partition_by)}." if partition_by else "Not partitioned."
        lines += [
            f"## {name}",
            "",
            inspect.cleandoc(module.__doc__ or ""),
            "",
            layout,
            "",
            "| Column | Type | Nullable | Meaning |",
            "|---|---|---|---|",
        ]
        for field in struct.fields:
            nullable = "yes" if field.nullable else "no"
            meaning = meanings.get(field.name, "").replace("|", "\\|")
            lines.append(f"| `{field.name}` | `{field.dataType.simpleString()}` | {nullable} | {meaning} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else DEFAULT_OUT
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render())
    print(f"wrote {len(SCHEMAS)} tables to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
