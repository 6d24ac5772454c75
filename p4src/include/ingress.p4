// Ingress: sanity checks, controller I/O, ARP answers, IPv4 routing, and the admission
// classifier that decides each packet's strict-priority queue (seed 000 ch. 3 and §4.1).

#ifndef TERRAPIN_INGRESS_P4
#define TERRAPIN_INGRESS_P4

control TerrapinIngress(inout headers_t hdr,
                        inout metadata_t meta,
                        inout standard_metadata_t standard_metadata) {

    // Why packets were discarded, indexed by DROP_*; packets and bytes.
    counter(DROP_REASONS, CounterType.packets_and_bytes) drops;

    // Per admitted channel (entries of `channels`): every packet that matched, whatever
    // its colour.
    direct_counter(CounterType.packets_and_bytes) channel_counter;
    // Per admitted channel: the reservation's envelope as an RFC 2698 trTCM, configured by
    // the controller with each entry (CIR = rho, CBS = sigma; see docs/dataplane.md).
    direct_meter<bit<2>>(MeterType.bytes) channel_meter;
    // Per channel id: the packets the meter coloured yellow or red (the window policers'
    // excess counts as red).
    counter(MAX_CHANNELS, CounterType.packets_and_bytes) channel_yellow;
    counter(MAX_CHANNELS, CounterType.packets_and_bytes) channel_red;

    // Window policers (seed 000 §2.2.2), state per channel id; times are
    // ingress_global_timestamp microseconds. Every cell carries the tag of the entry that
    // wrote it, and an entry ignores cells with another tag: a channel installed on a
    // reused channel id starts with no history, and no control plane has to clear registers
    // (BMv2's P4Runtime server cannot write them: "Register writes are not supported yet").
    // Jumping window: when the current window began, and what it and the window before it
    // have let through so far (a tolerant window may count a packet stamped just after a
    // boundary in the window before it).
    register<bit<32>>(MAX_CHANNELS) jumping_tag;
    register<bit<48>>(MAX_CHANNELS) jumping_start;
    register<bit<32>>(MAX_CHANNELS) jumping_used;
    register<bit<32>>(MAX_CHANNELS) jumping_used_before;
    register<bit<48>>(MAX_CHANNELS) jumping_last;  // the channel's last packet, for idleness
    // Moving window: the earliest time the next packet keeps Xmin; the ring slot of the
    // current group and how many packets the group holds; per (channel, slot) the time the
    // group that last used the slot leaves the window (its first packet's time + I). Times
    // are the passed packets' virtual times (see admit_moving_window).
    register<bit<32>>(MAX_CHANNELS) moving_tag;
    register<bit<48>>(MAX_CHANNELS) moving_next;
    register<bit<5>>(MAX_CHANNELS) moving_head;
    register<bit<16>>(MAX_CHANNELS) moving_fill;
    register<bit<32>>(MOVING_RING_CELLS) moving_ring_tag;
    register<bit<48>>(MOVING_RING_CELLS) moving_ring;

    // Per aggregate entry (entries of `aggregates`): every packet that matched.
    direct_counter(CounterType.packets_and_bytes) aggregate_counter;
    // Per aggregate id: a meter shared by all entries naming that aggregate, and the
    // packets it found in excess (demoted to best effort).
    meter(MAX_AGGREGATES, MeterType.bytes) aggregate_meters;
    counter(MAX_AGGREGATES, CounterType.packets_and_bytes) aggregate_excess;

    // Unadmitted packets whose XTP SORT or DSCP asked for priority and got best effort,
    // indexed by CLAIM_*.
    counter(CLAIM_KINDS, CounterType.packets_and_bytes) demoted_claims;

    action drop_packet(bit<32> reason) {
        mark_to_drop(standard_metadata);
        drops.count(reason);
    }

    // ---- ARP: the switch answers requests for the addresses the controller lists; it
    // never floods (there is no broadcast domain to flood into: every port is routed).
    action answer_arp(mac_addr_t mac) {
        ipv4_addr_t asked = hdr.arp.target_proto_addr;
        hdr.ethernet.dst_addr = hdr.arp.sender_hw_addr;
        hdr.ethernet.src_addr = mac;
        hdr.arp.opcode = ARP_OP_REPLY;
        hdr.arp.target_hw_addr = hdr.arp.sender_hw_addr;
        hdr.arp.target_proto_addr = hdr.arp.sender_proto_addr;
        hdr.arp.sender_hw_addr = mac;
        hdr.arp.sender_proto_addr = asked;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
        standard_metadata.priority = PRIORITY_RESERVATION;
    }

    table arp_replies {
        key = {
            hdr.arp.target_proto_addr : exact @name("target_ip");
        }
        actions = {
            answer_arp;
            @defaultonly drop_packet;
        }
        const default_action = drop_packet(DROP_ARP_UNANSWERED);
        size = MAX_ARP_ANSWERS;
    }

    // ---- IPv4 routing: longest prefix match on the destination.
    action route(port_t port, mac_addr_t next_hop_mac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dst_addr = next_hop_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        meta.routed = 1;
    }

    table routes {
        key = {
            hdr.ipv4.dst_addr : lpm @name("dst_addr");
        }
        actions = {
            route;
            @defaultonly drop_packet;
        }
        const default_action = drop_packet(DROP_NO_ROUTE);
        size = MAX_ROUTES;
    }

    // ---- Where a channel's packets may come from. A channel's entry at a switch names the
    // port its admitted path enters by: the host side at its first switch, the trunk from the
    // hop before at the others (recovery, at a protected channel's last). A packet of the
    // channel that arrives any other way is not the channel's traffic there: the best-effort
    // copies a restoration's route change sent back round a ring to the channel's first
    // switch, re-admitted there, took its policer's tokens from the conforming packets.
    action from_trunk() {
        meta.channel_in = (bit<10>)standard_metadata.ingress_port;
    }

    table trunk_ports {
        key = {
            standard_metadata.ingress_port : exact @name("port");
        }
        actions = {
            from_trunk;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = MAX_PORTS;
    }

    // ---- Admitted channels: exact match on the channel's selector (docs/protocol.md) and
    // where the packet came from.
    action admit(bit<16> channel_id, bit<3> priority, bit<1> on_yellow, bit<1> on_red) {
        channel_meter.read(meta.color);
        meta.channel_id = channel_id;
        meta.channel_priority = priority;
        meta.on_yellow = on_yellow;
        meta.on_red = on_red;
    }

    // A jumping window of window_us microseconds lets `limit` bytes (or packets, with
    // count_packets) through per window (seed 000 Figure 4). Windows follow one another while
    // the channel is busy, start + T, start + 2T, ... as XTP's periodic credit reset did; after
    // two windows (and the tolerance) without a packet, the next window starts at the next
    // packet. A packet above smax frame bytes is excess, as in the moving window: counting
    // packets, the window's bound in bytes rests on it, and the static-priority delay bound
    // counts every channel's largest packet.
    //
    // tolerance_us is how much later than its arrival the switch may have stamped a packet
    // (the switch's jitter; docs/dataplane.md "Tolerance"): a packet stamped within it after
    // a boundary may still count in the window before, and one stamped within it before a
    // boundary, its own window full, in the window after (which then becomes the current
    // one), each only while that window has room, the earlier first. A busy source that keeps
    // B per window then passes whole whatever its packets' lags, and whatever passes keeps the
    // window's envelope over t + 2 × tolerance_us. The whole read-modify-write is one action,
    // so it is atomic against the channel's other packets (BMv2 and terrapin-switch lock the
    // registers an action uses for the whole action). window_us = 0 lets nothing through: a
    // broken configuration fails closed.
    action admit_jumping_window(bit<16> channel_id, bit<3> priority, bit<1> on_excess,
                                bit<32> window_us, bit<32> limit, bit<1> count_packets,
                                bit<16> smax, bit<32> tolerance_us, bit<32> tag) {
        meta.channel_id = channel_id;
        meta.channel_priority = priority;
        meta.on_yellow = on_excess;
        meta.on_red = on_excess;
        bit<32> cell = (bit<32>)channel_id;
        bit<48> now = standard_metadata.ingress_global_timestamp;
        bit<32> owner;
        bit<48> start;
        bit<32> used;
        bit<32> before;
        bit<48> last;
        jumping_tag.read(owner, cell);
        jumping_start.read(start, cell);
        jumping_used.read(used, cell);
        jumping_used_before.read(before, cell);
        jumping_last.read(last, cell);
        bit<48> window = (bit<48>)window_us;
        bit<48> tolerance = (bit<48>)tolerance_us;
        if (owner != tag || (now > last && now - last >= window + window + tolerance)) {
            // A fresh channel, or one idle for two windows: its window opens now, with no
            // window before it to count in.
            start = now;
            used = 0;
            before = limit;
        }
        // Busy, the next packet is less than two windows (and the tolerance) after the last,
        // which is less than a window after the current window's start: at most three
        // windows ahead. (A packet stamped before the window's start, after the window was
        // opened early for one within the tolerance of it, or taken slightly out of order by a
        // port's thread, belongs to the current window.)
        // one window on
        if (now > start && now - start >= window) {
            start = start + window;
            before = used;
            used = 0;
        }
        // two windows on
        if (now > start && now - start >= window) {
            start = start + window;
            before = used;
            used = 0;
        }
        // three windows on
        if (now > start && now - start >= window) {
            start = start + window;
            before = used;
            used = 0;
        }
        bit<48> elapsed = 0;
        if (now > start) {
            elapsed = now - start;
        }
        bit<32> amount = standard_metadata.packet_length;
        if (count_packets == WINDOW_COUNTS_PACKETS) {
            amount = 1;
        }
        meta.color = METER_RED;
        // room: amount <= limit - counted, not counted + amount <= limit (the sum could wrap).
        if (window_us != 0 && standard_metadata.packet_length <= (bit<32>)smax) {
            if (elapsed < tolerance && before <= limit && amount <= limit - before) {
                before = before + amount;
                meta.color = METER_GREEN;
            } else if (used <= limit && amount <= limit - used) {
                used = used + amount;
                meta.color = METER_GREEN;
            } else if (elapsed + tolerance >= window && amount <= limit) {
                start = start + window;
                before = used;
                used = amount;
                meta.color = METER_GREEN;
            }
        }
        if (now > last || owner != tag) {
            last = now;
        }
        jumping_tag.write(cell, tag);
        jumping_start.write(cell, start);
        jumping_used.write(cell, used);
        jumping_used_before.write(cell, before);
        jumping_last.write(cell, last);
    }

    // The Tenet (Xmin, Xave, I, Smax) moving window (seeds 001, 004; seed 000 Figure 5): no
    // packet above smax frame bytes, none closer than xmin_us to the previous one, and at
    // most n = (last_slot + 1) * quantum packets in any interval_us (plus quantum - 1, see
    // docs/dataplane.md). The ring remembers, per group of `quantum` consecutive packets,
    // when the group's first packet leaves the window; a group may start only once the slot
    // it reuses (the group last_slot + 1 groups back) has left. With quantum = 1 that is the
    // ideal moving window: a packet passes iff the n-th packet before it is I or more ago.
    //
    // tolerance_us is how much later than its arrival the switch may have stamped a packet
    // (docs/dataplane.md "Tolerance"). As in ATM's GCRA, a packet passes if it is at most
    // that early for the envelope, and the state advances from its virtual time, the
    // earliest time at or after its stamp at which it keeps the envelope exactly: never from
    // the stamp alone, so that early packets cannot add up into a faster rate. Whatever
    // passes keeps the envelope by its virtual times, each at most tolerance_us after its
    // stamp: it keeps the envelope over t + tolerance_us. With tolerance 0 the virtual time
    // is the stamp. interval_us = 0 or quantum = 0 lets nothing through (fails closed).
    action admit_moving_window(bit<16> channel_id, bit<3> priority, bit<1> on_excess,
                               bit<32> xmin_us, bit<32> interval_us, bit<5> last_slot,
                               bit<16> quantum, bit<16> smax, bit<32> tolerance_us,
                               bit<32> tag) {
        meta.channel_id = channel_id;
        meta.channel_priority = priority;
        meta.on_yellow = on_excess;
        meta.on_red = on_excess;
        bit<32> cell = (bit<32>)channel_id;
        bit<48> now = standard_metadata.ingress_global_timestamp;
        bit<48> latest = now + (bit<48>)tolerance_us;
        bit<32> owner;
        bit<48> next;
        bit<5> head;
        bit<16> fill;
        moving_tag.read(owner, cell);
        moving_next.read(next, cell);
        moving_head.read(head, cell);
        moving_fill.read(fill, cell);
        if (owner != tag) {
            next = 0;
            head = 0;
            fill = 0;
        }
        bit<32> slot = cell * MOVING_SLOTS + (bit<32>)head;
        bit<32> slot_owner;
        bit<48> free_at;
        moving_ring_tag.read(slot_owner, slot);
        moving_ring.read(free_at, slot);
        if (slot_owner != tag || fill != 0) {
            free_at = 0;
        }
        if (interval_us == 0 || quantum == 0
                || standard_metadata.packet_length > (bit<32>)smax
                || latest < next || latest < free_at) {
            meta.color = METER_RED;
        } else {
            meta.color = METER_GREEN;
            bit<48> virtual = now;
            if (next > virtual) {
                virtual = next;
            }
            if (free_at > virtual) {
                virtual = free_at;
            }
            next = virtual + (bit<48>)xmin_us;
            if (fill == 0) {
                moving_ring_tag.write(slot, tag);
                moving_ring.write(slot, virtual + (bit<48>)interval_us);
            }
            fill = fill + 1;
            if (fill >= quantum) {
                fill = 0;
                if (head >= last_slot) {
                    head = 0;
                } else {
                    head = head + 1;
                }
            }
        }
        moving_tag.write(cell, tag);
        moving_next.write(cell, next);
        moving_head.write(cell, head);
        moving_fill.write(cell, fill);
    }

    table channels {
        key = {
            hdr.ipv4.src_addr : exact @name("src_addr");
            hdr.ipv4.dst_addr : exact @name("dst_addr");
            hdr.ipv4.protocol : exact @name("protocol");
            meta.flow_key : exact @name("flow_key");
            meta.channel_in : exact @name("in_port");
        }
        actions = {
            admit;
            admit_jumping_window;
            admit_moving_window;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        counters = channel_counter;
        meters = channel_meter;
        size = MAX_CHANNELS;
    }

    // ---- Pinned channels: a channel follows its destination's route unless the controller
    // pinned it to another port at this hop (a restoration moved it off a dead trunk and kept
    // it on its new path when the route came back; docs/controller.md, "Trunks").
    action pin(port_t port, mac_addr_t next_hop_mac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dst_addr = next_hop_mac;
    }

    table channel_paths {
        key = {
            hdr.ipv4.src_addr : exact @name("src_addr");
            hdr.ipv4.dst_addr : exact @name("dst_addr");
            hdr.ipv4.protocol : exact @name("protocol");
            meta.flow_key : exact @name("flow_key");
        }
        actions = {
            pin;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = MAX_CHANNELS;
    }

    // ---- Protection (IEEE 802.1CB frame replication and elimination; docs/dataplane.md
    // "Protection"). A protected channel is admitted on two disjoint paths. Its first switch
    // numbers each frame the channel's policer passed, tags it (R-TAG) and sends a copy down each
    // path (multicast group; egress names each replica's member stream); transit switches
    // forward a copy by its member stream; the last switch keeps the first copy of each number
    // and removes the tag.

    // Per channel id, at its first switch: the next sequence number.
    register<bit<16>>(MAX_CHANNELS) frer_next_seq;

    action replicate(bit<16> group) {
        bit<32> cell = (bit<32>)meta.channel_id;
        bit<16> seq;
        frer_next_seq.read(seq, cell);
        frer_next_seq.write(cell, seq + 1);
        hdr.rtag.setValid();
        hdr.rtag.member = 0;  // egress writes each replica's
        hdr.rtag.seq = seq;
        if (hdr.vlan.isValid()) {
            hdr.rtag.ether_type = hdr.vlan.ether_type;
            hdr.vlan.ether_type = ETHERTYPE_RTAG;
        } else {
            hdr.rtag.ether_type = hdr.ethernet.ether_type;
            hdr.ethernet.ether_type = ETHERTYPE_RTAG;
        }
        standard_metadata.mcast_grp = group;
    }

    table protections {
        key = {
            meta.channel_id : exact @name("channel_id");
        }
        actions = {
            replicate;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = MAX_CHANNELS;
    }

    // Per member-stream entry: the copies that arrived (the frames each path carried) and, at a
    // transit switch, the hop's policer (the channel's envelope at that hop, as `channels`).
    direct_counter(CounterType.packets_and_bytes) member_counter;
    direct_meter<bit<2>>(MeterType.bytes) member_meter;

    // Sequence recovery state per channel id at its last switch (802.1CB's vector recovery
    // algorithm): the highest number passed, a history bit per number below it (bit i: number
    // recov - i has passed), when a copy last passed, and the installation tag (state another
    // tag wrote is no state, as for the window policers).
    register<bit<32>>(MAX_CHANNELS) frer_tag;
    register<bit<16>>(MAX_CHANNELS) frer_recov;
    register<bit<64>>(MAX_CHANNELS) frer_history;
    register<bit<48>>(MAX_CHANNELS) frer_last_pass;
    // 802.1CB's recovery counters per channel id: copies passed, duplicates discarded, copies
    // passed out of order, copies outside the history window (rogue: discarded), and resets
    // (silence for reset_us, or a new installation, after which the next number is taken as is).
    counter(MAX_CHANNELS, CounterType.packets_and_bytes) frer_passed;
    counter(MAX_CHANNELS, CounterType.packets_and_bytes) frer_discarded;
    counter(MAX_CHANNELS, CounterType.packets_and_bytes) frer_out_of_order;
    counter(MAX_CHANNELS, CounterType.packets_and_bytes) frer_rogue;
    counter(MAX_CHANNELS, CounterType.packets) frer_resets;
    // And the numbers that left the history window without any copy having passed: lost on
    // both paths. A register, because a counter cannot add more than one at a time.
    register<bit<32>>(MAX_CHANNELS) frer_lost;

    // A copy at a transit switch: on along its path, policed like the channel's hop.
    action relay_copy(port_t port, mac_addr_t next_hop_mac, bit<16> channel_id, bit<3> priority,
                      bit<1> on_yellow, bit<1> on_red) {
        member_meter.read(meta.color);
        standard_metadata.egress_spec = port;
        hdr.ethernet.dst_addr = next_hop_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        meta.routed = 1;
        meta.channel_id = channel_id;
        meta.channel_priority = priority;
        meta.on_yellow = on_yellow;
        meta.on_red = on_red;
    }

    // A copy at the channel's last switch: 802.1CB's vector recovery algorithm over a history
    // of history_length numbers (1..FRER_HISTORY_MAX). With d = seq - recov (modulo 2^16, as a
    // signed number): d > 0 is a new number (the history shifts by d; numbers shifted out that
    // never passed are lost; d > 1 is out of order), d <= 0 an older one, passed only if its
    // history bit is clear (else a duplicate); |d| >= history_length is rogue. reset_us of no
    // passing copy, or a new tag, and the next copy is taken whatever its number, with every
    // number before it counted as seen. One action, so atomic against the channel's other
    // copies. history_length 0 passes nothing (fails closed).
    action recover_copy(bit<16> channel_id, bit<8> history_length, bit<32> reset_us, bit<32> tag) {
        bit<32> cell = (bit<32>)channel_id;
        bit<48> now = standard_metadata.ingress_global_timestamp;
        bit<32> owner;
        bit<16> recov;
        bit<64> history;
        bit<48> last;
        bit<32> lost;
        frer_tag.read(owner, cell);
        frer_recov.read(recov, cell);
        frer_history.read(history, cell);
        frer_last_pass.read(last, cell);
        frer_lost.read(lost, cell);
        bit<64> window = 0xFFFFFFFFFFFFFFFF;
        if (history_length < 64) {
            window = ((bit<64>)1 << history_length) - 1;
        }
        bit<16> seq = hdr.rtag.seq;
        bit<16> ahead = seq - recov;
        bit<16> behind = recov - seq;
        bit<16> length = (bit<16>)history_length;
        meta.keep_copy = 0;
        if (history_length == 0) {
            frer_rogue.count(cell);
        } else if (owner != tag || (now > last && now - last >= (bit<48>)reset_us)) {
            frer_resets.count(cell);
            if (owner != tag) {
                lost = 0;  // a new installation's count starts from nothing
            }
            recov = seq;
            history = window;
            meta.keep_copy = 1;
        } else if (ahead != 0 && ahead < 0x8000) {
            if (ahead >= length) {
                frer_rogue.count(cell);
            } else {
                // The numbers shifted out of the window: those whose bit is clear are lost.
                bit<64> leaving = (history & window) >> (bit<8>)(length - ahead);
                leaving = leaving - ((leaving >> 1) & 0x5555555555555555);
                leaving = (leaving & 0x3333333333333333) + ((leaving >> 2) & 0x3333333333333333);
                leaving = (leaving + (leaving >> 4)) & 0x0F0F0F0F0F0F0F0F;
                leaving = leaving + (leaving >> 8);
                leaving = leaving + (leaving >> 16);
                leaving = leaving + (leaving >> 32);
                lost = lost + (bit<32>)ahead - (bit<32>)(leaving & 0x7F);
                history = ((history << (bit<8>)ahead) | 1) & window;
                if (ahead != 1) {
                    frer_out_of_order.count(cell);
                }
                recov = seq;
                meta.keep_copy = 1;
            }
        } else if (behind >= length) {
            frer_rogue.count(cell);
        } else if (((history >> (bit<8>)behind) & 1) == 1) {
            frer_discarded.count(cell);
        } else {
            history = history | ((bit<64>)1 << (bit<8>)behind);
            frer_out_of_order.count(cell);
            meta.keep_copy = 1;
        }
        if (meta.keep_copy == 1) {
            frer_passed.count(cell);
            last = now;
        }
        frer_tag.write(cell, tag);
        frer_recov.write(cell, recov);
        frer_history.write(cell, history);
        frer_last_pass.write(cell, last);
        frer_lost.write(cell, lost);
    }

    table member_streams {
        key = {
            hdr.rtag.member : exact @name("member");
        }
        actions = {
            relay_copy;
            recover_copy;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        counters = member_counter;
        meters = member_meter;
        size = MAX_MEMBER_STREAMS;
    }

    // ---- Aggregates: the few unadmitted traffic aggregates the controller lifts out of best
    // effort (for example network control), each policed by its aggregate meter. The controller
    // reserves each one's envelope at its level on every port (docs/controller.md).
    action set_aggregate(bit<8> aggregate_id, bit<3> priority) {
        aggregate_meters.execute_meter((bit<32>)aggregate_id, meta.color);
        meta.aggregate_id = aggregate_id;
        meta.aggregate_priority = priority;
    }

    table aggregates {
        key = {
            hdr.ipv4.dscp : ternary @name("dscp");
            hdr.ipv4.protocol : ternary @name("protocol");
            meta.l4_dst_port : ternary @name("l4_dst_port");
        }
        actions = {
            set_aggregate;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        counters = aggregate_counter;
        size = MAX_AGGREGATES;
    }

    apply {
        // The packet goes on to routing (untagged, or its tag just removed by recovery).
        bool routed = false;
        // A channel's or a copy's policer gave meta.color.
        bool policed = false;
        meta.channel_in = CHANNEL_IN_HOST;
        trunk_ports.apply();
        if (standard_metadata.parser_error != error.NoError) {
            drop_packet(DROP_MALFORMED);
        } else if (standard_metadata.checksum_error == 1) {
            drop_packet(DROP_BAD_CHECKSUM);
        } else if (hdr.packet_out.isValid()
                   && hdr.packet_out.through_pipeline == PACKET_OUT_DIRECT) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            standard_metadata.priority = PRIORITY_RESERVATION;
        } else if (hdr.arp.isValid()) {
            if (hdr.arp.opcode == ARP_OP_REQUEST) {
                arp_replies.apply();
            } else {
                drop_packet(DROP_UNSUPPORTED);
            }
        } else if (hdr.ethernet.ether_type == ETHERTYPE_LINK_PROBE) {
            // A link probe from the switch at the other end of this port's trunk: the
            // controller learns the trunk carries traffic (docs/controller.md, "Trunks").
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
            standard_metadata.egress_spec = CPU_PORT;
            standard_metadata.priority = PRIORITY_RESERVATION;
        } else if (!hdr.ipv4.isValid()) {
            drop_packet(DROP_UNSUPPORTED);
        } else if (hdr.reservation.isValid() && !hdr.packet_out.isValid()) {
            // A reservation message from a host or a neighbour router: the controller runs
            // the admission test and re-injects or answers it (PacketOut).
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = standard_metadata.ingress_port;
            hdr.packet_in._pad = 0;
            standard_metadata.egress_spec = CPU_PORT;
            standard_metadata.priority = PRIORITY_RESERVATION;
        } else if (hdr.ipv4.ttl <= 1) {
            // Forwarding would leave TTL 0 (RFC 1812 §5.3.1); no ICMP Time Exceeded is sent.
            drop_packet(DROP_TTL_EXPIRED);
        } else if (hdr.rtag.isValid()) {
            switch (member_streams.apply().action_run) {
                relay_copy: {
                    policed = true;
                }
                recover_copy: {
                    if (meta.keep_copy == 1) {
                        if (hdr.vlan.isValid()) {
                            hdr.vlan.ether_type = hdr.rtag.ether_type;
                        } else {
                            hdr.ethernet.ether_type = hdr.rtag.ether_type;
                        }
                        hdr.rtag.setInvalid();
                        meta.channel_in = CHANNEL_IN_RECOVERED;
                        routed = true;
                    } else {
                        drop_packet(DROP_ELIMINATED);
                    }
                }
                default: {
                    drop_packet(DROP_NO_MEMBER);
                }
            }
        } else {
            routed = true;
        }
        if (routed && routes.apply().hit) {
            if (hdr.reservation.isValid()) {
                // Re-injected by the controller (PacketOut through the pipeline).
                standard_metadata.priority = PRIORITY_RESERVATION;
            } else if (channels.apply().hit) {
                channel_paths.apply();
                policed = true;
            } else if (aggregates.apply().hit) {
                if (meta.color == METER_GREEN) {
                    standard_metadata.priority = meta.aggregate_priority;
                } else {
                    standard_metadata.priority = PRIORITY_BEST_EFFORT;
                    aggregate_excess.count((bit<32>)meta.aggregate_id);
                }
            } else {
                // Unadmitted: best effort whatever the packet claims (seed 000 §3.2: ordinary
                // traffic is served at the lowest level); the ignored claims are counted.
                standard_metadata.priority = PRIORITY_BEST_EFFORT;
                if (hdr.xtp.isValid() && hdr.xtp.sort != 0) {
                    demoted_claims.count(CLAIM_XTP_SORT);
                }
                if (hdr.ipv4.dscp != 0) {
                    demoted_claims.count(CLAIM_DSCP);
                }
            }
        }
        // An admitted channel's packet, or a protected channel's copy in transit: its policer's
        // colour decides its queue. Only what the policer passed is protected (replicated at the
        // channel's first switch: the one switch with a `protections` entry for it).
        if (policed) {
            if (meta.color == METER_GREEN) {
                standard_metadata.priority = meta.channel_priority;
                if (!hdr.rtag.isValid()) {
                    protections.apply();
                }
            } else if (meta.color == METER_YELLOW) {
                channel_yellow.count((bit<32>)meta.channel_id);
                if (meta.on_yellow == EXCESS_DROP) {
                    drop_packet(DROP_POLICED);
                } else {
                    standard_metadata.priority = PRIORITY_BEST_EFFORT;
                }
            } else {
                channel_red.count((bit<32>)meta.channel_id);
                if (meta.on_red == EXCESS_DROP) {
                    drop_packet(DROP_POLICED);
                } else {
                    standard_metadata.priority = PRIORITY_BEST_EFFORT;
                }
            }
        }
        hdr.packet_out.setInvalid();
    }
}

#endif  // TERRAPIN_INGRESS_P4
