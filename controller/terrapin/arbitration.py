"""Lease-driven P4Runtime client arbitration: which controller replica is every switch's primary.

Replicated controllers all keep a stream to every switch. A lease outside P4Runtime (the store)
decides which replica may act; this module makes the switches agree with it:

* the replica holding lease term T bids `primary_election_id(T)`, higher than every earlier
  term's id, so each switch makes it primary and refuses writes from any older term's replica
  (PERMISSION_DENIED, P4Runtime spec §5.3: the primary is the live stream whose id equals the
  highest the device has ever seen);
* every other replica is a backup and never promotes itself. finsy's own Arbitrator answers
  NOT_FOUND (no primary) by re-bidding the departed primary's id, which makes any surviving
  replica primary without the lease; `LeaseArbitrator` only ever bids what it was told.

A backup's bid is its `backup_election_id`, below every primary id. On the wire a backup leaves
`election_id` unset by default: a set id is primary on a switch that has seen no higher one (a
fresh or restarted switch), whereas an unset id is never primary and need not be unique (§5.3
checks uniqueness only for set ids). simple_switch_grpc (p4lang/PI) reads an unset id as 0 and
refuses two streams with the same id, so for it the backup id is sent (`announce_backup_id`);
PI also makes the highest *live* id primary, so there a backup does take over when the lease
holder's stream ends. `SwitchArbitration.primary_for_lease` lets a ready handler tell the two
apart.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Container, Iterable

import finsy as fy
from finsy.grpcutil import GRPCStatusCode
from finsy.p4arbitrator import Arbitrator
from finsy.p4client import P4ClientError, P4RpcStatus
from finsy.pbutil import PBMessage
from finsy.proto import U128, p4r

LOG = logging.getLogger(__name__)

# A term's id is the term in the high bits, so ids grow with terms and every backup id (below
# 2**TERM_SHIFT) sits under term 1's. P4Runtime ids are 128-bit: terms have 96 bits.
TERM_SHIFT = 32
MAX_TERM = (1 << (128 - TERM_SHIFT)) - 1
MAX_REPLICAS = (1 << TERM_SHIFT) - 1
# No primary has been seen on this stream (finsy's value for the same state).
NO_PRIMARY = -1
# "Election id in use" (§5.3 rules 1.2, 2.4) is usually this replica's own previous stream, which
# the switch has not yet seen close: wait for it a few times before giving the connection up.
ID_IN_USE_ATTEMPTS = 5
ID_IN_USE_WAIT_S = 0.5


def primary_election_id(term: int) -> int:
    """The election id of the replica holding lease term `term` (≥ 1): strictly increasing in the
    term and above every backup id."""
    if not 1 <= term <= MAX_TERM:
        raise ValueError(f"a lease term is 1..{MAX_TERM}, not {term}")
    return term << TERM_SHIFT


def backup_election_id(replica_index: int) -> int:
    """The election id a replica bids while it does not hold the lease: distinct per replica and
    below every primary id. Never 0: PI reads an unset id as 0, and some servers refuse 0."""
    if not 0 <= replica_index < MAX_REPLICAS:
        raise ValueError(f"a replica index is 0..{MAX_REPLICAS - 1}, not {replica_index}")
    return replica_index + 1


def term_of(election_id: int) -> int | None:
    """The lease term a primary id stands for; None for a backup id or no id."""
    term = election_id >> TERM_SHIFT
    return term if term >= 1 else None


# finsy 0.30 knows PI's "Election id already exists" and Stratum's "... is already used ..." (and
# terrapin-switch's "... is already used by another controller"); terrapin-switch before
# 2026-11-25 said "... is in use ...", which finsy took for a broken stream.
_IN_USE = re.compile(r"election id .*\bin use\b", re.IGNORECASE)


def election_id_in_use(error: P4ClientError) -> bool:
    """Whether the switch ended a stream because its election id is another live stream's."""
    return error.is_election_id_used or (
        error.code == GRPCStatusCode.INVALID_ARGUMENT and _IN_USE.search(error.message) is not None
    )


class ElectionIdInUse(RuntimeError):
    """Another live stream of the switch bids the same id: the connection is given up, and finsy
    reconnects and bids again (never another id: a lower one cannot win, a higher one is not
    ours)."""


