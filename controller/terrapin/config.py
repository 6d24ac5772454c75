"""The controller's one configuration file (YAML, or TOML by extension), validated on load.

Every error names the offending key (pydantic's location), so a bad file fails at start-up
with a message, never later with a traceback. docs/controller.md shows a complete example.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
import tomllib
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from terrapin.admission.model import PortModel
from terrapin.constants import ADMITTED_PRIORITIES, CONTROL_FRAME_BYTES, CPU_PORT, PROTOCOL_PRIORITY
from terrapin.p4program import AGGREGATE_KEY, MAX_AGGREGATES

_MAC = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


def _ipv4(value: str) -> str:
    return str(ipaddress.IPv4Address(value))


def _mac(value: str) -> str:
    if not _MAC.match(value):
        raise ValueError(f"{value!r} is not a MAC address like 02:00:00:00:00:01")
    return value.lower()


# An address a router answers from (a port's gateway, a switch's own), in its canonical form.
_IPv4Text = Annotated[str, AfterValidator(_ipv4)]
# A port's or a host's MAC address, in lower case as the data plane's tables are written.
_MacText = Annotated[str, AfterValidator(_mac)]


class ConfigError(Exception):
    """The configuration file is unreadable or invalid; the message says where."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClassConfig(_Strict):
    name: str
    priorities: list[int]
    share: float = Field(gt=0, le=1)
    peak_policed: bool = False

    @field_validator("priorities")
    @classmethod
    def _admitted(cls, value: list[int]) -> list[int]:
        for p in value:
            if p not in ADMITTED_PRIORITIES:
                raise ValueError(f"priority {p} is not an admitted level (1..6)")
        return value


TestName = Literal["rate_buffer", "static_priority", "class_shares", "best_effort_floor"]


def _default_tests() -> list[TestName]:
    # Class shares need classes configured (seed 003's experiment does), so they are opt-in.
    return ["rate_buffer", "static_priority", "best_effort_floor"]


class AdmissionConfig(_Strict):
    """Per-port admission settings; `admission:` at the top sets defaults for every port."""

    tests: list[TestName] = Field(default_factory=_default_tests)
    queue_capacity: int = Field(default=64 * 1500, gt=0)  # bytes per priority queue
    largest_packet: int = Field(default=1500, gt=0)
    best_effort_max_packet: int | None = Field(default=None, ge=0)
    reservable_fraction: float = Field(default=0.9, gt=0, le=1)
    packet_granularity: int = Field(default=0, ge=0)
    timer_tick_us: int = Field(default=0, ge=0)
    level_delay_budget_us: dict[int, int] = Field(default_factory=dict)
    classes: list[ClassConfig] = Field(default_factory=list)
    best_effort_floor: float = Field(default=0.1, ge=0, lt=1)
    allocation_interval_us: int = Field(default=0, ge=0)
    per_channel_overhead_us: int = Field(default=0, ge=0)
    control_rate: int = Field(default=12_000, ge=0)  # bytes/s the protocol may use at level 7
    control_burst: int = Field(default=8 * CONTROL_FRAME_BYTES, ge=0)  # eight messages back to back

    @field_validator("level_delay_budget_us")
    @classmethod
    def _levels(cls, value: dict[int, int]) -> dict[int, int]:
        for level, budget in value.items():
            if level not in ADMITTED_PRIORITIES or budget <= 0:
                raise ValueError(f"level {level}: budget {budget} (levels 1..6, budget > 0 µs)")
        return value


AggregateField = Literal["dscp", "protocol", "l4_dst_port"]


def ternary(value: int | str, bits: int) -> tuple[int, int]:
    """A match value of the configuration as (value, mask): an integer matches exactly, a
    "value/mask" string (each part decimal or 0x-hex) only the mask's bits."""
    full = (1 << bits) - 1
    if isinstance(value, int):
        number, mask = value, full
    else:
        number_text, slash, mask_text = value.partition("/")
        try:
            number = int(number_text.strip(), 0)
            mask = int(mask_text.strip(), 0) if slash else full
        except ValueError:
            raise ValueError(f"{value!r} is not a number or value/mask like 48/0x38") from None
    if not 0 <= number <= full or not 0 <= mask <= full:
        raise ValueError(f"{value!r} does not fit in {bits} bits")
    if mask == 0:
        raise ValueError(f"{value!r} has mask 0, which matches anything: leave the field out")
    if number & ~mask:
        raise ValueError(f"{value!r} sets bits outside its mask")
    return number, mask


