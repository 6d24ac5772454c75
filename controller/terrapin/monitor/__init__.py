"""The guarantee monitor: live telemetry checked against every admitted bound (docs/operations.md).

checks.py   expectations from the admission model and conclusions from two samples (pure)
events.py   violation episodes in SQLite, bounded
trunks.py   the promises a dead trunk breaks (pure)
service.py  the polling loop, the data plane's delay bounds, the live stream
"""

from terrapin.monitor.checks import NETWORK, SOURCE, Finding, PollVerdict
from terrapin.monitor.events import Event, EventLog
from terrapin.monitor.service import BoundsFirstProgrammer, GuaranteeMonitor, MonitorFabric

__all__ = [
    "NETWORK",
    "SOURCE",
    "BoundsFirstProgrammer",
    "Event",
    "EventLog",
    "Finding",
    "GuaranteeMonitor",
    "MonitorFabric",
    "PollVerdict",
]
