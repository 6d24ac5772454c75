"""The OpenAPI document the controller serves (create_app's, with the operator's routes, as
terrapin-controller builds it), compared byte for byte with tests/snapshots/openapi.json.

A change of the REST surface (a route, a field, a description, even the order of the paths)
shows here as a diff to review; a reorganisation that must change nothing proves it did not.
After a deliberate change, rewrite the snapshot and commit it with the change:

    build/venv/bin/python controller/tests/test_openapi_snapshot.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fakes import FakeFabric, chain_config

from terrapin.config import Config
from terrapin.main import Controller

SNAPSHOT = Path(__file__).parent / "snapshots" / "openapi.json"


def served_document() -> str:
    def factory(config: Config, topo: Any, on_packet: Any, desired: Any, replica: Any) -> FakeFabric:
        return FakeFabric(topo.switch_names)

    app = Controller(chain_config(4), fabric_factory=factory).app
    # Key order kept (no sort_keys): the order of paths and fields is part of the document.
    return json.dumps(app.openapi(), indent=2, ensure_ascii=False) + "\n"


def test_openapi_document_is_unchanged() -> None:
    assert SNAPSHOT.read_text(encoding="utf-8") == served_document(), (
        "the OpenAPI document changed; if that is meant, rewrite the snapshot: "
        "build/venv/bin/python controller/tests/test_openapi_snapshot.py"
    )


def test_snapshot_holds_every_route() -> None:
    # The comparison is only as good as the snapshot: it is the whole API, not an empty shell.
    paths = json.loads(SNAPSHOT.read_text(encoding="utf-8"))["paths"]
    assert {"/health", "/reservations", "/reservations/batch", "/status/switches/{name}/maxima"} <= set(paths)
    assert {"/metrics", "/topology", "/monitor", "/events", "/events/stream"} <= set(paths)


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    SNAPSHOT.write_text(served_document(), encoding="utf-8")
    print(f"wrote {SNAPSHOT}")
