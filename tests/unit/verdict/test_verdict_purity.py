"""The verdict engine is pure: no I/O, database, web framework, torch or clock."""

from __future__ import annotations

import ast
import pathlib

import orchestrator.verdict as verdict_pkg

PACKAGE_DIR = pathlib.Path(verdict_pkg.__file__).parent
# numpy: pure array arithmetic (scipy's own dependency), used for the per-look least
# squares and the boundary integration grid.
# random: the seeded Mersenne Twister that orders a gate's blocks (design.py); no I/O.
ALLOWED_TOP_LEVEL = {
    "__future__", "random", "collections", "dataclasses", "functools", "itertools", "math", "numbers",
    "statistics", "typing", "scipy", "numpy", "orchestrator",
}
FORBIDDEN_CALLS = {"open", "print", "input", "exec", "eval", "__import__"}


def _modules() -> list[pathlib.Path]:
    files = sorted(PACKAGE_DIR.glob("*.py"))
    assert len(files) >= 6, files
    return files


def _imports(tree: ast.AST) -> list[str]:
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                names.append("orchestrator.verdict")
            else:
                names.append(node.module or "")
    return names


def test_every_module_imports_only_pure_dependencies() -> None:
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="ascii"), filename=str(path))
        for name in _imports(tree):
            top = name.split(".")[0]
            assert top in ALLOWED_TOP_LEVEL, f"{path.name} imports {name}"
            if top == "orchestrator":
                assert name.startswith("orchestrator.verdict"), f"{path.name} imports {name}"


def test_no_io_builtins_are_called() -> None:
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="ascii"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id not in FORBIDDEN_CALLS, f"{path.name} calls {node.func.id}"


def test_sources_are_ascii() -> None:
    for path in _modules():
        path.read_bytes().decode("ascii")


def test_all_lists_existing_public_names() -> None:
    for name in verdict_pkg.__all__:
        assert hasattr(verdict_pkg, name), name
        assert not name.startswith("_")