class AggregatePeak(_Strict):
    """The meter's peak bucket (RFC 2698 PIR/PBS); without it, peak = committed."""

    rate: int = Field(gt=0)  # bytes/s
    burst: int = Field(gt=0)  # bytes


class AggregateConfig(_Strict):
    """An unadmitted traffic aggregate (say network control by DSCP) lifted out of best effort
    to `priority` and policed by one meter to (rate, burst); admission reserves that envelope
    at that level on every port (docs/controller.md, "Aggregates")."""

    name: str = Field(min_length=1)
    # One mapping, or a list of them sharing the aggregate's meter; field → exact or value/mask.
    match: list[dict[AggregateField, int | str]]
    priority: int
    rate: int = Field(gt=0)  # bytes/s, IPv4 bytes as a channel's ρ
    burst: int = Field(gt=0)  # bytes
    max_packet: int = Field(default=1500, gt=0)  # its largest packet (IPv4 total length)
    peak: AggregatePeak | None = None

    @field_validator("match", mode="before")
    @classmethod
    def _one_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, dict) else value

    @field_validator("match")
    @classmethod
    def _fields(cls, value: list[dict[AggregateField, int | str]]) -> list[dict[AggregateField, int | str]]:
        if not value:
            raise ValueError("needs at least one match")
        for index, fields in enumerate(value):
            if not fields:
                raise ValueError(
                    f"match {index} is empty, which lifts every IPv4 packet: give dscp, "
                    "protocol or l4_dst_port"
                )
            for name, given in fields.items():
                try:
                    ternary(given, AGGREGATE_KEY[name])
                except ValueError as exc:
                    raise ValueError(f"match {index}, {name}: {exc}") from None
        return value

    @field_validator("priority")
    @classmethod
    def _level(cls, value: int) -> int:
        if value not in ADMITTED_PRIORITIES and value != PROTOCOL_PRIORITY:
            raise ValueError(f"priority {value} is not a level an aggregate can use (1..7)")
        return value

    @model_validator(mode="after")
    def _envelope(self) -> AggregateConfig:
        if self.burst < self.max_packet:
            raise ValueError(
                f"aggregate {self.name}: burst {self.burst} is below max_packet {self.max_packet}, "
                "so its meter would never pass such a packet"
            )
        if self.peak is not None and (self.peak.rate < self.rate or self.peak.burst < self.max_packet):
            raise ValueError(
                f"aggregate {self.name}: peak needs rate >= rate ({self.rate}) and burst >= max_packet"
            )
        return self

    def matches(self) -> list[dict[str, tuple[int, int]]]:
        """Each match as field → (value, mask), as the aggregates table takes it."""
        return [{f: ternary(v, AGGREGATE_KEY[f]) for f, v in m.items()} for m in self.match]


class PortConfig(_Strict):
    number: int = Field(ge=0, lt=CPU_PORT)
    mac: _MacText
    rate_bps: int = Field(gt=0)
    # Set when the switch shapes the port in packets/s rather than bytes/s (BMv2's set_queue_rate,
    # which limits each priority queue to this many packets/s whatever their size): admission then
    # charges every packet one largest-packet slot (docs/controller.md, "Packet-rate ports").
    rate_pps: int | None = Field(default=None, gt=0)
    peer: str  # a host name, or "switch:port" for a trunk
    gateway_ip: _IPv4Text | None = None
    admission: dict[str, object] = Field(default_factory=dict)


class TlsFiles(_Strict):
    """A TLS identity and the CA it trusts, as PEM files (paths relative to --base-dir, as
    p4:'s). `cert` and `key` come together or not at all (then the peer checks no certificate
    of ours); terrapin/tls.py reads and checks them at start-up."""

    ca: str
    cert: str | None = None
    key: str | None = None

    @model_validator(mode="after")
    def _pair(self) -> TlsFiles:
        if (self.cert is None) != (self.key is None):
            raise ValueError("cert and key go together (a certificate is useless without its key)")
        return self


class SwitchTlsConfig(TlsFiles):
    """P4Runtime over TLS to one switch (docs/deployment.md, "TLS between hosts")."""

    # The name to check in the switch's certificate instead of the address's host.
    server_name: str | None = Field(default=None, min_length=1)


