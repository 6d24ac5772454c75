"""Shows that each data-plane behaviour has a PTF test that fails without it.

For every mutant below, copies p4src/ to a scratch directory, removes or breaks one behaviour
with a single textual edit, compiles the copy with the P4 compiler, runs the PTF tests that
cover that behaviour against the switch (ptf-tests/run.sh), and expects at least one failure.
A mutant the tests do not catch ("survived") is a gap in the tests; a kill counts only if
the same tests pass on the unmutated program ("unproven" otherwise).

    build/venv/bin/python ptf-tests/mutants.py              # every mutant (about 10 minutes)
    build/venv/bin/python ptf-tests/mutants.py ttl-drop     # by name

Needs root (run.sh creates veths) and build/bin/terrapin-p4c, build/bin/terrapin-switch.
Exits non-zero if any mutant survives or cannot be built.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    file: str  # under p4src/include
    old: str  # must occur exactly once
    new: str
    tests: str  # PTF test selection that must fail


MUTANTS = [
    Mutant("parser-error-kept", "ingress.p4",
           "if (standard_metadata.parser_error != error.NoError) {", "if (false) {",
           "dp_malformed dp_controller_io.MalformedReservationMessagesAreDropped"),
    Mutant("checksum-error-kept", "ingress.p4",
           "} else if (standard_metadata.checksum_error == 1) {", "} else if (false) {",
           "dp_routing.BadHeaderChecksumIsDropped"),
    Mutant("total-length-unchecked", "parser.p4",
           "&& (bit<32>)hdr.ipv4.total_len + meta.l3_offset <= standard_metadata.packet_length", "",
           "dp_malformed"),
    Mutant("vlan-not-parsed", "parser.p4", "ETHERTYPE_VLAN: parse_vlan;", "",
           "dp_routing.VlanTaggedPacketIsRouted"),
    Mutant("no-ttl-decrement", "ingress.p4", "hdr.ipv4.ttl = hdr.ipv4.ttl - 1;", "",
           "dp_routing.RouteRewritesMacsTtlAndChecksum"),
    Mutant("ttl-drop", "ingress.p4", "} else if (hdr.ipv4.ttl <= 1) {", "} else if (false) {",
           "dp_routing.TtlExpiresAtZero"),
    Mutant("no-next-hop-mac", "ingress.p4",
           "hdr.ethernet.dst_addr = next_hop_mac;\n        hdr.ipv4.ttl",
           "hdr.ipv4.ttl",
           "dp_routing.RouteRewritesMacsTtlAndChecksum"),
    Mutant("no-source-mac", "egress.p4", "port_macs.apply();", "",
           "dp_routing.RouteRewritesMacsTtlAndChecksum"),
    Mutant("no-checksum-update", "checksums.p4", "update_checksum(hdr.ipv4.isValid(),",
           "update_checksum(false,", "dp_routing.RouteRewritesMacsTtlAndChecksum"),
    Mutant("options-not-checksummed", "checksums.p4",
           "hdr.ipv4.dst_addr,\n              hdr.ipv4_options.data },\n            hdr.ipv4.hdr_checksum,\n"
           "            HashAlgorithm.csum16);\n    }\n}\n\ncontrol TerrapinComputeChecksum",
           "hdr.ipv4.dst_addr },\n            hdr.ipv4.hdr_checksum,\n"
           "            HashAlgorithm.csum16);\n    }\n}\n\ncontrol TerrapinComputeChecksum",
           "dp_routing.Ipv4OptionsAreCarriedAndChecksummed"),
    Mutant("no-route-forwards", "ingress.p4", "const default_action = drop_packet(DROP_NO_ROUTE);",
           "const default_action = route(1, 0);", "dp_routing.NoRouteIsDropped"),
    Mutant("arp-not-answered", "ingress.p4", "arp_replies.apply();", "drop_packet(DROP_UNSUPPORTED);",
           "dp_arp.GatewayArpIsAnswered"),
    Mutant("arp-low-priority", "ingress.p4",
           "standard_metadata.egress_spec = standard_metadata.ingress_port;\n"
           "        standard_metadata.priority = PRIORITY_RESERVATION;",
           "standard_metadata.egress_spec = standard_metadata.ingress_port;",
           "dp_arp.GatewayArpIsAnswered"),
    Mutant("xtp-not-parsed", "parser.p4", "(0, IP_PROTO_XTP): parse_xtp;", "",
           "dp_priority.XtpChannelIsMatchedByKey dp_priority.XtpSortClaimIsDemoted"),
    Mutant("sort-trusted", "ingress.p4",
           "standard_metadata.priority = PRIORITY_BEST_EFFORT;\n                if (hdr.xtp.isValid()",
           "standard_metadata.priority = (bit<3>)hdr.xtp.sort;\n                if (hdr.xtp.isValid()",
           "dp_priority.XtpSortClaimIsDemoted"),
    Mutant("dscp-trusted", "ingress.p4",
           "standard_metadata.priority = PRIORITY_BEST_EFFORT;\n                if (hdr.xtp.isValid()",
           "standard_metadata.priority = (bit<3>)(hdr.ipv4.dscp >> 3);\n"
           "                if (hdr.xtp.isValid()",
           "dp_priority.DscpClaimIsDemoted"),
    Mutant("claims-not-counted", "ingress.p4", "demoted_claims.count(CLAIM_XTP_SORT);", "",
           "dp_priority.XtpSortClaimIsDemoted"),
    Mutant("channel-priority-ignored", "ingress.p4",
           "standard_metadata.priority = meta.channel_priority;",
           "standard_metadata.priority = PRIORITY_BEST_EFFORT;",
           "dp_policing.ConformingChannelKeepsItsQueue"),
    Mutant("channel-meter-ignored", "ingress.p4",
           "if (meta.color == METER_GREEN) {\n"
           "                    standard_metadata.priority = meta.channel_priority;",
           "if (true) {\n                    standard_metadata.priority = meta.channel_priority;",
           "dp_policing.BurstAboveSigmaIsCut dp_policing.RateAboveRhoIsCut"),
    Mutant("yellow-action-ignored", "ingress.p4", "if (meta.on_yellow == EXCESS_DROP) {", "if (true) {",
           "dp_policing.YellowAndRedFollowTheEntry"),
    Mutant("red-action-ignored", "ingress.p4", "if (meta.on_red == EXCESS_DROP) {", "if (true) {",
           "dp_policing.YellowAndRedFollowTheEntry"),
    Mutant("yellow-not-counted", "ingress.p4", "channel_yellow.count((bit<32>)meta.channel_id);", "",
           "dp_policing.YellowAndRedFollowTheEntry"),
    Mutant("red-not-counted", "ingress.p4", "channel_red.count((bit<32>)meta.channel_id);", "",
           "dp_policing.YellowAndRedFollowTheEntry"),
    Mutant("aggregate-excess-not-counted", "ingress.p4",
           "aggregate_excess.count((bit<32>)meta.aggregate_id);", "",
           "dp_priority.AggregateMeterDemotesExcess"),
    Mutant("aggregate-priority-ignored", "ingress.p4",
           "standard_metadata.priority = meta.aggregate_priority;",
           "standard_metadata.priority = PRIORITY_BEST_EFFORT;",
           "dp_priority.AggregateTableLiftsListedDscp"),
    Mutant("aggregate-meter-ignored", "ingress.p4",
           "if (meta.color == METER_GREEN) {\n"
           "                    standard_metadata.priority = meta.aggregate_priority;",
           "if (true) {\n                    standard_metadata.priority = meta.aggregate_priority;",
           "dp_priority.AggregateMeterDemotesExcess"),
    Mutant("reservation-not-punted", "ingress.p4",
           "} else if (hdr.reservation.isValid() && !hdr.packet_out.isValid()) {", "} else if (false) {",
           "dp_controller_io.ReservationMessagesGoToTheController"),
    Mutant("packet-in-port-lost", "ingress.p4",
           "(PacketOut).\n            hdr.packet_in.setValid();\n"
           "            hdr.packet_in.ingress_port = standard_metadata.ingress_port;",
           "(PacketOut).\n            hdr.packet_in.setValid();\n            hdr.packet_in.ingress_port = 0;",
           "dp_controller_io.ReservationMessagesGoToTheController"),
    Mutant("reinjected-not-top", "ingress.p4",
           "// Re-injected by the controller (PacketOut through the pipeline).\n"
           "                standard_metadata.priority = PRIORITY_RESERVATION;",
           "standard_metadata.priority = PRIORITY_BEST_EFFORT;",
           "dp_controller_io.PacketOutThroughThePipeline"),
    Mutant("packet-out-port-ignored", "ingress.p4",
           "standard_metadata.egress_spec = hdr.packet_out.egress_port;",
           "standard_metadata.egress_spec = 1;",
           "dp_controller_io.PacketOutToAChosenPort"),
    Mutant("no-queue-counter", "egress.p4", "queue_traffic.count(cell);", "",
           "dp_queues.QueueTrafficCounters"),
    Mutant("no-max-depth", "egress.p4",
           "max_queue_depth.write(cell, (bit<32>)standard_metadata.enq_qdepth);", "",
           "dp_queues.MaxQueueDepth"),
    Mutant("no-max-delay", "egress.p4", "max_queue_delay.write(cell, standard_metadata.deq_timedelta);", "",
           "dp_queues.MaxQueueDelay"),
    Mutant("no-drop-counter", "ingress.p4", "drops.count(reason);", "", "dp_routing.NoRouteIsDropped"),
    # The window policers (docs/dataplane.md "Window policers").
    Mutant("jumping-window-count-carried-over", "ingress.p4",
           "// one window on\n        if (now > start && now - start >= window) {\n"
           "            start = start + window;\n            before = used;\n            used = 0;\n",
           "// one window on\n        if (now > start && now - start >= window) {\n"
           "            start = start + window;\n            before = used;\n",
           "dp_windows.JumpingWindowConformingPassesUntouched"),
    Mutant("jumping-window-phase-restarts", "ingress.p4", "now - last >= window + window + tolerance",
           "now - start >= window", "dp_windows.JumpingWindowsFollowOneAnother"),
    Mutant("jumping-window-never-idle", "ingress.p4",
           "(owner != tag || (now > last && now - last >= window + window + tolerance))", "(owner != tag)",
           "dp_windows.JumpingWindowRestartsAfterTwoIdleWindows"),
    Mutant("jumping-window-unlimited", "ingress.p4",
           "} else if (used <= limit && amount <= limit - used) {", "} else if (true) {",
           "dp_windows.JumpingWindowLetsTwoBurstsAcrossAnEdge dp_windows.JumpingWindowCutsAGreedySource"),
    Mutant("jumping-window-counts-bytes-only", "ingress.p4", "            amount = 1;\n", "",
           "dp_windows.JumpingWindowCountsBytesOrPackets"),
    Mutant("jumping-window-no-smax", "ingress.p4",
           "if (window_us != 0 && standard_metadata.packet_length <= (bit<32>)smax) {",
           "if (window_us != 0) {", "dp_windows.JumpingWindowCountsBytesOrPackets"),
    Mutant("jumping-window-fails-open", "ingress.p4", "if (window_us != 0 && standard_metadata",
           "if (standard_metadata", "dp_windows.MisconfiguredWindowIsRefusedOrFailsClosed"),
    Mutant("jumping-window-tag-ignored", "ingress.p4",
           "            start = now;\n            used = 0;\n            before = limit;\n", "",
           "dp_windows.ANewTagStartsAfresh"),
    Mutant("jumping-window-no-late-count", "ingress.p4", "if (elapsed < tolerance && before <= limit",
           "if (false && before <= limit",
           "dp_windows.JumpingWindowCountsALateFrameInTheWindowBefore"),
    Mutant("jumping-window-no-early-count", "ingress.p4",
           "} else if (elapsed + tolerance >= window && amount", "} else if (false && amount",
           "dp_windows.JumpingWindowCountsAnEarlyFrameInTheWindowAfter"),
    Mutant("jumping-window-early-count-not-its-window", "ingress.p4",
           "                start = start + window;\n                before = used;\n"
           "                used = amount;",
           "                before = used;\n                used = amount;",
           "dp_windows.JumpingWindowCountsAnEarlyFrameInTheWindowAfter"),
    Mutant("moving-window-no-ring", "ingress.p4", "                || latest < next || latest < free_at) {",
           "                || latest < next) {",
           "dp_windows.MovingWindowHoldsAcrossAnEdge dp_windows.MovingWindowCutsAGreedySource"),
    Mutant("moving-window-ring-not-written", "ingress.p4",
           "moving_ring.write(slot, virtual + (bit<48>)interval_us);", "",
           "dp_windows.MovingWindowHoldsAcrossAnEdge dp_windows.MovingWindowCutsAGreedySource"),
    Mutant("moving-window-no-xmin", "ingress.p4", "                || latest < next || latest < free_at) {",
           "                || latest < free_at) {", "dp_windows.MovingWindowKeepsXminAndSmax"),
    Mutant("moving-window-no-smax", "ingress.p4",
           "                || standard_metadata.packet_length > (bit<32>)smax\n", "",
           "dp_windows.MovingWindowKeepsXminAndSmax"),
    Mutant("moving-window-quantum-ignored", "ingress.p4", "if (fill >= quantum) {", "if (true) {",
           "dp_windows.MovingWindowGroupsPackets"),
    Mutant("moving-window-ring-shared", "ingress.p4", "bit<32> slot = cell * MOVING_SLOTS + (bit<32>)head;",
           "bit<32> slot = (bit<32>)head;", "dp_windows.MovingWindowsOfTwoChannelsAreIndependent"),
    Mutant("moving-window-fails-open", "ingress.p4",
           "if (interval_us == 0 || quantum == 0\n                || ", "if (",
           "dp_windows.MisconfiguredWindowIsRefusedOrFailsClosed"),
    Mutant("moving-window-stale-ring-kept", "ingress.p4",
           "if (slot_owner != tag || fill != 0) {", "if (fill != 0) {",
           "dp_windows.ANewTagStartsAfresh"),
    Mutant("moving-window-tolerance-ignored", "ingress.p4",
           "bit<48> latest = now + (bit<48>)tolerance_us;", "bit<48> latest = now;",
           "dp_windows.MovingWindowToleratesLateStamps"),
    Mutant("moving-window-state-from-stamp", "ingress.p4", "next = virtual + (bit<48>)xmin_us;",
           "next = now + (bit<48>)xmin_us;", "dp_windows.MovingWindowToleranceDoesNotRaiseTheRate"),
    # The delay bands (docs/dataplane.md "Delay bands").
    Mutant("no-delay-bands", "egress.p4", "queue_delay_bands.count(cell * DELAY_BANDS + band);", "",
           "dp_queues.DelayBandsCountWaitsAgainstTheBound"),
    Mutant("delay-bands-ignore-bound", "egress.p4",
           "} else if (standard_metadata.deq_timedelta <= bound_us) {",
           "} else if (true) {",
           "dp_queues.DelayBandsCountWaitsAgainstTheBound"),
    Mutant("link-probe-not-punted", "ingress.p4",
           "} else if (hdr.ethernet.ether_type == ETHERTYPE_LINK_PROBE) {", "} else if (false) {",
           "dp_trunks.LinkProbesGoToTheController"),
    Mutant("link-probe-port-lost", "ingress.p4",
           'trunk carries traffic (docs/controller.md, "Trunks").\n            hdr.packet_in.setValid();\n'
           "            hdr.packet_in.ingress_port = standard_metadata.ingress_port;",
           'trunk carries traffic (docs/controller.md, "Trunks").\n            hdr.packet_in.setValid();\n'
           "            hdr.packet_in.ingress_port = 0;",
           "dp_trunks.LinkProbesGoToTheController"),
    Mutant("pin-ignored", "ingress.p4", "channel_paths.apply();", "",
           "dp_trunks.PinnedChannelLeavesByItsPin"),
    Mutant("pin-keeps-route-next-hop", "ingress.p4",
           "= port;\n        hdr.ethernet.dst_addr = next_hop_mac;\n    }\n\n    table channel_paths",
           "= port;\n    }\n\n    table channel_paths",
           "dp_trunks.PinnedChannelLeavesByItsPin"),
    Mutant("pin-green-only", "ingress.p4",
           "channel_paths.apply();\n                policed = true;",
           "policed = true;\n                if (meta.color == METER_GREEN) {\n"
           "                    channel_paths.apply();\n                }",
           "dp_trunks.DemotedExcessFollowsThePin"),
    # The pin applied to every routed packet, not only to an admitted channel's.
    Mutant("pin-without-channel", "ingress.p4",
           "        if (routed && routes.apply().hit) {\n"
           "            if (hdr.reservation.isValid()) {\n"
           "                // Re-injected by the controller (PacketOut through the pipeline).\n"
           "                standard_metadata.priority = PRIORITY_RESERVATION;\n"
           "            } else if (channels.apply().hit) {\n"
           "                channel_paths.apply();\n",
           "        if (routed && routes.apply().hit) {\n"
           "            channel_paths.apply();\n"
           "            if (hdr.reservation.isValid()) {\n"
           "                standard_metadata.priority = PRIORITY_RESERVATION;\n"
           "            } else if (channels.apply().hit) {\n",
           "dp_trunks.PinWithoutAChannelMovesNothing"),
    # ---- protection (dp_protection) ----
    Mutant("rtag-not-parsed", "parser.p4",
           "            ETHERTYPE_VLAN: parse_vlan;\n            ETHERTYPE_RTAG: parse_rtag;\n",
           "            ETHERTYPE_VLAN: parse_vlan;\n",
           "dp_protection.TransitForwardsByMember dp_protection.DuplicatesAreEliminated"),
    Mutant("not-replicated", "ingress.p4", "standard_metadata.mcast_grp = group;", "",
           "dp_protection.ReplicasAreTaggedAndNumbered"),
    Mutant("sequence-not-advanced", "ingress.p4", "frer_next_seq.write(cell, seq + 1);", "",
           "dp_protection.ReplicasAreTaggedAndNumbered"),
    Mutant("member-not-written", "egress.p4", "hdr.rtag.member = standard_metadata.egress_rid;", "",
           "dp_protection.ReplicasAreTaggedAndNumbered"),
    Mutant("copy-keeps-route-next-hop", "egress.p4",
           "hdr.ethernet.dst_addr = next_hop_mac;\n    }\n\n    action drop_copy",
           "}\n\n    action drop_copy",
           "dp_protection.ReplicasAreTaggedAndNumbered"),
    Mutant("copy-without-entry-sent", "egress.p4",
           "mark_to_drop(standard_metadata);\n    }\n\n    table copies", "}\n\n    table copies",
           "dp_protection.ReplicaWithoutACopyEntryIsDropped"),
    Mutant("excess-replicated", "ingress.p4",
           "            if (meta.color == METER_GREEN) {\n"
           "                standard_metadata.priority = meta.channel_priority;\n"
           "                if (!hdr.rtag.isValid()) {\n"
           "                    protections.apply();\n"
           "                }\n"
           "            } else if",
           "            if (!hdr.rtag.isValid()) {\n"
           "                protections.apply();\n"
           "            }\n"
           "            if (meta.color == METER_GREEN) {\n"
           "                standard_metadata.priority = meta.channel_priority;\n"
           "            } else if",
           "dp_protection.ExcessIsNotReplicated"),
    Mutant("relay-by-route", "ingress.p4",
           "        standard_metadata.egress_spec = port;\n        hdr.ethernet.dst_addr = next_hop_mac;\n"
           "        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;\n        meta.routed = 1;\n        meta.channel_id",
           "        hdr.ethernet.dst_addr = next_hop_mac;\n"
           "        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;\n        meta.routed = 1;\n        meta.channel_id",
           "dp_protection.TransitForwardsByMember"),
    Mutant("relay-unpoliced", "ingress.p4",
           "relay_copy: {\n                    policed = true;",
           "relay_copy: {\n                    standard_metadata.priority = meta.channel_priority;",
           "dp_protection.TransitForwardsByMember"),
    Mutant("unknown-member-routed", "ingress.p4",
           "drop_packet(DROP_NO_MEMBER);", "routed = true;",
           "dp_protection.TransitForwardsByMember"),
    Mutant("duplicates-kept", "ingress.p4", "drop_packet(DROP_ELIMINATED);", "routed = true;",
           "dp_protection.DuplicatesAreEliminated"),
    Mutant("tag-not-removed", "ingress.p4",
           "hdr.rtag.setInvalid();\n                        routed = true;", "routed = true;",
           "dp_protection.DuplicatesAreEliminated"),
    Mutant("history-ignored", "ingress.p4",
           "} else if (((history >> (bit<8>)behind) & 1) == 1) {", "} else if (false) {",
           "dp_protection.DuplicatesAreEliminated dp_protection.HistoryWindow"),
    Mutant("old-numbers-not-rogue", "ingress.p4",
           "} else if (behind >= length) {", "} else if (false) {", "dp_protection.HistoryWindow"),
    Mutant("jumps-not-rogue", "ingress.p4", "if (ahead >= length) {", "if (false) {",
           "dp_protection.HistoryWindow"),
    Mutant("lost-not-counted", "ingress.p4",
           "lost = lost + (bit<32>)ahead - (bit<32>)(leaving & 0x7F);", "", "dp_protection.HistoryWindow"),
    Mutant("lost-counts-seen", "ingress.p4",
           "lost = lost + (bit<32>)ahead - (bit<32>)(leaving & 0x7F);", "lost = lost + (bit<32>)ahead - 1;",
           "dp_protection.HistoryWindow"),
    Mutant("out-of-order-uncounted", "ingress.p4",
           "if (ahead != 1) {\n                    frer_out_of_order.count(cell);",
           "if (false) {\n                    frer_out_of_order.count(cell);",
           "dp_protection.HistoryWindow"),
    Mutant("sequence-does-not-wrap", "ingress.p4",
           "} else if (ahead != 0 && ahead < 0x8000) {", "} else if (seq > recov) {",
           "dp_protection.SequenceNumbersWrap"),
    Mutant("no-reset-after-silence", "ingress.p4",
           "(now > last && now - last >= (bit<48>)reset_us)", "false",
           "dp_protection.ResetAfterSilence"),
    Mutant("recovery-tag-ignored", "ingress.p4", "} else if (owner != tag ||", "} else if (owner == 0 ||",
           "dp_protection.NewInstallationStartsFresh"),
    Mutant("lost-kept-across-installations", "ingress.p4", "lost = 0;  // a new installation", "// ",
           "dp_protection.NewInstallationStartsFresh"),
    Mutant("no-history-fails-open", "ingress.p4",
           "if (history_length == 0) {\n            frer_rogue.count(cell);",
           "if (false) {\n            frer_rogue.count(cell);",
           "dp_protection.NoHistoryPassesNothing"),
]


def build(src: Path, out: Path, env: dict[str, str]) -> str | None:
    """Compiles src/terrapin.p4 into out/; returns the compiler's complaint, if any."""
    out.mkdir(parents=True)
    p4c = env.get("P4C", str(ROOT / "build" / "bin" / "terrapin-p4c"))
    built = subprocess.run(
        [p4c, "--target", "bmv2", "--arch", "v1model", "--p4runtime-files",
         str(out / "terrapin.p4info.txtpb"), "-o", str(out / "terrapin.json"), str(src / "terrapin.p4")],
        capture_output=True, text=True)
    if built.returncode != 0:
        return (built.stderr.strip().splitlines() or ["?"])[0]
    return None


