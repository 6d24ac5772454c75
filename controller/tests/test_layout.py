"""The controller's layout, as docs/controller.md describes it: the runtime package never
imports the tools beside it (terrapin_tools: the benchmark, the PostgreSQL process manager), so
what terrapin-controller runs is terrapin alone; and no module of it grows past one concept's
size."""

from __future__ import annotations

import ast
import re
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


def test_the_path_of_a_request_in_the_docs_names_functions_that_exist() -> None:
    """docs/controller.md opens with the path of one REST and one in-band reservation through
    the code, naming each function on the way: a rename that leaves it behind fails here."""
    doc = (CONTROLLER.parent / "docs" / "controller.md").read_text(encoding="utf-8")
    start = doc.index("## One request, end to end")
    section = doc[start : doc.index("\n## ", start + 1)] if "\n## " in doc[start + 1 :] else doc[start:]
    functions: set[str] = set()  # every top-level def and class, and every method as Class.name
    classes: set[str] = set()
    for path in RUNTIME.rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                classes.add(node.name)
                functions.add(node.name)
                methods = [i.name for i in node.body if isinstance(i, ast.FunctionDef | ast.AsyncFunctionDef)]
                functions.update(methods)
                functions.update(f"{node.name}.{name}" for name in methods)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                functions.add(node.name)
    named = set(re.findall(r"`([A-Za-z_][\w.]*)(?:\([^`]*\))?`", section))
    code = {n for n in named if not n.endswith(".py") and (n.split(".")[0] in classes or "." not in n)}
    assert len(code) > 40  # the section was found and names the functions
    constants = {"ACTIVE"}  # a state, not a function
    # A method is looked for in the class the docs name.
    assert sorted(code - constants - functions) == []