class SwitchConfig(_Strict):
    name: str
    address: str  # P4Runtime gRPC address host:port
    tls: SwitchTlsConfig | None = None  # plaintext without it
    device_id: int = Field(default=1, ge=0)
    router_ip: _IPv4Text | None = None  # source of messages this router originates
    # terrapin: terrapin-switch; bmv2: p4lang's simple_switch_grpc, whose P4Runtime server does not
    # read registers, so telemetry goes through `bmv2_cli` on `thrift_port` (terrapin/bmv2.py).
    kind: Literal["terrapin", "bmv2"] = "terrapin"
    thrift_port: int | None = Field(default=None, gt=0, le=65535)
    bmv2_cli: str = "simple_switch_CLI"
    # How much the switch's delay outside its egress queues varies, µs: how much later than a
    # packet's arrival it may stamp it, and how much longer it may take to reach the queue and
    # from the queue to the wire (`make jitter` measures it). The policers of the channels that
    # enter here tolerate it, and admission counts it in every burst and bound through here
    # (docs/controller.md, "Jitter"). 0: the switch is taken to be exact.
    jitter_us: int = Field(default=0, ge=0, le=1_000_000)
    ports: list[PortConfig]

    @model_validator(mode="after")
    def _bmv2_thrift(self) -> SwitchConfig:
        if self.kind == "bmv2" and self.thrift_port is None:
            raise ValueError(f"switch {self.name}: kind bmv2 needs thrift_port (its --thrift-port)")
        return self


class HostConfig(_Strict):
    name: str
    ip: str
    mac: _MacText
    switch: str
    port: int

    @field_validator("ip")
    @classmethod
    def _ip(cls, value: str) -> str:
        return str(ipaddress.IPv4Address(value.split("/")[0]))


class P4Config(_Strict):
    p4info: str = "build/p4/terrapin.p4info.txtpb"
    json_path: str = Field(default="build/p4/terrapin.json", alias="json")
    # "if_different": push only when the switch's pipeline cookie differs (after a switch
    # restart it has none); "always": push at every connection (clears the switch).
    push: Literal["if_different", "always", "never"] = "if_different"

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class RestTlsConfig(TlsFiles):
    """HTTPS for the REST API: `cert`/`key` are this controller's server certificate (and, for
    a backup forwarding writes, its client certificate to the primary); `ca` is what the
    primary's certificate must chain to, and with `client_auth` what every client's must."""

    client_auth: bool = False

    @model_validator(mode="after")
    def _served(self) -> RestTlsConfig:
        if self.cert is None:
            raise ValueError("HTTPS needs this controller's cert and key")
        return self


# The roles' tokens from the environment, when the configuration names neither the token nor
# its file (a secret kept out of the file, e.g. systemd's EnvironmentFile).
OPERATOR_TOKEN_ENV = "TERRAPIN_OPERATOR_TOKEN"
VIEWER_TOKEN_ENV = "TERRAPIN_VIEWER_TOKEN"


class RestConfig(_Strict):
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    # The operator's bearer token (every mutating call); generated and logged if none is given
    # here, in token_file or in $TERRAPIN_OPERATOR_TOKEN.
    token: str | None = None
    token_file: str | None = None
    # The viewer's: it may read, and is refused every change with 403 (none by default).
    viewer_token: str | None = None
    viewer_token_file: str | None = None
    tls: RestTlsConfig | None = None  # plain HTTP without it


class ProtocolConfig(_Strict):
    hold_seconds: float = Field(default=5.0, gt=0)  # tentative holds expire after this
    # A host flooding REQUEST_ADMIT with fresh contexts holds capacity until the holds expire;
    # this many tentative holds per initiator at once, then REQUEST_DENIED (HOLD_LIMIT).
    max_holds_per_initiator: int = Field(default=16, gt=0)


# A link probe frame (terrapin/links.py): Ethernet, the probe's fixed fields, its sender's name;
# padded to Ethernet's smallest frame.
LINK_PROBE_HEADER_BYTES = 33
LINK_PROBE_MIN_BYTES = 60


class LinksConfig(_Strict):
    """How the controller learns which trunks carry traffic (terrapin/links.py; docs/controller.md
    "Trunks"): a probe out of every trunk port every probe_interval_ms, a trunk down after
    down_after_ms without one in either direction, up again after up_after_ms of them. A switch
    not yet connected since the controller started (or took over) takes its trunks down only
    after connect_grace_ms: until then nothing is known of them, and they count as up."""

    enabled: bool = True
    probe_interval_ms: float = Field(default=25.0, ge=1, le=60_000)
    down_after_ms: float = Field(default=250.0, ge=1, le=600_000)
    up_after_ms: float = Field(default=500.0, ge=0, le=600_000)
    connect_grace_ms: float = Field(default=10_000.0, ge=0, le=600_000)

    @model_validator(mode="after")
    def _heard_in_time(self) -> LinksConfig:
        if self.down_after_ms < 2 * self.probe_interval_ms:
            raise ValueError(
                f"down_after_ms {self.down_after_ms} must be at least twice probe_interval_ms"
                f" {self.probe_interval_ms}: one late probe would take a trunk down"
            )
        return self