class LeaseArbitrator(Arbitrator):
    """finsy's Arbitrator for a replica that bids only the id it is told (`bid`) and is primary or
    backup exactly as the switch says: it never re-bids for a primary on NOT_FOUND."""

    backup_id: int
    announce_backup_id: bool

    def __init__(
        self,
        backup_id: int,
        *,
        announce_backup_id: bool = False,
        role_name: str = "",
        role_config: PBMessage | None = None,
    ) -> None:
        super().__init__(backup_id, role_name, role_config)
        self.backup_id = backup_id
        self.announce_backup_id = announce_backup_id
        # Whether this replica may write now by its own account (its lease, by its own clock):
        # a write made without it carries the backup id, which every switch refuses.
        self.may_write: Callable[[], bool] = lambda: True
        # Set once the switch answered this stream's first arbitration: a bid changed before
        # that goes out with the handshake, one changed after it goes out at once.
        self._answered = False
        self._primary = asyncio.Event()
        # The id this stream was made primary under. PI makes a backup primary under its backup
        # id (the highest live one); when that replica then bids its term, the switch's OK must
        # run the primary's ready logic again, under the id that carries the lease.
        self._primary_under: int | None = None

    @property
    def bids_primary(self) -> bool:
        return self.election_id != self.backup_id

    async def handshake(self, switch: fy.Switch, *, conflict: bool = False) -> None:
        """The stream's first arbitration (finsy calls this again on a new stream after the switch
        ended the old one because the id was in use)."""
        was_primary = self.is_primary
        self._set_backup()
        self._answered = False
        self.primary_id = NO_PRIMARY
        for attempt in range(1, ID_IN_USE_ATTEMPTS + 1):
            sent = self.election_id
            await self._send(switch)
            response = await self._receive(switch)  # None: the id is in use, the stream ended
            if response is not None:
                break
            LOG.warning(
                "switch %s: election id %d is in use by another stream (attempt %d of %d)",
                switch.name,
                sent,
                attempt,
                ID_IN_USE_ATTEMPTS,
            )
            await asyncio.sleep(ID_IN_USE_WAIT_S)
        else:
            raise ElectionIdInUse(f"switch {switch.name}: election id {self.election_id} is in use")
        self._answered = True
        self._learn_primary_id(response)
        code = P4RpcStatus.from_status(response.status).code
        match code:
            case GRPCStatusCode.OK:
                self._set_primary(switch)
            case GRPCStatusCode.ALREADY_EXISTS | GRPCStatusCode.NOT_FOUND:
                pass
            case other:
                raise ValueError(f"switch {switch.name}: unexpected arbitration status {other!r}")
        if self.election_id != sent:  # bid() ran while the switch had not answered yet
            if self.election_id < sent:  # as in bid(): stop acting as primary before the switch
                self._set_backup()
            await self._send(switch)
        if conflict and was_primary != self.is_primary:
            # A new stream, not the first: finsy runs its ready logic only on role changes.
            if self.is_primary:
                _become_primary(switch)
            else:
                _become_backup(switch)

    async def update(self, switch: fy.Switch, msg: p4r.MasterArbitrationUpdate) -> None:
        """An arbitration notice on a live stream: follow the switch, and nothing more."""
        self._learn_primary_id(msg)
        code = P4RpcStatus.from_status(msg.status).code
        match code:
            case GRPCStatusCode.OK:
                if not self.is_primary or self._primary_under != self.election_id:
                    self._set_primary(switch)
                    _become_primary(switch)
            case GRPCStatusCode.ALREADY_EXISTS | GRPCStatusCode.NOT_FOUND:
                # NOT_FOUND (no primary) is where finsy would bid for the departed primary's id:
                # here only the lease decides who bids above the others.
                if self.is_primary:
                    self._set_backup()
                    _become_backup(switch)
            case other:
                raise ValueError(f"switch {switch.name}: unexpected arbitration status {other!r}")

    async def bid(self, switch: fy.Switch, election_id: int) -> None:
        """Bid `election_id` from now on: at once on a live stream, else at the next handshake.
        Bidding lower than a primary's id demotes at once, without waiting for the switch (which
        refuses the primary's writes from then on, §5.3): this replica must stop acting as
        primary before anything else."""
        if election_id < 0:
            raise ValueError(f"an election id is not negative: {election_id}")
        lowered = election_id < self.election_id
        self.election_id = election_id
        if not self._answered:
            return
        if lowered and self.is_primary:
            self._set_backup()
            _become_backup(switch)
        elif self.is_primary and self._primary_under != election_id:
            # Primary under another id (PI's promotion of a backup): not the lease's primary
            # until the switch answers this bid.
            self._primary.clear()
        client = switch._p4client
        if client is None or client.channel is None:  # the stream is closing: reset() follows
            return
        try:
            await self._send(switch)
        except P4ClientError as exc:
            LOG.info("switch %s: bid %d kept for the next stream (%s)", switch.name, election_id, exc)

    def complete_request(self, msg: PBMessage) -> None:
        """Stamps requests as finsy does, except that a write made while not primary carries the
        backup id: a switch knows a writer only by its id (§5), so a stream whose bid is refused
        as in use must not write as the stream that holds it."""
        super().complete_request(msg)
        if isinstance(msg, p4r.WriteRequest | p4r.SetForwardingPipelineConfigRequest) and (
            not self.is_primary or not self.may_write()
        ):
            msg.election_id.CopyFrom(U128.encode(self.backup_id))

    async def wait_primary(self) -> None:
        """Returns once the switch has made this stream primary."""
        await self._primary.wait()

    def reset(self) -> None:
        """The stream ended. Unlike finsy's, the bid stays: a replica that holds a term bids it
        again on reconnect, and one that lost it has been told so through `bid`."""
        self._set_backup()
        self._answered = False
        self.primary_id = NO_PRIMARY

    async def _send(self, switch: fy.Switch) -> None:
        assert switch._p4client is not None
        update = p4r.MasterArbitrationUpdate(role=self.role, device_id=switch.device_id)
        if self.bids_primary or self.announce_backup_id:
            update.election_id.CopyFrom(U128.encode(self.election_id))
        await switch._p4client.send(p4r.StreamMessageRequest(arbitration=update))

    async def _receive(self, switch: fy.Switch) -> p4r.MasterArbitrationUpdate | None:
        try:
            return await super()._receive(switch)
        except P4ClientError as exc:
            if election_id_in_use(exc):
                return None
            raise

    def _learn_primary_id(self, msg: p4r.MasterArbitrationUpdate) -> None:
        # The switch's highest id (unset until some stream was primary): a later term than ours
        # here means this replica's lease is stale.
        self.primary_id = U128.decode(msg.election_id) if msg.HasField("election_id") else NO_PRIMARY

    def _set_primary(self, switch: fy.Switch) -> None:
        if not self.bids_primary:
            # PI promotes the highest live stream; a spec server, a set id on a fresh switch.
            LOG.warning("switch %s: made primary while bidding the backup id %d", switch.name, self.backup_id)
        self.is_primary = True
        self._primary_under = self.election_id
        self._primary.set()

    def _set_backup(self) -> None:
        self.is_primary = False
        self._primary_under = None
        self._primary.clear()


