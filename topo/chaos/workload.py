"""The chaos run's clients (`make chaos`, issue 37): reservations created and closed through both
replicas' REST APIs at a steady rate, every request and its answer recorded with timestamps (the
history the checker judges).

Each client is a thread that, every `every_s`, picks a replica at random and either asks for a
new channel (a flow of its own between two hosts of different sites, a small random rate, so the
trunks fill and some requests are refused) or closes one of the channels it was granted. The
REST API has no modify: a change of envelope is a close and a create, which this already does.
An answer is kept whatever it was; a request that got none (the replica was killed or paused,
or the connection timed out) is recorded with status 0.
"""

from __future__ import annotations

import http.client
import json
import random
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from terrapin.admission.model import ChannelKey
from topo.chaos.checker import Answer
from topo.experiment import PYTHON

# A request that has not been answered by then is recorded unanswered (status 0).
REQUEST_TIMEOUT_S = 10.0
FIRST_SRC_PORT = 20_000


@dataclass(frozen=True)
class Replica:
    name: str  # c0, c1
    rest_url: str


@dataclass
class History:
    """What the clients asked and were told."""

    answers: list[Answer] = field(default_factory=list)
    created: dict[int, ChannelKey] = field(default_factory=dict)  # answered 201: id → key
    closed: set[int] = field(default_factory=set)  # answered 204
    maybe_closed: set[int] = field(default_factory=set)  # a DELETE nobody answered
    vanished: set[int] = field(default_factory=set)  # granted, not closed, and a DELETE found it gone
    granted_at: dict[int, float] = field(default_factory=dict)  # the 201's time
    # in band (InBand): the channels whose initiator heard REQUEST_ACCEPT, and those it closed
    accepted_in_band: set[ChannelKey] = field(default_factory=set)
    closed_in_band: set[ChannelKey] = field(default_factory=set)
    maybe_closed_in_band: set[ChannelKey] = field(default_factory=set)  # a close nobody answered


