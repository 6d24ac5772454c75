"""The bearer token: the one dependency of every call that changes state. Reads are open."""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, HTTPException
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from terrapin.api.context import Api

# Module level: FastAPI resolves these annotations by name (this module uses postponed ones).
BearerCredentials = Annotated[HTTPAuthorizationCredentials | None, Depends(HTTPBearer(auto_error=False))]


async def require_token(api: Api, credentials: BearerCredentials) -> None:
    """401 unless `Authorization: Bearer <token>` names the configured token."""
    if credentials is None or not hmac.compare_digest(credentials.credentials.encode(), api.token.encode()):
        raise HTTPException(
            status_code=401,
            detail="a valid bearer token is required",
            headers={"WWW-Authenticate": "Bearer"},
        )
