"""Packet I/O through the switches' CPU port: every PacketIn of a primary stream goes to the
reservation protocol's handler, and the handler's answers go out as PacketOuts (the metadata
header is encoding.packet_out's).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import finsy as fy

from terrapin.switches.connection import lost_stream_is_unavailable
from terrapin.switches.encoding import packet_out

LOG = logging.getLogger("terrapin.switches")

PacketHandler = Callable[[str, int, bytes], Awaitable[None]]


async def serve_packets(sw: fy.Switch, on_packet: PacketHandler) -> None:
    """Hand every PacketIn of `sw` to `on_packet(switch, ingress port, frame)`, until the
    stream ends (finsy cancels the task with it)."""
    async for packet in sw.read_packets():
        try:
            port = int(packet.metadata.get("ingress_port", 0))
            await on_packet(sw.name, port, bytes(packet.payload))
        except Exception:  # one bad packet must not stop the loop
            LOG.exception("switch %s: packet handler failed", sw.name)


@lost_stream_is_unavailable
async def send_packet(sw: fy.Switch, frame: bytes, egress_port: int | None = None) -> None:
    """Through the pipeline (routed like a host's packet) unless a port is named."""
    await sw.write([packet_out(frame, egress_port)])
