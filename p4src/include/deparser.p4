// Deparser: headers go back in wire order. packet_out never leaves (ingress invalidates
// it); packet_in is valid only on packets sent to the CPU port.

#ifndef TERRAPIN_DEPARSER_P4
#define TERRAPIN_DEPARSER_P4

control TerrapinDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.vlan);
        packet.emit(hdr.rtag);
        packet.emit(hdr.arp);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.ipv4_options);
        packet.emit(hdr.xtp);
        packet.emit(hdr.tcp);
        packet.emit(hdr.udp);
        packet.emit(hdr.icmp);
        packet.emit(hdr.reservation);
    }
}

#endif  // TERRAPIN_DEPARSER_P4
