"""Every dependency controller/pyproject.toml declares can be imported in this environment
(build/venv under `make test`), beside the others, as the controller process imports them.

Importing a package's top level is not enough: p4lang's p4runtime wheel imported as `p4` but
`p4.v1.p4runtime_pb2` failed ("Descriptors cannot be created directly") next to the protobuf
that finsy needs. So every public module a runtime dependency ships is imported, in one
interpreter; a module that needs an optional extra which is not installed is the one accepted
failure (an ImportError caused by another package's module being missing)."""

from __future__ import annotations

import importlib.metadata as metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def declared(group: str | None = None) -> list[str]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    specs = project["dependencies"] if group is None else project["optional-dependencies"][group]
    return [re.split(r"[\s\[<>=!~;]", spec, maxsplit=1)[0] for spec in specs]


def public_modules(distribution: str) -> list[str]:
    modules = set()
    for file in metadata.distribution(distribution).files or []:
        parts = file.parts
        if file.suffix != ".py" or parts[0] == ".." or any(p.endswith(".dist-info") for p in parts):
            continue
        names = [*parts[:-1], file.stem]
        if names[-1] == "__init__":
            names.pop()
        # __main__ runs a program when imported; _private modules and a package's own tests
        # are nobody's API.
        if names and not any(n.startswith("_") or n in ("test", "tests") for n in names):
            modules.add(".".join(names))
    return sorted(modules)


IMPORT_ALL = """
import importlib, json, sys, warnings
warnings.simplefilter("ignore")
failed = {}
for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except ImportError as exc:
        # an optional extra, not installed (fastapi.templating without jinja2): accepted only
        # when what is missing is another package, directly or as the cause
        missing = exc if isinstance(exc, ModuleNotFoundError) else exc.__context__
        if not isinstance(missing, ModuleNotFoundError) or missing.name is None or (
            missing.name.split(".")[0] == name.split(".")[0]
        ):
            failed[name] = f"{type(exc).__name__}: {exc}"
    except Exception as exc:
        failed[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(failed))
"""


def test_every_public_module_of_every_runtime_dependency_imports() -> None:
    import json

    modules = [m for dist in declared() for m in public_modules(dist)]
    assert len(modules) > 50, modules  # the distributions' file lists were found
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL, json.dumps(modules)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {}


def test_every_dev_dependency_is_installed_and_its_top_level_imports() -> None:
    for dist in declared("dev"):
        top_level = {m.split(".")[0] for m in public_modules(dist)}
        for name in sorted(top_level):
            __import__(name)
        assert metadata.version(dist), dist
