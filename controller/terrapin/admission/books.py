"""The admission ledger's books: per port and priority level, what the admitted channels and
standing loads add up to (AdmissionLedger keeps one LevelBook per level of every port)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from terrapin.admission.model import HopAllocation, LevelLoad, PortModel, StandingLoad


@dataclass
class LevelBook:
    """What one priority level of one port holds: the sum of its channels' charged rates and
    bursts, and (to find the level's largest packet and tightest promise) their packet sizes
    and protected bounds counted."""

    rate: int = 0
    burst: int = 0
    channels: int = 0
    packets: Counter[int] = field(default_factory=Counter)
    protected: Counter[int] = field(default_factory=Counter)

    def snapshot(self) -> LevelLoad:
        return LevelLoad(
            rate=self.rate,
            burst=self.burst,
            max_packet=max(self.packets) if self.packets else 0,
            min_protected_us=min(self.protected) if self.protected else None,
            channels=self.channels,
        )

    def add(self, hop: HopAllocation, model: PortModel) -> None:
        rate, burst = model.charge(hop.rate, hop.burst, hop.max_packet)
        self.rate += rate
        self.burst += burst
        self.channels += 1
        self.packets[hop.max_packet] += 1
        if hop.protected_delay_us is not None:
            self.protected[hop.protected_delay_us] += 1

    def reserve(self, standing: StandingLoad, model: PortModel) -> None:
        """A standing load: charged like a channel's hop, but not a channel (no promise to
        keep, not counted in `channels`)."""
        rate, burst = model.charge(standing.rate, standing.burst, standing.max_packet)
        self.rate += rate
        self.burst += burst
        self.packets[standing.max_packet] += 1

    def remove(self, hop: HopAllocation, model: PortModel) -> None:
        rate, burst = model.charge(hop.rate, hop.burst, hop.max_packet)
        self.rate -= rate
        self.burst -= burst
        self.channels -= 1
        _discount(self.packets, hop.max_packet)
        if hop.protected_delay_us is not None:
            _discount(self.protected, hop.protected_delay_us)


def _discount(counter: Counter[int], value: int) -> None:
    counter[value] -= 1
    if counter[value] <= 0:
        del counter[value]
