"""Admission control: pure tests over a port model, and the ledger that applies them atomically.

Seed 000 §4.1.1.2 (rate and buffer), seeds 001/004 (static-priority delay bound with
non-preemption), seed 003 §4 (service-class shares), seed 002 equation (1) (best-effort reserve).
"""

from terrapin.admission.checks import PORT_TESTS, Candidate, level_delay_bound_us, round_envelope
from terrapin.admission.ledger import AdmissionLedger, LedgerError, PortStatus
from terrapin.admission.model import (
    ALL_TESTS,
    Allocation,
    ChannelEnvelope,
    ChannelKey,
    Decision,
    Denial,
    HopAllocation,
    PortId,
    PortModel,
    Rounding,
    ServiceClass,
    Violation,
)

__all__ = [
    "ALL_TESTS",
    "PORT_TESTS",
    "AdmissionLedger",
    "Allocation",
    "Candidate",
    "ChannelEnvelope",
    "ChannelKey",
    "Decision",
    "Denial",
    "HopAllocation",
    "LedgerError",
    "PortId",
    "PortModel",
    "PortStatus",
    "Rounding",
    "ServiceClass",
    "Violation",
    "level_delay_bound_us",
    "round_envelope",
]
