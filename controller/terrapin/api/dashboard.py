"""The operator's page: GET / and its assets under /static, package data of `terrapin`
(`terrapin/static/`): no CDN, nothing fetched at run time. The page reads the monitor's routes
(monitor.py) and writes through the reservation API with the bearer token the operator enters
once (docs/operations.md).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).resolve().parent.parent / "static"

router = APIRouter()


def static_files() -> StaticFiles:
    return StaticFiles(directory=STATIC)


@router.get("/", include_in_schema=False)
async def dashboard() -> FileResponse:
    return FileResponse(STATIC / "index.html", media_type="text/html")
