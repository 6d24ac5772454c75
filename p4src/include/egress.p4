// Egress: per-(port, queue) telemetry from v1model's queueing metadata, and the source MAC
// of the port a routed packet leaves by.

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

    apply {
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

        if (meta.routed == 1) {
            port_macs.apply();
        }
    }
}

#endif  // TERRAPIN_EGRESS_P4
