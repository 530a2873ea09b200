"""The orchestrator's import graph: layers only call downward, and nothing forms a cycle.

Every ``import`` counts, function-level ones included (a lazy import is still a
dependency). Layers, top to bottom (docs/architecture.md):

    app (cli, api, web) > runtime > usecases > executors | store > vcs > schemas
    > domain > verdict > db | settings

A module may import its own package, any lower layer, and the sibling packages
``trainer`` and ``health`` (never the reverse). Packages of one layer never import
each other.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
LAYERS = [
    ("app",),
    ("runtime",),
    ("usecases",),
    ("executors", "store"),
    ("vcs",),
    ("schemas",),
    ("domain",),
    ("verdict",),
    ("db", "settings"),
]
RANK = {pkg: i for i, group in enumerate(LAYERS) for pkg in group}


def _package_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "orchestrator" or len(parts) < 2:
        return None
    return parts[1]


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _module_graph() -> dict[str, set[str]]:
    files = sorted((ROOT / "orchestrator").rglob("*.py"))
    modules = {_module_name(f): f for f in files}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for imported in _imports(path):
            # "from orchestrator.x import y" names either a module or an attribute
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def test_every_package_has_a_layer():
    packages = {_package_of(m) for m in _module_graph()} - {None}
    assert packages <= set(RANK), f"packages without a layer: {sorted(packages - set(RANK))}"


def test_imports_only_go_down():
    upward = []
    for module, targets in _module_graph().items():
        src = _package_of(module)
        for target in targets:
            dst = _package_of(target)
            if src is None or dst is None or src == dst:
                continue
            if RANK[dst] <= RANK[src]:
                upward.append(f"{module} -> {target}")
    assert not upward, "imports that go up or sideways:\n" + "\n".join(sorted(upward))


def test_trainer_and_health_never_import_the_orchestrator():
    offenders = []
    for package in ("trainer", "health"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if any(i == "orchestrator" or i.startswith("orchestrator.") for i in _imports(path)):
                offenders.append(str(path.relative_to(ROOT)))
    assert not offenders


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            comp = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                comp.append(top)
                if top == node:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def _without_package_inits(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    # A package __init__ re-exporting its modules is not a cycle with them.
    return {m: {t for t in ts if not m.startswith(t + ".")} for m, ts in graph.items()}


def test_no_import_cycle():
    cycles = _cycles(_without_package_inits(_module_graph()))
    assert not cycles, f"import cycles: {cycles}"


def _folder(module: str, modules: set[str]) -> str:
    """The folder (package) a module lives in; a package's ``__init__`` is its folder."""
    parent = module.rpartition(".")[0]
    is_package = any(m.startswith(module + ".") for m in modules)
    return module if is_package else parent


def test_at_most_nine_floors_from_the_cli_down():
    graph = _module_graph()
    modules = set(graph)
    folders: dict[str, set[str]] = defaultdict(set)
    for module, targets in graph.items():
        src = _folder(module, modules)
        folders[src].update(f for t in targets if (f := _folder(t, modules)) != src)
    depth: dict[str, int] = {}

    def floors(folder: str) -> int:
        if folder not in depth:
            depth[folder] = 0  # cycle guard; test_no_import_cycle reports cycles
            depth[folder] = 1 + max((floors(t) for t in folders.get(folder, ())), default=0)
        return depth[folder]

    assert floors("orchestrator.app.cli") <= 9, sorted(depth.items(), key=lambda kv: -kv[1])


@pytest.mark.parametrize("limit_lines", [420])
def test_modules_stay_small(limit_lines):
    big = [f"{p.relative_to(ROOT)}: {n}" for p in sorted((ROOT / "orchestrator").rglob("*.py"))
           if (n := len(p.read_text().splitlines())) > limit_lines]
    assert not big, "split these modules (STYLE.md: aim for 100-300 lines):\n" + "\n".join(big)


def test_functions_stay_short():
    long = []
    for path in sorted((ROOT / "orchestrator").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                # body lines: a long signature of CLI options is not a long function
                body = node.body[1:] if ast.get_docstring(node) and len(node.body) > 1 else node.body
                n = node.end_lineno - body[0].lineno + 1
                if n > 80:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, "function bodies over 80 lines:\n" + "\n".join(long)


def test_only_use_cases_touch_the_store_and_the_orm():
    """Adapters and background loops call use cases; SQL and ORM rows stay below them."""
    offenders = []
    for module, targets in _module_graph().items():
        if _package_of(module) not in ("app", "runtime"):
            continue
        for target in targets:
            if target.startswith(("orchestrator.store", "orchestrator.db.models",
                                  "orchestrator.db.service_models")):
                offenders.append(f"{module} -> {target}")
    assert not offenders, "\n".join(sorted(offenders))
