"""Who may change what: two roles, each with its bearer token (docs/operations.md, "Roles").

The operator's token opens every call that changes state; the viewer's identifies someone who
may look and is refused any change with 403 naming the role. Reads need no token. Only the
SHA-256 digests of the tokens are kept, and a presented token is compared with every digest in
constant time (hmac.compare_digest, no early exit), so neither the tokens nor how much of one a
guess got right can be read off the process or its timing.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, Field

from terrapin.api.context import Api

LOG = logging.getLogger("terrapin.api")

Role = Literal["operator", "viewer"]

# Module level: FastAPI resolves these annotations by name (this module uses postponed ones).
BearerCredentials = Annotated[HTTPAuthorizationCredentials | None, Depends(HTTPBearer(auto_error=False))]

router = APIRouter()


@dataclass(frozen=True)
class Tokens:
    """The roles' tokens, as SHA-256 digests only."""

    digests: tuple[tuple[bytes, Role], ...]

    @classmethod
    def of(cls, operator: str, viewer: str | None = None) -> Tokens:
        if viewer is not None and hmac.compare_digest(operator.encode(), viewer.encode()):
            raise ValueError("the viewer's token is the operator's: give each role its own")
        pairs: list[tuple[bytes, Role]] = [(_digest(operator), "operator")]
        if viewer is not None:
            pairs.append((_digest(viewer), "viewer"))
        return cls(tuple(pairs))

    def role(self, presented: str) -> Role | None:
        digest = _digest(presented)
        found: Role | None = None
        for known, role in self.digests:  # every digest compared, whichever matches
            if hmac.compare_digest(digest, known):
                found = role
        return found


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _unauthorized(request: Request, reason: str) -> HTTPException:
    LOG.warning("%s %s from %s refused: %s", request.method, request.url.path, _client(request), reason)
    return HTTPException(status_code=401, detail=reason, headers={"WWW-Authenticate": "Bearer"})


def _client(request: Request) -> str:
    return f"{request.client.host}:{request.client.port}" if request.client else "?"


async def caller_role(api: Api, request: Request, credentials: BearerCredentials) -> Role | None:
    """The role the request's bearer token gives, None without one; 401 for a token that is
    malformed or nobody's."""
    header = request.headers.get("authorization")
    if header is None:
        return None
    scheme, _, presented = header.partition(" ")
    # `credentials` (HTTPBearer's) is there for the OpenAPI document's security scheme; the
    # header is read here as it came, so whitespace a token was pasted with can be named.
    if scheme.lower() != "bearer" or not presented:
        raise _unauthorized(request, "the Authorization header must be 'Bearer <token>'")
    if presented != presented.strip() or any(c.isspace() for c in presented):
        # h11 drops whitespace at the end of a header already; this is whitespace after "Bearer "
        # or inside: a token pasted with its neighbours, which is never a token.
        raise _unauthorized(
            request,
            "the bearer token has whitespace in or around it; tokens are compared byte for byte: "
            "send it alone after 'Bearer '",
        )
    role = api.tokens.role(presented)
    if role is None:
        raise _unauthorized(
            request, "the bearer token is not valid (neither the operator's nor the viewer's)"
        )
    return role


CallerRole = Annotated[Role | None, Depends(caller_role)]


async def require_token(request: Request, role: CallerRole) -> None:
    """401 unless `Authorization: Bearer <token>` names a role; 403 unless that role is the
    operator's (the one that may change state)."""
    if role is None:
        raise _unauthorized(request, "a valid bearer token is required")
    if role != "operator":
        LOG.warning(
            "%s %s from %s refused: the %s role may not change anything",
            request.method,
            request.url.path,
            _client(request),
            role,
        )
        raise HTTPException(
            status_code=403,
            detail={
                "error": "forbidden",
                "role": role,
                "message": f"the {role} role may read but not change anything: "
                f"{request.method} {request.url.path} needs the operator's token",
            },
        )


class ForbiddenOut(BaseModel):
    error: Literal["forbidden"]
    role: Role = Field(description="the role the token gives")
    message: str


FORBIDDEN_RESPONSE = {"model": ForbiddenOut, "description": "the viewer's token: it may not change anything"}


class RoleOut(BaseModel):
    role: Role | None = Field(description="the role the bearer token gives; null without a token")
    may_change: bool = Field(description="whether this token may create and delete (the operator's)")


@router.get(
    "/role",
    tags=["health"],
    responses={401: {"description": "a token that is malformed or nobody's"}},
)
async def get_role(role: CallerRole) -> RoleOut:
    """Which role the bearer token sent gives (the dashboard shows it before any change)."""
    return RoleOut(role=role, may_change=role == "operator")
