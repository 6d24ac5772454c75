"""The controller's layout, as docs/controller.md describes it: the runtime package never
imports the tools beside it (terrapin_tools: the benchmark, the PostgreSQL process manager), so
what terrapin-controller runs is terrapin alone; and no module of it grows past one concept's
size."""

from __future__ import annotations

import ast
from pathlib import Path

CONTROLLER = Path(__file__).resolve().parents[1]
RUNTIME = CONTROLLER / "terrapin"


def imported_modules(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.level == 0:
            found.add(node.module)
    return found


def test_the_runtime_never_imports_the_tools() -> None:
    modules = sorted(RUNTIME.rglob("*.py"))
    assert len(modules) > 40  # the package was found
    offenders = {}
    for path in modules:
        tools = sorted(m for m in imported_modules(path) if m.split(".")[0] == "terrapin_tools")
        if tools:
            offenders[str(path.relative_to(CONTROLLER))] = tools
    assert offenders == {}



def test_no_runtime_module_outgrows_one_concept() -> None:
    # 600 lines: the size at which the last modules that held several concepts (api.py,
    # switches.py, store.py) were split (issue 24); a module past it is due for the same.
    sizes = {
        str(path.relative_to(CONTROLLER)): len(path.read_text(encoding="utf-8").splitlines())
        for path in RUNTIME.rglob("*.py")
    }
    assert {name: lines for name, lines in sizes.items() if lines > 600} == {}
