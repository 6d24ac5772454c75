"""What the REST routers share, and how a route gets it: create_app keeps an ApiContext (and,
in the controller process, an OperatorContext) on `app.state`, and a route asks for it with the
`Api` or `Operator` dependency, FastAPI's way of handing a router's routes what they need.

It owns the Telemetry protocol too: what the routes read from the switches
(switches.SwitchFabric, or a test fake).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Protocol, cast

from fastapi import Depends, Request

from terrapin.paths import ChannelSelector
from terrapin.switches import ChannelCounters, QueueTelemetry, RecoveryCounters

if TYPE_CHECKING:
    from terrapin.api.auth import Tokens
    from terrapin.config import Config
    from terrapin.metrics import ControllerMetrics
    from terrapin.monitor import GuaranteeMonitor
    from terrapin.reservations import ReservationService


class Telemetry(Protocol):
    """What the API reads from the switches (switches.SwitchFabric, or a test fake)."""

    @property
    def names(self) -> list[str]: ...

    def is_ready(self, name: str) -> bool: ...

    def why_not_ready(self, name: str) -> str | None: ...

    def is_connected(self, name: str) -> bool: ...

    async def queue_telemetry(self, name: str, ports: list[int]) -> list[QueueTelemetry]: ...

    async def channel_counters(
        self, name: str, selector: ChannelSelector, in_port: int, channel_id: int
    ) -> ChannelCounters: ...

    async def member_counters(self, name: str, member: int, channel_id: int) -> ChannelCounters: ...

    async def recovery_counters(
        self, name: str, channel_ids: Sequence[int]
    ) -> dict[int, RecoveryCounters]: ...

    async def drop_counters(self, name: str) -> dict[str, int]: ...


@dataclass(frozen=True)
class ApiContext:
    """What the reservation, status and health routes answer from.

    `serving(name)`: whether this controller does its part with switch `name` (a backup
    replica's part is only to stay connected). `store_problems()`: what keeps it from doing its
    part besides its switches (a store it cannot reach, nobody holding the lease)."""

    service: ReservationService
    telemetry: Telemetry
    tokens: Tokens
    serving: Callable[[str], bool]
    health_extra: Callable[[], Awaitable[dict[str, Any]]] | None = None
    store_problems: Callable[[], Awaitable[list[str]]] | None = None


@dataclass(frozen=True)
class OperatorContext:
    """What the operator's routes read (monitor.py, dashboard.py); `stopping` is set when the
    process is asked to stop, and ends the live streams."""

    monitor: GuaranteeMonitor
    metrics: ControllerMetrics
    config: Config
    stopping: asyncio.Event


# async: a plain def would be run in a worker thread, a round trip per request.
async def api_context(request: Request) -> ApiContext:
    return cast(ApiContext, request.app.state.api)


async def operator_context(request: Request) -> OperatorContext:
    return cast(OperatorContext, request.app.state.operator)


Api = Annotated[ApiContext, Depends(api_context)]
Operator = Annotated[OperatorContext, Depends(operator_context)]