def failures(out: Path, tests: str, logs: Path, env: dict[str, str]) -> int | None:
    """How many of `tests` fail against the build in out/ (None: no result)."""
    run_env = dict(env, PTF_TESTS=tests, PTF_SWITCHES="terrapin",
                   PTF_P4INFO=str(out / "terrapin.p4info.txtpb"), PTF_P4JSON=str(out / "terrapin.json"),
                   PTF_LOGDIR=str(logs))
    ran = subprocess.run(["bash", str(ROOT / "ptf-tests" / "run.sh")], capture_output=True, text=True,
                         env=run_env)
    last = re.findall(r"(\d+) passed, (\d+) failed", ran.stdout)
    return int(last[-1][1]) if last else None


def run_mutant(m: Mutant, scratch: Path, env: dict[str, str]) -> str:
    src = scratch / m.name / "p4src"
    shutil.copytree(ROOT / "p4src", src)
    target = src / "include" / m.file
    text = target.read_text()
    if text.count(m.old) != 1:
        return f"BROKEN (edit matches {text.count(m.old)} times)"
    target.write_text(text.replace(m.old, m.new))
    out = scratch / m.name / "out"
    complaint = build(src, out, env)
    if complaint is not None:
        return f"BROKEN (does not compile: {complaint})"
    failed = failures(out, m.tests, scratch / m.name / "logs", env)
    if failed is None:
        return "BROKEN (no result line)"
    return f"killed ({failed} failed)" if failed else "SURVIVED"


def main(argv: list[str]) -> int:
    chosen = [m for m in MUTANTS if not argv or m.name in argv]
    bad = 0
    with tempfile.TemporaryDirectory(prefix="terrapin-mutants-") as tmp:
        scratch = Path(tmp)
        env = dict(os.environ)
        # A kill only counts if the same tests pass on the unmutated program.
        baseline = scratch / "baseline"
        complaint = build(ROOT / "p4src", baseline, env)
        if complaint is not None:
            print(f"the unmutated program does not compile: {complaint}")
            return 1
        baseline_failures: dict[str, int | None] = {}
        for m in chosen:
            if m.tests not in baseline_failures:
                baseline_failures[m.tests] = failures(baseline, m.tests, scratch / "baseline-logs", env)
            base = baseline_failures[m.tests]
            if base != 0:
                verdict = f"UNPROVEN (fails unmutated too: {base})"
            else:
                verdict = run_mutant(m, scratch, env)
            bad += not verdict.startswith("killed")
            print(f"{m.name:28s} {verdict:36s} [{m.tests}]", flush=True)
    print(f"{len(chosen) - bad} killed, {bad} survived, unproven or broken")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