def ask(
    url: str,
    token: str,
    method: str,
    path: str,
    body: object = None,
    context: ssl.SSLContext | None = None,
    timeout: float = REQUEST_TIMEOUT_S,
) -> tuple[int, Any, str | None]:
    """(status, decoded body, Retry-After) of one request; (0, why, None) with no answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url + path, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as reply:
            text = reply.read()
            return reply.status, json.loads(text) if text else None, reply.headers.get("Retry-After")
    except urllib.error.HTTPError as error:
        text = error.read()
        try:
            decoded = json.loads(text) if text else None
        except ValueError:
            decoded = text.decode(errors="replace")
        return error.code, decoded, error.headers.get("Retry-After")
    except (OSError, ValueError, http.client.HTTPException) as error:
        # refused, reset, timed out; a reply cut short (a replica killed mid-answer: its body
        # shorter than its Content-Length is an IncompleteRead, no OSError)
        return 0, str(error) or type(error).__name__, None


class Workload:
    """`clients` threads asking `replicas` (see the module's doc) until stop()."""

    def __init__(
        self,
        replicas: Sequence[Replica],
        token: str,
        hosts: dict[str, tuple[str, str]],  # name → (address, site switch)
        seed: int,
        clients: int = 4,
        every_s: float = 0.2,
        close_share: float = 0.4,
        context: ssl.SSLContext | None = None,
    ) -> None:
        self.replicas = list(replicas)
        self.token = token
        self.pairs = [(a, b) for a in hosts for b in hosts if hosts[a][1] != hosts[b][1]]
        self.hosts = hosts
        self.clients = clients
        self.every_s = every_s
        self.close_share = close_share
        self.context = context
        self.history = History()
        self._rng = random.Random(seed)
        self.lock = threading.Lock()  # the history's (an InBand client shares it)
        self._next_port = FIRST_SRC_PORT
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for n in range(self.clients):
            rng = random.Random(self._rng.random())
            thread = threading.Thread(target=self._client, args=(f"client{n}", rng), daemon=True)
            self._threads.append(thread)
            thread.start()

    def stop(self) -> History:
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self.history.answers.sort(key=lambda a: a.started_at)
        return self.history

    def _client(self, name: str, rng: random.Random) -> None:
        mine: list[int] = []
        while not self._stop.is_set():
            began = time.monotonic()
            replica = rng.choice(self.replicas)
            if mine and rng.random() < self.close_share:
                rid = mine.pop(rng.randrange(len(mine)))
                if not self._close(name, replica, rid):
                    mine.append(rid)  # not closed, or not known to be: closed again later
            else:
                made = self._create(name, replica, rng)
                if made is not None:
                    mine.append(made)
            self._stop.wait(max(0.0, self.every_s - (time.monotonic() - began)))

    def _body(self, rng: random.Random) -> dict[str, Any]:
        src, dst = rng.choice(self.pairs)
        with self.lock:
            port = self._next_port
            self._next_port += 1
        return {
            "src": self.hosts[src][0],
            "dst": self.hosts[dst][0],
            "protocol": "udp",
            "src_port": port,
            "dst_port": 9,
            "priority": rng.choice([3, 4, 5]),
            "rate": rng.choice([2_000, 4_000, 8_000, 16_000]),
            "burst": 1_000,
            "max_packet": 1_000,
        }

    def _create(self, client: str, replica: Replica, rng: random.Random) -> int | None:
        started = time.time()
        status, body, retry_after = ask(
            replica.rest_url, self.token, "POST", "/reservations", self._body(rng), self.context
        )
        ended = time.time()
        made = None
        if status == 201 and isinstance(body, dict):
            made = int(body["id"])
        self._record(
            Answer(
                client,
                "POST",
                f"/reservations ({replica.name})",
                started,
                ended,
                status,
                retry_after,
                _why(body),
            )
        )
        if made is not None:
            assert isinstance(body, dict)
            with self.lock:
                self.history.created[made] = ChannelKey(str(body["initiator"]), int(body["context"]))
                self.history.granted_at[made] = ended
        return made

    def _close(self, client: str, replica: Replica, rid: int) -> bool:
        """Whether the channel is gone (204, or 404 after an earlier close that was not answered)."""
        started = time.time()
        status, body, retry_after = ask(
            replica.rest_url, self.token, "DELETE", f"/reservations/{rid}", None, self.context
        )
        ended = time.time()
        self._record(
            Answer(
                client,
                "DELETE",
                f"/reservations/{rid} ({replica.name})",
                started,
                ended,
                status,
                retry_after,
                _why(body),
            )
        )
        with self.lock:
            if status == 204 or (status == 404 and rid in self.history.maybe_closed):
                self.history.closed.add(rid)
                return True
            if status == 404:  # granted, never closed, and gone: the checker names it
                self.history.vanished.add(rid)
                return True
            if status == 0 or (status >= 500 and status != 503):
                self.history.maybe_closed.add(rid)  # it may have been closed before the answer was lost
        return False

    def _record(self, answer: Answer) -> None:
        with self.lock:
            self.history.answers.append(answer)


def _why(body: Any) -> str:
    if isinstance(body, dict):
        return str(body.get("constraint") or body.get("error") or body.get("detail") or "")[:200]
    return str(body)[:200] if body else ""


# A host's request in band: the same small envelope as the REST clients', from its own ports.
FIRST_IN_BAND_PORT = 40_000
FIRST_IN_BAND_CONTEXT = 1_000  # below 2^31: the contexts REST hands out start there


class InBand:
    """A host asking in band (`terrapin-host request` / `close`, docs/protocol.md) every
    `every_s`, as the REST clients do, its answers recorded in the same history: ACCEPTED as
    201, DENIED as 409, CLOSED as 204, no answer after the agent's retransmissions (TIMEOUT) as
    0. The destination runs `terrapin-host serve` (`server`)."""

    def __init__(
        self,
        history: History,
        lock: threading.Lock,
        run_on: Callable[[list[str]], str],  # runs a command on the initiating host, its output
        initiator: str,
        destination: str,
        seed: int,
        every_s: float = 2.0,  # each request starts a Python process on the host
    ) -> None:
        self.history, self.lock, self._run_on = history, lock, run_on
        self.initiator, self.destination = initiator, destination
        self.every_s = every_s
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._next = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        mine: list[int] = []
        while not self._stop.is_set():
            began = time.monotonic()
            if mine and self._rng.random() < 0.4:
                context = mine.pop(self._rng.randrange(len(mine)))
                if not self._close(context):
                    mine.append(context)
            else:
                context = FIRST_IN_BAND_CONTEXT + self._next
                self._next += 1
                if self._request(context):
                    mine.append(context)
            self._stop.wait(max(0.0, self.every_s - (time.monotonic() - began)))

    def _agent(self, command: list[str], context: int, method: str) -> str:
        started = time.time()
        output = self._run_on([*AGENT, *command])
        ended = time.time()
        try:
            outcome = str(json.loads(output.strip().splitlines()[0]).get("outcome"))
        except (ValueError, IndexError, AttributeError):
            outcome = "ERROR"
        status = {"ACCEPTED": 201, "DENIED": 409, "CLOSED": 204, "TIMEOUT": 0}.get(outcome, 500)
        path = f"{method.lower()} {self.initiator}/{context} (in band)"
        with self.lock:
            self.history.answers.append(
                Answer("in-band", method, path, started, ended, status, None, outcome)
            )
        return outcome

    def _request(self, context: int) -> bool:
        port = FIRST_IN_BAND_PORT + context - FIRST_IN_BAND_CONTEXT
        command = ["request", "--dst", self.destination, "--protocol", "udp", "--sport", str(port)]
        command += ["--dport", "9", "--priority", str(self._rng.choice([3, 4, 5])), "--context", str(context)]
        command += [
            "--rate",
            str(self._rng.choice([2_000, 4_000, 8_000])),
            "--burst",
            "1000",
            "--max-packet",
            "1000",
        ]
        if self._agent(command, context, "REQUEST") != "ACCEPTED":
            return False
        with self.lock:
            self.history.accepted_in_band.add(ChannelKey(self.initiator, context))
        return True

    def _close(self, context: int) -> bool:
        outcome = self._agent(
            ["close", "--dst", self.destination, "--context", str(context)], context, "CLOSE"
        )
        if outcome != "CLOSED":
            return False
        with self.lock:
            self.history.closed_in_band.add(ChannelKey(self.initiator, context))
        return True


AGENT = [PYTHON, "-m", "terrapin.host_agent"]
