"""Dependencies run one way: cli -> loop -> memory, policy, llm, runner (docs/ARCHITECTURE.md).

Every import of every module counts, at any depth (a function-level import hides a cycle
as well as a top-level one)."""

from __future__ import annotations

import ast
from pathlib import Path

import htam_graph

PACKAGE = Path(htam_graph.__file__).parent

# What each part may import of the project's own parts. A leaf module (vocab, errors,
# resources, config, templating, yamlfile, files) is importable from everywhere.
LEAVES = {"vocab", "errors", "resources", "config", "templating", "yamlfile", "files"}
ALLOWED = {
    "tasks": set(),
    "llm": set(),
    "memory": set(),
    "policy": {"memory"},
    "runner": {"tasks"},
    "neo4j_server": {"memory"},
    "catalog": {"tasks", "llm"},
    "loop": {"memory", "policy", "llm", "runner", "tasks", "catalog"},
    "demo": {"loop", "memory", "policy", "llm", "runner", "tasks", "catalog", "analytics"},
    "analytics": {"memory"},
    "bench": {"loop", "memory", "policy", "llm", "runner", "tasks", "catalog", "analytics"},
    "cli": None,  # the top: anything
}


def _part(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "htam_graph" or len(parts) < 2:
        return None
    return parts[1]


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _source_files() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if "suite" not in p.relative_to(PACKAGE).parts]


def test_every_part_imports_only_what_sits_below_it():
    violations = []
    for path in _source_files():
        rel = path.relative_to(PACKAGE)
        own = rel.parts[0].removesuffix(".py")
        if own in ("__init__", "__main__") or own in LEAVES:
            continue
        assert own in ALLOWED, f"{rel}: a new top-level part; place it in ALLOWED (and docs/ARCHITECTURE.md)"
        allowed = ALLOWED[own]
        if allowed is None:
            continue
        for module in _imports(path):
            other = _part(module)
            if other is None or other == own or other in LEAVES or other in allowed:
                continue
            if other in ALLOWED or (PACKAGE / other).exists() or (PACKAGE / f"{other}.py").exists():
                violations.append(f"{rel} imports {module}")
    assert not violations, "\n".join(sorted(set(violations)))


def test_leaf_modules_import_only_leaves():
    for name in LEAVES:
        for module in _imports(PACKAGE / f"{name}.py"):
            other = _part(module)
            assert other is None or other in LEAVES or (name == "config" and other == "llm"), (name, module)


def test_the_architecture_map_draws_only_allowed_arrows_and_names_every_part():
    """docs/ARCHITECTURE.md's diagram is the newcomer's map: each arrow it draws is one the
    rules allow, and every part and leaf is on it."""
    import re

    doc = (PACKAGE.parent / "docs" / "ARCHITECTURE.md").read_text()
    diagram = doc.split("```mermaid\nflowchart", 1)[1].split("```", 1)[0]
    arrows = set()
    for line in diagram.splitlines():
        if "-->" in line:
            source, targets = (side.strip() for side in line.split("-->"))
            arrows.update((source, t.strip()) for t in targets.split("&"))
    assert arrows
    for source, target in arrows:
        allowed = ALLOWED[source]
        assert allowed is None or target in allowed, f"the map draws {source} -> {target}, which the rules forbid"
    drawn = {part for arrow in arrows for part in arrow}
    assert drawn == set(ALLOWED), f"parts missing from the map: {set(ALLOWED) - drawn}"
    for leaf in LEAVES:
        assert re.search(rf"\b{leaf}\b", doc), f"docs/ARCHITECTURE.md does not name the leaf {leaf}"


# Size limits (issue 32 item 4): no class over MAX_CLASS_LINES, no module over MAX_MODULE_LINES.
MAX_CLASS_LINES = 250
MAX_MODULE_LINES = 500
# What still exceeds them: each entry is work left, not a licence. Shrink, never grow.
CLASSES_OVER = {
    "catalog/program.py:ProgramBuilder",  # to split (issue 32 item 4)
    "catalog/render.py:RowRender",  # to split (issue 32 item 4)
    "runner/static_checks.py:_PythonChecker",  # to split: import, call and C++ text rules
    "loop/optimizer.py:Optimizer",  # being reworked (issue 32 items 1-3)
    "memory/neo4j_store.py:Neo4jStore",
    "memory/sqlite_store.py:SQLiteStore",
}
MODULES_OVER = {
    "bench/report.py",
    "catalog/lowering.py",
    "catalog/program.py",
    "catalog/render.py",
    "catalog/strategies.py",
    "loop/optimizer.py",
    "memory/models.py",
    "memory/neo4j_store.py",
    "runner/sandbox.py",
    "runner/static_checks.py",
}


def _sizes() -> tuple[set[str], set[str]]:
    classes, modules = set(), set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        source = path.read_text()
        if len(source.splitlines()) > MAX_MODULE_LINES:
            modules.add(rel)
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and (node.end_lineno or node.lineno) - node.lineno > MAX_CLASS_LINES:
                classes.add(f"{rel}:{node.name}")
    return classes, modules


def test_no_class_or_module_over_the_size_limits():
    classes, modules = _sizes()
    assert classes <= CLASSES_OVER, f"classes over {MAX_CLASS_LINES} lines: {sorted(classes - CLASSES_OVER)}"
    assert modules <= MODULES_OVER, f"modules over {MAX_MODULE_LINES} lines: {sorted(modules - MODULES_OVER)}"
    fixed = (CLASSES_OVER - classes) | (MODULES_OVER - modules)
    assert not fixed, f"now within the limits: take them off the allow-lists: {sorted(fixed)}"


# The backends, by class and by name: only the factory that builds one from the settings
# (loop/clients.py) and the run setup's record of which one ran may name them.
BACKEND_CLASSES = {"AnthropicClient", "OpenAIClient", "ScriptClient", "CatalogClient", "ApiClient"}
BACKEND_NAMES = {"anthropic", "openai", "script", "catalog"}
MAY_NAME_BACKENDS = {"loop/clients.py"}


def test_the_loop_names_no_backend():
    """The loop talks to every generator through LLMClient's declared capabilities
    (htam_graph/llm/base.py), never by asking which backend it is (issue 32, item 1)."""
    found = []
    for path in sorted((PACKAGE / "loop").glob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in MAY_NAME_BACKENDS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Name | ast.alias)
                and (node.id if isinstance(node, ast.Name) else node.name) in BACKEND_CLASSES
            ):
                found.append(f"{rel}:{node.lineno if isinstance(node, ast.Name) else ''} names a backend class")
            elif isinstance(node, ast.Compare):
                texts = [c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
                if any(t in BACKEND_NAMES for t in texts):
                    found.append(f"{rel}:{node.lineno} compares with a backend's name")
    assert not found, found