class MonitorConfig(_Strict):
    """The guarantee monitor (docs/operations.md): how often it reads every switch's telemetry
    and how many violation events the store keeps."""

    enabled: bool = True
    interval_s: float = Field(default=1.0, ge=0.05, le=3600)
    history: int = Field(default=1000, gt=0)
    # Clear the max-delay/max-depth registers after each read, so each poll reports the
    # window's maxima (terrapin-switch; p4lang's PI cannot write registers). Off by default:
    # /status/switches, REPORT_STATUS and make demo report the maxima since the switch started;
    # without clearing, a window's maximum is shown when it raised the register.
    reset_maxima: bool = False
    # At most this many channels have Prometheus series of their own (terrapin/metrics.py).
    channel_series: int = Field(default=1000, ge=0)
    # The violation history's SQLite file; by default the store's file, or (on a PostgreSQL
    # store) build/run/events-<replica>.sqlite: each replica keeps the history it observed.
    events: str | None = None


class ReplicationConfig(_Strict):
    """Replicated controllers on one PostgreSQL store (docs/deployment.md). Each process names
    itself and its index (distinct per replica: its P4Runtime backup id) here or with
    --replica/--replica-index, so N replicas can share one file."""

    replica: str | None = None
    index: int | None = Field(default=None, ge=0, lt=4096)
    # Where the other replicas forward writes to this one while it is primary; by default
    # http://<rest.host>:<rest.port>.
    url: str | None = None
    # The primary renews its lease every renew_seconds; a backup takes it over once it has gone
    # unrenewed for lease_seconds, so failover starts within lease_seconds + renew_seconds.
    lease_seconds: float = Field(default=1.0, gt=0, le=60)
    renew_seconds: float = Field(default=0.2, gt=0, le=20)

    @model_validator(mode="after")
    def _renewed_in_time(self) -> ReplicationConfig:
        if self.renew_seconds * 2 > self.lease_seconds:
            raise ValueError(
                f"renew_seconds {self.renew_seconds} must be at most half of "
                f"lease_seconds {self.lease_seconds}"
            )
        return self


