"""The controller process around the Controller: what its command line changes in the
configuration, the PID file `make stop` reads, and the garbage collector's tuning for a
long-lived heap."""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from terrapin.config import Config, ConfigError, ReplicationConfig


@contextlib.contextmanager
def pid_file(path: str | None) -> Iterator[None]:
    """Record this process's PID while it runs (`make stop` stops what build/run/pids lists)."""
    if path is None:
        yield
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"{os.getpid()}\n")
    try:
        yield
    finally:
        # Only our own record: a newer controller may have taken the file over meanwhile.
        with contextlib.suppress(OSError):
            if target.read_text().strip() == str(os.getpid()):
                target.unlink()


def with_flags(config: Config, args: argparse.Namespace) -> Config:
    """The configuration with what the command line sets: REST address, replica identity."""
    rest = config.rest.model_copy(
        update={k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
    )
    updates: dict[str, Any] = {"rest": rest}
    named = {"replica": args.replica, "index": args.replica_index, "url": args.advertise}
    if any(v is not None for v in named.values()):
        replication = config.replication or ReplicationConfig()
        updates["replication"] = replication.model_copy(
            update={k: v for k, v in named.items() if v is not None}
        )
    try:
        return Config.model_validate(config.model_dump() | {k: _dump(v) for k, v in updates.items()})
    except ValidationError as exc:
        raise ConfigError(f"command line: {exc.errors()[0]['msg']}") from None


def _dump(value: Any) -> Any:
    return value.model_dump() if hasattr(value, "model_dump") else value


# gc thresholds: a young generation of 10,000 objects, not CPython's 700, and a full collection
# every 2,000 young ones at most, not every 100 (docs/performance.md, "fourth pass").
GC_THRESHOLDS = (10_000, 20, 100)


def tune_garbage_collector() -> None:
    """A controller holds a large, long-lived heap (every reservation, ledger level and encoded
    entry), and a burst of set-ups keeps thousands of requests' objects alive just long enough
    to be promoted: with CPython's defaults, full collections of that heap took a third of the
    primary's CPU during the 10,000-channel install (25 of them, up to 0.4 s each). What start-up
    made is frozen out of every collection; the thresholds make young collections rarer, so
    fewer short-lived objects survive into the old generations."""
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)