# finsy 0.30's role-change hooks, which its own Arbitrator calls: each cancels the tasks of the
# previous role and runs the ready logic again (pipeline push or check, then the ready handler).
def _become_primary(switch: fy.Switch) -> None:
    switch._become_primary()  # type: ignore[no-untyped-call]


def _become_backup(switch: fy.Switch) -> None:
    switch._become_backup()  # type: ignore[no-untyped-call]


def install_lease_arbitrator(
    switch: fy.Switch, replica_index: int, *, announce_backup_id: bool = False
) -> LeaseArbitrator:
    """Make `switch` arbitrate as replica `replica_index`, starting as a backup. Call it before the
    switch runs, and again after any assignment to `switch.options`.

    finsy (checked against 0.30.0) has no hook for this: Switch.__init__ and the `options` setter
    build their own Arbitrator into the private `_arbitrator`, which run() and the stream use.
    This is the only place that replaces it."""
    current = getattr(switch, "_arbitrator", None)
    if not isinstance(current, Arbitrator):
        raise RuntimeError(f"finsy {fy.__version__}: Switch keeps no _arbitrator to replace")
    if switch._p4client is not None:
        raise RuntimeError(f"switch {switch.name} is running: install its arbitrator before it starts")
    arbitrator = LeaseArbitrator(
        backup_election_id(replica_index),
        announce_backup_id=announce_backup_id,
        role_name=switch.options.role_name,
        role_config=switch.options.role_config,
    )
    switch._arbitrator = arbitrator
    return arbitrator