class Config(_Strict):
    p4: P4Config = Field(default_factory=P4Config)
    rest: RestConfig = Field(default_factory=RestConfig)
    # A SQLite file (one controller), or a PostgreSQL URL postgresql://user@host:port/db (needed
    # for replication).
    store: str = "build/run/terrapin.sqlite"
    # PostgreSQL over TLS, the server's certificate checked against `ca` for the URL's host
    # (sslmode=verify-full); `cert`/`key` when the server asks for a client certificate.
    store_tls: TlsFiles | None = None
    replication: ReplicationConfig | None = None
    protocol: ProtocolConfig = Field(default_factory=ProtocolConfig)
    excess: Literal["demote", "drop"] = "demote"  # traffic beyond a channel's envelope
    admission: AdmissionConfig = Field(default_factory=AdmissionConfig)
    switches: list[SwitchConfig]
    hosts: list[HostConfig] = Field(default_factory=list)
    monitor: MonitorConfig = Field(default_factory=MonitorConfig)
    links: LinksConfig = Field(default_factory=LinksConfig)
    aggregates: list[AggregateConfig] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> Config:
        names = [s.name for s in self.switches]
        if len(set(names)) != len(names):
            raise ValueError("switch names must be unique")
        if self.replication is not None and not self.store.startswith(("postgresql://", "postgres://")):
            raise ValueError(
                "replication needs a PostgreSQL store (store: postgresql://user@host:port/db); "
                f"{self.store!r} is a SQLite file, which one process owns"
            )
        if self.store_tls is not None and not self.store.startswith(("postgresql://", "postgres://")):
            raise ValueError("store_tls is for a PostgreSQL store (store: postgresql://...)")
        aggregate_names = [a.name for a in self.aggregates]
        if len(set(aggregate_names)) != len(aggregate_names):
            raise ValueError("aggregates: names must be unique")
        entries = sum(len(a.match) for a in self.aggregates)
        if entries > MAX_AGGREGATES:
            raise ValueError(f"aggregates: {entries} matches, the data plane holds {MAX_AGGREGATES}")
        switch_ports = {s.name: {p.number: p for p in s.ports} for s in self.switches}
        host_names = {h.name for h in self.hosts}
        for s in self.switches:
            numbers = [p.number for p in s.ports]
            if len(set(numbers)) != len(numbers):
                raise ValueError(f"switch {s.name}: port numbers must be unique")
            for p in s.ports:
                if ":" in p.peer:
                    peer_switch, _, peer_port = p.peer.partition(":")
                    other = switch_ports.get(peer_switch, {}).get(int(peer_port or -1))
                    if other is None:
                        raise ValueError(f"{s.name}:{p.number}: peer {p.peer} is not a port")
                    if other.peer != f"{s.name}:{p.number}":
                        raise ValueError(f"{s.name}:{p.number}: peer {p.peer} does not point back")
                elif p.peer not in host_names:
                    raise ValueError(f"{s.name}:{p.number}: peer {p.peer!r} is not a host")
        for h in self.hosts:
            port = switch_ports.get(h.switch, {}).get(h.port)
            if port is None:
                raise ValueError(f"host {h.name}: {h.switch}:{h.port} is not a configured port")
            if port.peer != h.name:
                raise ValueError(f"host {h.name}: {h.switch}:{h.port} names peer {port.peer}")
        ips = [h.ip for h in self.hosts]
        if len(set(ips)) != len(ips):
            raise ValueError("host addresses must be unique")
        for s in self.switches:
            for p in s.ports:
                merged = self.admission.model_dump() | p.admission
                try:
                    AdmissionConfig.model_validate(merged)
                except ValidationError as exc:
                    raise ValueError(f"{s.name}:{p.number} admission: {exc}") from None
        return self

    def rest_token(self) -> str:
        """The operator's token (a ConfigError names a source that gives no usable one); a
        random one when none is configured."""
        given = _role_token(self.rest.token, self.rest.token_file, OPERATOR_TOKEN_ENV, "token")
        return given if given is not None else secrets.token_urlsafe(24)

    def rest_token_configured(self) -> bool:
        return bool(self.rest.token or self.rest.token_file or os.environ.get(OPERATOR_TOKEN_ENV))

    def rest_viewer_token(self) -> str | None:
        return _role_token(
            self.rest.viewer_token, self.rest.viewer_token_file, VIEWER_TOKEN_ENV, "viewer_token"
        )

    def port_models(self) -> list[PortModel]:
        """Every configured port as the admission test sees it (terrapin/port_models.py)."""
        from terrapin.port_models import configured_port_models  # it reads this module's types

        return configured_port_models(self)

    def link_probe_bytes(self) -> int:
        """The longest link probe frame any switch sends (LINK_PROBE_HEADER_BYTES + its name)."""
        longest = max((len(s.name.encode()) for s in self.switches), default=0)
        return max(LINK_PROBE_MIN_BYTES, LINK_PROBE_HEADER_BYTES + longest)


def _role_token(value: str | None, file: str | None, env: str, setting: str) -> str | None:
    """A role's token from the configuration, else its file, else the environment. A file's
    one final newline ends its line; any other whitespace is refused, not stripped: a token is
    compared byte for byte, and one read with a stray space would be refused at every request
    with nothing to say why."""
    if value is not None:
        return _usable_token(value, f"rest.{setting}")
    if file is not None:
        try:
            text = Path(file).read_text()
        except OSError as exc:
            raise ConfigError(f"rest.{setting}_file {file}: cannot read it: {exc.strerror}") from None
        return _usable_token(text.removesuffix("\n"), f"rest.{setting}_file {file}")
    if env in os.environ:
        return _usable_token(os.environ[env], f"${env}")
    return None


def _usable_token(token: str, source: str) -> str:
    if not token:
        raise ConfigError(f"{source}: the token is empty")
    if token != token.rstrip():
        raise ConfigError(
            f"{source}: the token ends in whitespace ({token[len(token.rstrip()) :]!r}); remove it"
        )
    if token != token.lstrip():
        raise ConfigError(f"{source}: the token starts with whitespace; remove it")
    if any(c.isspace() for c in token):
        raise ConfigError(f"{source}: the token contains whitespace; a bearer token cannot")
    return token


def load_config(path: str | Path) -> Config:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}") from None
    try:
        data = tomllib.loads(text) if path.suffix == ".toml" else yaml.safe_load(text)
    except (yaml.YAMLError, tomllib.TOMLDecodeError) as exc:
        kind = "TOML" if path.suffix == ".toml" else "YAML"
        raise ConfigError(f"{path}: not valid {kind}: {exc}") from None
    return parse_config(data, str(path))


def parse_config(data: object, source: str = "config") -> Config:
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(x) for x in err['loc']) or '(top)'}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigError(f"{source}: {problems}") from None
