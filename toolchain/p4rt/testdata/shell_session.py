"""Drive a running terrapin-switch with p4runtime-shell (PyPI) and check real packets.

Run by shell_test.go inside the test's network namespace, with the venv that
scripts/p4rt-shell.sh creates. Each check prints PASS/FAIL; the last line is
"N passed, M failed" and the exit code is 1 if anything failed.

Ports: the switch has ports 1..3 on veths whose other ends (HOST_IFACES) are
here in the namespace; we inject and capture frames on them with AF_PACKET.
"""
from __future__ import annotations

import argparse
import select
import socket
import sys
import time
import traceback
from collections.abc import Callable

import p4runtime_sh.shell as sh
from p4runtime_sh.p4runtime import P4RuntimeWriteException

ETH_P_ALL = 0x0003
RESULTS: list[tuple[str, bool, str]] = []


def check(name: str) -> Callable[[Callable[[], None]], Callable[[], None]]:
    def wrap(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
                RESULTS.append((name, True, ""))
                print(f"PASS {name}", flush=True)
            except Exception as e:  # every failure is reported, not raised
                RESULTS.append((name, False, f"{e!r}"))
                print(f"FAIL {name}: {e!r}", flush=True)
                traceback.print_exc()
        return run
    return wrap


class Port:
    def __init__(self, iface: str) -> None:
        self.iface = iface
        self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        self.sock.bind((iface, 0))
        self.sock.setblocking(False)

    def send(self, frame: bytes) -> None:
        self.sock.send(frame)

    def drain(self) -> None:
        while self.recv(0.0) is not None:
            pass

    def recv(self, timeout: float) -> bytes | None:
        """The next frame that arrives (not one we sent), or None."""
        deadline = time.time() + timeout
        while True:
            left = max(0.0, deadline - time.time())
            r, _, _ = select.select([self.sock], [], [], left)
            if not r:
                return None
            data, addr = self.sock.recvfrom(65535)
            if addr[2] == socket.PACKET_OUTGOING:
                continue
            return data

    def frames(self, timeout: float) -> list[bytes]:
        out = []
        while (f := self.recv(timeout)) is not None:
            out.append(f)
        return out


def mac(s: str) -> bytes:
    return bytes(int(x, 16) for x in s.split(":"))


def frame(dst: str, src: str = "00:00:00:00:00:01", ether_type: int = 0x88B5, size: int = 64) -> bytes:
    body = mac(dst) + mac(src) + ether_type.to_bytes(2, "big")
    return body + bytes(range(size - len(body)))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--p4info", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--ports", required=True, help="host-side ifaces of switch ports 1,2,3")
    args = ap.parse_args()
    ifaces = args.ports.split(",")
    ports = {i + 1: Port(name) for i, name in enumerate(ifaces)}

    # The switch may still be starting: retry the connection for a while.
    deadline = time.time() + 20
    while True:
        try:
            sh.setup(device_id=0, grpc_addr=args.addr, election_id=(0, 1),
                     config=sh.FwdPipeConfig(args.p4info, args.json), verbose=False)
            break
        except SystemExit:
            if time.time() > deadline:
                print("FAIL connect: the switch never answered", flush=True)
                print("0 passed, 1 failed")
                return 1
            time.sleep(0.5)
    RESULTS.append(("connect and push the pipeline", True, ""))
    print("PASS connect and push the pipeline", flush=True)

    def expect(port: int, want: bytes, what: str) -> None:
        got = ports[port].recv(2.0)
        if got is None:
            raise AssertionError(f"{what}: nothing came out of port {port}")
        if got[: len(want)] != want:
            raise AssertionError(f"{what}: port {port} got {got.hex()} want {want.hex()}")

    def expect_none(port: int, what: str, wait: float = 0.5) -> None:
        got = ports[port].recv(wait)
        if got is not None:
            raise AssertionError(f"{what}: unexpected frame on port {port}: {got.hex()}")

    def l2(dst: str) -> sh.TableEntry:
        te = sh.TableEntry("TestIngress.l2")
        te.match["hdr.ethernet.dst"] = dst
        return te

    @check("insert and read a table entry")
    def insert_read() -> None:
        te = l2("00:00:00:00:00:02")(action="TestIngress.forward")
        te.action["port"] = "2"
        te.insert()
        got = list(sh.TableEntry("TestIngress.l2").read())
        assert len(got) == 1, f"read {len(got)} entries"
        e = got[0]
        # The server answers with the shortest byte strings (spec 8.4).
        assert int.from_bytes(e.match["hdr.ethernet.dst"].exact.value, "big") == 2, e
        assert e.action["port"].value == b"\x02", e

    @check("forward by the inserted entry")
    def forward() -> None:
        for p in ports.values():
            p.drain()
        f = frame("00:00:00:00:00:02")
        ports[1].send(f)
        expect(2, f, "l2 forward")

    @check("modify the entry")
    def modify() -> None:
        te = l2("00:00:00:00:00:02")(action="TestIngress.forward")
        te.action["port"] = "3"
        te.modify()
        e = next(iter(sh.TableEntry("TestIngress.l2").read()))
        assert e.action["port"].value == b"\x03", e
        f = frame("00:00:00:00:00:02")
        ports[1].send(f)
        expect(3, f, "after modify")
        expect_none(2, "after modify")

    @check("delete the entry")
    def delete() -> None:
        l2("00:00:00:00:00:02").delete()
        got = list(sh.TableEntry("TestIngress.l2").read())
        assert not got, f"{len(got)} entries left"
        ports[1].send(frame("00:00:00:00:00:02"))
        expect_none(3, "after delete (default action drops)")

    @check("errors for bad writes")
    def errors() -> None:
        te = l2("00:00:00:00:00:09")(action="TestIngress.forward")
        te.action["port"] = "2"
        te.insert()
        try:
            te.insert()
        except P4RuntimeWriteException as e:
            assert "ALREADY_EXISTS" in str(e), str(e)
        else:
            raise AssertionError("duplicate insert accepted")
        te.delete()
        try:
            l2("00:00:00:00:00:09").delete()
        except P4RuntimeWriteException as e:
            assert "NOT_FOUND" in str(e), str(e)
        else:
            raise AssertionError("delete of a missing entry accepted")

    @check("configure a meter and read it back")
    def meter() -> None:
        te = l2("00:00:00:00:00:02")(action="TestIngress.forward")
        te.action["port"] = "2"
        te.insert()
        m = sh.MeterEntry("TestIngress.port_meter")
        m.index = 1
        m.cir, m.cburst, m.pir, m.pburst = 1, 1, 1, 1
        m.modify()
        r = sh.MeterEntry("TestIngress.port_meter")
        r.index = 1
        got = list(r.read())
        assert got and got[0].config.pir == 1 and got[0].config.pburst == 1, got
        for p in ports.values():
            p.drain()
        for _ in range(10):
            ports[1].send(frame("00:00:00:00:00:02"))
        n = len(ports[2].frames(0.5))
        # One packet/s with a burst of 1: the first passes, the rest are red.
        assert 1 <= n <= 2, f"{n} of 10 frames passed a 1 packet/s meter"
        m = sh.MeterEntry("TestIngress.port_meter")
        m.index = 1
        m.modify()  # no config: back to all-green
        for _ in range(5):
            ports[1].send(frame("00:00:00:00:00:02"))
        n = len(ports[2].frames(0.5))
        assert n == 5, f"{n} of 5 frames passed an unconfigured meter"

    @check("read counters")
    def counters() -> None:
        c = sh.CounterEntry("TestIngress.port_counter")
        c.index = 1
        got = list(c.read())
        assert got, "no counter read"
        # 1 (forward) + 1 (modify) + 1 (delete) + 10 + 5 (meter) frames of
        # 64 bytes entered port 1.
        assert got[0].data.packet_count == 18, got[0]
        assert got[0].data.byte_count == 18 * 64, got[0]
        acl = sh.TableEntry("TestIngress.acl")(action="TestIngress.acl_permit")
        acl.match["hdr.ethernet.ether_type"] = "0x88b5&&&0xffff"
        acl.priority = 10
        acl.insert()
        for _ in range(3):
            ports[1].send(frame("00:00:00:00:00:02"))
        ports[2].frames(0.3)
        d = sh.DirectCounterEntry("TestIngress.acl_counter")
        key = sh.TableEntry("TestIngress.acl")
        key.match["hdr.ethernet.ether_type"] = "0x88b5&&&0xffff"
        key.priority = 10
        d.table_entry = key
        got = list(d.read())
        assert got and got[0].data.packet_count == 3, got

    @check("PacketOut to a port")
    def packet_out() -> None:
        for p in ports.values():
            p.drain()
        payload = frame("00:00:00:00:00:aa", size=80)
        po = sh.PacketOut(payload)
        po.metadata["egress_port"] = "3"
        po.send()
        expect(3, payload, "PacketOut")
        expect_none(2, "PacketOut went elsewhere", 0.2)

    @check("PacketIn from a port")
    def packet_in() -> None:
        te = l2("00:00:00:00:00:ff")(action="TestIngress.to_cpu")
        te.insert()
        pin = sh.PacketIn()
        f = frame("00:00:00:00:00:ff")
        time.sleep(0.2)
        ports[3].send(f)
        msgs = list(pin.sniff(timeout=2))
        assert msgs, "no PacketIn"
        p = msgs[0].packet
        assert p.payload[: len(f)] == f, p.payload.hex()
        md = {m.metadata_id: m.value for m in p.metadata}
        assert md.get(1) == b"\x03", md

    @check("multicast group replicates")
    def multicast() -> None:
        g = sh.MulticastGroupEntry(7)
        g.add(2, 1).add(3, 2)
        g.insert()
        te = l2("00:00:00:00:00:77")(action="TestIngress.set_mcast")
        te.action["group"] = "7"
        te.insert()
        for p in ports.values():
            p.drain()
        f = frame("00:00:00:00:00:77")
        ports[1].send(f)
        expect(2, f, "replica on port 2")
        expect(3, f, "replica on port 3")

    for fn in (insert_read, forward, modify, delete, errors, meter, counters,
               packet_out, packet_in, multicast):
        fn()
    sh.teardown()
    passed = sum(1 for _, ok, _ in RESULTS if ok)
    failed = len(RESULTS) - passed
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