class SwitchArbitration:
    """One replica's arbitration on all its switches: backup until `claim(term)`, and a backup
    again after `step_down()`. When a switch makes the claim primary, finsy pushes or checks the
    pipeline and calls the switch's ready handler, where the controller reconciles."""

    def __init__(
        self,
        switches: Iterable[fy.Switch],
        replica_index: int,
        *,
        announce_backup_id: bool | Container[str] = False,
    ) -> None:
        """`announce_backup_id`: for every switch, or for the switches named (PI's)."""
        self.replica_index = replica_index
        self._switches = {sw.name: sw for sw in switches}
        self._arbitrators = {
            name: install_lease_arbitrator(
                sw,
                replica_index,
                announce_backup_id=announce_backup_id
                if isinstance(announce_backup_id, bool)
                else name in announce_backup_id,
            )
            for name, sw in self._switches.items()
        }
        self._term: int | None = None

    @property
    def term(self) -> int | None:
        """The lease term this replica claims on the switches; None while it is a backup."""
        return self._term

    def is_primary(self, name: str) -> bool:
        return self._arbitrators[name].is_primary

    def fence_writes(self, may_write: Callable[[], bool]) -> None:
        """Every write is stamped with the backup id (refused) unless `may_write()` says the
        replica still holds its lease. PI makes the highest *live* id primary: when the lease's
        new holder steps down, a deposed replica that still bids its old term becomes primary
        again on simple_switch_grpc, and its writes were taken (`make chaos SWITCH=bmv2`)."""
        for arbitrator in self._arbitrators.values():
            arbitrator.may_write = may_write

    def primary_for_lease(self, name: str) -> bool:
        """Whether switch `name` is primary under the claimed term, not merely primary: the test
        for a ready handler before it writes (PI promotes a backup when the primary leaves)."""
        arbitrator = self._arbitrators[name]
        return (
            self._term is not None
            and arbitrator.is_primary
            and arbitrator.election_id == primary_election_id(self._term)
        )

    def highest_term_seen(self) -> int | None:
        """The highest term any switch reported as its primary's: above `term`, another replica
        holds a later lease and this one is fenced out."""
        terms = [t for a in self._arbitrators.values() if (t := term_of(a.primary_id)) is not None]
        return max(terms, default=None)

    async def claim(self, term: int, timeout: float = 5.0) -> dict[str, bool]:
        """Bid lease term `term` on every switch and wait up to `timeout` seconds for each to make
        it primary; which switches did. A switch that is down, or has seen a later term, is not
        primary yet; a down one is bid on when it reconnects, and its ready handler runs then."""
        election_id = primary_election_id(term)
        if self._term is not None and term < self._term:
            raise ValueError(f"lease terms only grow: claimed {self._term}, asked for {term}")
        self._term = term
        await asyncio.gather(
            *(self._arbitrators[name].bid(sw, election_id) for name, sw in self._switches.items())
        )

        async def primary(name: str) -> bool:
            try:
                await asyncio.wait_for(self._arbitrators[name].wait_primary(), timeout)
            except TimeoutError:
                return False
            return self._arbitrators[name].election_id == election_id

        names = list(self._switches)
        return dict(zip(names, await asyncio.gather(*(primary(n) for n in names)), strict=True))

    async def step_down(self) -> None:
        """Back to the backup id on every switch: at once here (finsy cancels the primary's tasks
        and the ready handler runs as a backup), then on the switches, which then have no primary
        until a replica claims a later term."""
        self._term = None
        await asyncio.gather(
            *(
                self._arbitrators[name].bid(sw, self._arbitrators[name].backup_id)
                for name, sw in self._switches.items()
            )
        )
