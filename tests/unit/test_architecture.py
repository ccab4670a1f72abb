"""The few rules of docs/architecture.md that must never break, read from the imports of every module."""

from __future__ import annotations

import ast
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("pipeline", "schemas", "jobs")
# the commands' steps and the `runs` row: orchestration, which no reader or rule may call back into
STEP_MODULES = ("pipeline.runner", "pipeline.audit_step", "pipeline.report_step", "pipeline.run_record")
IO_MODULES = ("os", "pathlib", "shutil", "io", "tempfile", "glob", "subprocess", "pyarrow.fs", "pyarrow.parquet")
MAX_MODULE_LINES = 500


@cache
def paths() -> dict[str, Path]:
    """Every module of the project by dotted name."""
    found = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            found[".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")] = path
    return found


@cache
def trees() -> dict[str, ast.Module]:
    """Every module of the project by dotted name, parsed."""
    return {name: ast.parse(path.read_text(), str(path)) for name, path in paths().items()}


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
    assert {"pipeline.cli", "pipeline.audit.engine.run", "schemas.batches", "jobs.run"} <= set(modules())


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
        *STEP_MODULES,
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
        if {"pipeline.audit.core.registry.rule", "pipeline.audit.core.registry.check"} & imported
    )
    assert len(registering) >= 10
    forbidden = ("pipeline.sources", "pipeline.tables", *STEP_MODULES, "pipeline.cli", *IO_MODULES)
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


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan): every module of one imports, through
    the others, every other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            members = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(members) > 1:
                circles.append(sorted(members))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return circles


def test_no_import_circle_in_pipeline():
    """Counting every import, at the top, inside functions and in type-checking blocks: a module that imports
    another late or for its types only still depends on it, and a circle has no module that can be read first."""
    pipeline = {module for module in modules() if _is_under(module, ("pipeline",))}
    graph = {module: {name for name in modules()[module] if name in pipeline and name != module} for module in pipeline}
    circles = {
        ", ".join(circle): {module: sorted(graph[module] & set(circle)) for module in circle}
        for circle in _circles(graph)
    }
    assert circles == {}


def test_no_module_over_500_lines():
    """A longer module holds more than one idea; split it by idea."""
    long = {
        module: lines
        for module, path in paths().items()
        if (lines := len(path.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_inputs_are_planned_once():
    """The ingest step makes the run's input plan; readers take its listings and list no log root themselves."""
    planners = {
        module for module, imported in modules().items() if "pipeline.sources.input_plan.plan_inputs" in imported
    }
    assert planners == {"pipeline.ingest"}
    listing = {"pipeline.sources.log_roots.list_root", "pipeline.sources.log_roots.discover_segments"}
    listers = {module for module, imported in modules().items() if listing & imported}
    assert listers == {"pipeline.sources.segments"}


AUDIT_LAYERS = ("core", "replay", "state", "rules", "engine")  # each imports only the layers before it


def _audit_layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if module.startswith("pipeline.audit.") and parts[2] in AUDIT_LAYERS else None


def test_the_audit_layers_import_only_the_layers_before_them():
    upward = {
        module: sorted(
            name
            for name in imported
            if name in modules()
            and _audit_layer(name)
            and AUDIT_LAYERS.index(_audit_layer(name)) > AUDIT_LAYERS.index(_audit_layer(module))
        )
        for module, imported in modules().items()
        if _audit_layer(module)
    }
    assert {module: names for module, names in upward.items() if names} == {}
    assert {_audit_layer(module) for module in modules()} == {None, *AUDIT_LAYERS}


VOCABULARY = {
    "TP",
    "TP_PID",
    "REPLICA",
    "CLUSTER_PRODUCER",
    "CONTROL_TYPES",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "TRANSACTION_STATES",
    "ONGOING",
    "PREPARE_COMMIT",
    "PREPARE_ABORT",
    "COMPLETE_COMMIT",
    "COMPLETE_ABORT",
    "DEAD",
    "SEVERITIES",
    "SEVERITY_RANK",
    "FINDING_FIELDS",
}
PARTITION_KEY = ("cluster_id", "topic", "partition")


def _definitions(tree: ast.Module):
    """Module-level names bound by assignment, with the value bound to each."""
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in target.elts if isinstance(target, ast.Tuple) else [target]:
                    if isinstance(name, ast.Name):
                        yield name.id, node.value


def _starts_with_partition_key(value: ast.expr | None) -> bool:
    if not isinstance(value, ast.List | ast.Tuple):
        return False
    leading = [element.value for element in value.elts[:3] if isinstance(element, ast.Constant)]
    return tuple(leading) == PARTITION_KEY


def test_the_shared_vocabulary_is_defined_in_schemas_only():
    """Partition keys, control types, coordinator states, severities and finding fields have one definition each."""
    outside = {
        module: sorted(
            name
            for name, value in _definitions(tree)
            if name in VOCABULARY or _starts_with_partition_key(value) or _is_control_type_map(value)
        )
        for module, tree in trees().items()
        if not _is_under(module, ("schemas",))
    }
    assert {module: names for module, names in outside.items() if names} == {}
    defined = {
        name for module, tree in trees().items() if module.startswith("schemas") for name, _ in _definitions(tree)
    }
    assert defined >= VOCABULARY


def _is_control_type_map(value: ast.expr | None) -> bool:
    """A literal that maps a control record's name to its id: {"ABORT": 0, ...}."""
    return isinstance(value, ast.Dict) and any(
        isinstance(key, ast.Constant) and key.value in ("ABORT", "COMMIT") for key in value.keys
    )


def test_every_rule_is_registered_once_pipeline_audit_is_imported():
    """No caller has to import the right modules first: `import pipeline.audit` alone fills the registry."""
    written = set()
    for module, tree in trees().items():
        if module.startswith("pipeline.audit.rules"):
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "rule" and node.args:
                    written.add(node.args[0].value)
    registered = subprocess.run(
        [sys.executable, "-c", "import pipeline.audit as audit; print(' '.join(sorted(audit.RULES)))"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert len(written) >= 90
    assert set(registered) == written
