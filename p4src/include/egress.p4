// Egress: a protected channel's replicas named, per-(port, queue) telemetry from v1model's queueing metadata, each admitted queue's
// wait against its admitted bound, and the source MAC of the port a routed packet leaves by.

#ifndef TERRAPIN_EGRESS_P4
#define TERRAPIN_EGRESS_P4

control TerrapinEgress(inout headers_t hdr,
                       inout metadata_t meta,
                       inout standard_metadata_t standard_metadata) {

    // Cell port * QUEUES_PER_PORT + priority: packets and bytes that left by that queue.
    counter(QUEUE_CELLS, CounterType.packets_and_bytes) queue_traffic;
    // Same cells: the deepest backlog a packet of the queue found on its port (packets,
    // enq_qdepth, which v1model/BMv2 count over all the port's queues) and the longest a
    // packet waited in the queue (microseconds, deq_timedelta).
    register<bit<32>>(QUEUE_CELLS) max_queue_depth;
    register<bit<32>>(QUEUE_CELLS) max_queue_delay;
    // Cell * DELAY_BANDS + band: packets of an admitted queue by how long they waited against
    // the queue's admitted bound. Counters, not registers, because p4lang's P4Runtime server
    // (PI, under simple_switch_grpc) reads and writes no registers at all: this is the delay
    // figure the controller's guarantee monitor can read from either switch.
    counter(DELAY_BAND_CELLS, CounterType.packets_and_bytes) queue_delay_bands;

    bit<32> quarter_bound_us = 0;
    bit<32> half_bound_us = 0;
    bit<32> bound_us = 0;

    action set_source_mac(mac_addr_t mac) {
        hdr.ethernet.src_addr = mac;
    }

    table port_macs {
        key = {
            standard_metadata.egress_port : exact @name("port");
        }
        actions = {
            set_source_mac;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = MAX_PORTS;
    }

    // The thresholds come from the controller because the data plane cannot divide: it sends
    // the bound and its quarter and half, and keeps them current as channels come and go.
    action set_delay_bound(bit<32> quarter_us, bit<32> half_us, bit<32> limit_us) {
        quarter_bound_us = quarter_us;
        half_bound_us = half_us;
        bound_us = limit_us;
    }

    table queue_bounds {
        key = {
            standard_metadata.egress_port : exact @name("port");
            standard_metadata.priority    : exact @name("priority");
        }
        actions = {
            set_delay_bound;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = QUEUE_CELLS;
    }

    // A protected channel's replica at its first switch (docs/dataplane.md "Protection"): the
    // replica's egress_rid is its member stream, written into its R-TAG; the next hop is that
    // path's. A replica with no entry is dropped: untagged by member, no switch could forward it.
    action send_copy(mac_addr_t next_hop_mac) {
        hdr.rtag.member = standard_metadata.egress_rid;
        hdr.ethernet.dst_addr = next_hop_mac;
    }

    action drop_copy() {
        mark_to_drop(standard_metadata);
    }

    table copies {
        key = {
            standard_metadata.egress_rid : exact @name("member");
        }
        actions = {
            send_copy;
            @defaultonly drop_copy;
        }
        const default_action = drop_copy();
        size = MAX_MEMBER_STREAMS;
    }

    apply {
        if (hdr.rtag.isValid() && hdr.rtag.member == 0) {
            copies.apply();
        }
        bit<32> cell = (bit<32>)standard_metadata.egress_port * QUEUES_PER_PORT
                       + (bit<32>)standard_metadata.priority;
        queue_traffic.count(cell);

        bit<32> deepest;
        max_queue_depth.read(deepest, cell);
        if ((bit<32>)standard_metadata.enq_qdepth > deepest) {
            max_queue_depth.write(cell, (bit<32>)standard_metadata.enq_qdepth);
        }
        bit<32> slowest;
        max_queue_delay.read(slowest, cell);
        if (standard_metadata.deq_timedelta > slowest) {
            max_queue_delay.write(cell, standard_metadata.deq_timedelta);
        }

        if (queue_bounds.apply().hit) {
            bit<32> band = DELAY_BAND_OVER;
            if (standard_metadata.deq_timedelta <= quarter_bound_us) {
                band = DELAY_BAND_QUARTER;
            } else if (standard_metadata.deq_timedelta <= half_bound_us) {
                band = DELAY_BAND_HALF;
            } else if (standard_metadata.deq_timedelta <= bound_us) {
                band = DELAY_BAND_WITHIN;
            }
            queue_delay_bands.count(cell * DELAY_BANDS + band);
        }

        if (meta.routed == 1) {
            port_macs.apply();
        }
    }
}

#endif  // TERRAPIN_EGRESS_P4
