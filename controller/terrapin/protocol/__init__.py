"""The in-band reservation protocol of seed 000 §4.1.2 (Figure 15): codec and handler."""

from terrapin.protocol.messages import (
    FLAG_RETRANSMISSION,
    FLAG_TRUNCATED,
    MalformedMessage,
    ReservationMessage,
    decode,
    flow_key_from_ports,
    ports_from_flow_key,
)

__all__ = [
    "FLAG_RETRANSMISSION",
    "FLAG_TRUNCATED",
    "MalformedMessage",
    "ReservationMessage",
    "decode",
    "flow_key_from_ports",
    "ports_from_flow_key",
]
