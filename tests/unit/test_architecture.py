"""The few rules of docs/architecture.md that must never break, read from the imports of every module."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("pipeline", "schemas", "jobs")
IO_MODULES = ("os", "pathlib", "shutil", "io", "tempfile", "glob", "subprocess", "pyarrow.fs", "pyarrow.parquet")


@cache
def trees() -> dict[str, ast.Module]:
    """Every module of the project by dotted name."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
            found[name] = ast.parse(path.read_text(), str(path))
    return found


@cache
def modules() -> dict[str, set[str]]:
    """Every module with every name it imports, at the top or inside functions and type-checking blocks."""
    return {name: _imported(ast.walk(tree)) for name, tree in trees().items()}


@cache
def loaded_on_import() -> dict[str, set[str]]:
    """Every module with the names it imports when it is imported: its top level, type-checking blocks left out."""
    return {name: _imported(_top_level(tree.body)) for name, tree in trees().items()}


def _top_level(body: list[ast.stmt]):
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        yield node
        if isinstance(node, ast.If | ast.Try):
            yield from _top_level([*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])])


def _imported(nodes) -> set[str]:
    names = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _is_under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(f"{prefix}.") for prefix in prefixes)


def _breaking(importers: tuple[str, ...], forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    return {
        module: sorted(name for name in imported if _is_under(name, forbidden))
        for module, imported in modules().items()
        if _is_under(module, importers) and any(_is_under(name, forbidden) for name in imported)
    }


def test_the_project_is_read():
    assert {"pipeline.cli", "pipeline.audit.engine", "schemas.batches", "jobs.run"} <= set(modules())


def test_schemas_depend_on_nothing_but_pyspark():
    outside = {
        module: sorted(name for name in imported if not _is_under(name, ("pyspark", "schemas", "__future__")))
        for module, imported in modules().items()
        if _is_under(module, ("schemas",))
    }
    assert {module: names for module, names in outside.items() if names} == {}


def test_sources_know_no_verdicts():
    """Readers say what they saw; rules, reports and table writes are not theirs."""
    forbidden = (
        "pipeline.audit",
        "pipeline.reports",
        "pipeline.runner",
        "pipeline.ingest",
        "pipeline.cli",
        "pipeline.tables",
    )
    assert _breaking(("pipeline.sources",), forbidden) == {}


def test_rules_do_no_io():
    """A module that registers rules or checks reads the audit state it is given and nothing else."""
    registering = tuple(
        module
        for module, imported in modules().items()
        if {"pipeline.audit.registry.rule", "pipeline.audit.registry.check"} & imported
    )
    assert len(registering) >= 10
    forbidden = ("pipeline.sources", "pipeline.tables", "pipeline.runner", "pipeline.cli", *IO_MODULES)
    assert _breaking(registering, forbidden) == {}


@pytest.mark.parametrize("backend", ["pipeline.tables.native", "pipeline.tables.embedded"])
def test_table_backends_import_the_contract_not_the_store(backend):
    assert "pipeline.tables.store" not in modules()[backend]


def test_jobs_are_thin():
    """spark-submit entry points only hand their arguments to the CLI."""
    assert {module: sorted(names) for module, names in _breaking(("jobs",), ("pipeline",)).items()} == {
        module: ["pipeline.cli", "pipeline.cli.main"] for module in modules() if module.startswith("jobs.")
    }


def test_no_import_cycles_between_modules():
    """Counting what modules import when they load; an import inside a function is a deliberate late binding."""
    project = set(modules())
    graph = {
        module: {name for name in imported if name in project and name != module}
        for module, imported in loaded_on_import().items()
    }
    cycles = []

    def visit(module: str, path: list[str], done: set[str]) -> None:
        for target in graph[module]:
            if target in path:
                cycles.append([*path[path.index(target) :], target])
            elif target not in done:
                visit(target, [*path, target], done)
        done.add(module)

    done: set[str] = set()
    for module in sorted(graph):
        if module not in done:
            visit(module, [module], done)
    assert cycles == []


def test_inputs_are_planned_once():
    """The ingest step makes the run's input plan; readers take its listings and list no log root themselves."""
    planners = {
        module for module, imported in modules().items() if "pipeline.sources.input_plan.plan_inputs" in imported
    }
    assert planners == {"pipeline.ingest"}
    listing = {"pipeline.sources.log_roots.list_root", "pipeline.sources.log_roots.discover_segments"}
    listers = {module for module, imported in modules().items() if listing & imported}
    assert listers == {"pipeline.sources.segments"}
