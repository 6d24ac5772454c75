// Parser: Ethernet [802.1Q] [R-TAG] then ARP or IPv4 [options], then XTP | TCP | UDP | ICMP
// [reservation message]. Every malformation ends in a parser error, which ingress turns
// into a counted drop: v1model does not drop on parser errors by itself.

#ifndef TERRAPIN_PARSER_P4
#define TERRAPIN_PARSER_P4

parser TerrapinParser(packet_in packet,
                      out headers_t hdr,
                      inout metadata_t meta,
                      inout standard_metadata_t standard_metadata) {
    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        packet.extract(hdr.packet_out);
        meta.l3_offset = 2;
        transition parse_ethernet;
    }

    state parse_ethernet {
        packet.extract(hdr.ethernet);
        meta.l3_offset = meta.l3_offset + 14;
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_VLAN: parse_vlan;
            ETHERTYPE_RTAG: parse_rtag;
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_ARP: parse_arp;
            default: accept;
        }
    }

    state parse_vlan {
        packet.extract(hdr.vlan);
        meta.l3_offset = meta.l3_offset + 4;
        transition select(hdr.vlan.ether_type) {
            ETHERTYPE_RTAG: parse_rtag;
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_ARP: parse_arp;
            default: accept;
        }
    }

    // Only IPv4 is protected: a tag over anything else is not a frame of ours.
    state parse_rtag {
        packet.extract(hdr.rtag);
        meta.l3_offset = meta.l3_offset + 6;
        transition select(hdr.rtag.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            default: accept;
        }
    }

    state parse_arp {
        packet.extract(hdr.arp);
        verify(hdr.arp.hw_type == ARP_HW_ETHERNET && hdr.arp.proto_type == ETHERTYPE_IPV4
               && hdr.arp.hw_addr_len == 6 && hdr.arp.proto_addr_len == 4,
               error.ArpNotEthernetIpv4);
        transition accept;
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4, error.Ipv4BadVersion);
        verify(hdr.ipv4.ihl >= 5, error.Ipv4BadHeaderLength);
        // A header longer than the datagram, or a datagram longer than the frame that
        // carried it, is a truncated or forged packet (RFC 1812 §5.2.2).
        verify(hdr.ipv4.total_len >= ((bit<16>)hdr.ipv4.ihl) * 4
               && (bit<32>)hdr.ipv4.total_len + meta.l3_offset <= standard_metadata.packet_length,
               error.Ipv4BadTotalLength);
        packet.extract(hdr.ipv4_options, ((bit<32>)hdr.ipv4.ihl - 5) * 32);
        // Only the first fragment carries the transport header.
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, IP_PROTO_XTP): parse_xtp;
            (0, IP_PROTO_TCP): parse_tcp;
            (0, IP_PROTO_UDP): parse_udp;
            (0, IP_PROTO_ICMP): parse_icmp;
            default: accept;
        }
    }

    state parse_xtp {
        packet.extract(hdr.xtp);
        meta.flow_key = hdr.xtp.key;
        transition accept;
    }

    state parse_tcp {
        packet.extract(hdr.tcp);
        meta.flow_key = (bit<64>)(hdr.tcp.src_port ++ hdr.tcp.dst_port);
        meta.l4_dst_port = hdr.tcp.dst_port;
        transition accept;
    }

    state parse_udp {
        packet.extract(hdr.udp);
        meta.flow_key = (bit<64>)(hdr.udp.src_port ++ hdr.udp.dst_port);
        meta.l4_dst_port = hdr.udp.dst_port;
        transition accept;
    }

    state parse_icmp {
        packet.extract(hdr.icmp);
        transition select(hdr.icmp.type) {
            ICMP_TYPE_RESERVATION: parse_reservation;
            default: accept;
        }
    }

    state parse_reservation {
        packet.extract(hdr.reservation);
        verify(hdr.reservation.version == RESERVATION_VERSION, error.ReservationBadVersion);
        verify(hdr.icmp.code >= RESV_REQUEST_ADMIT && hdr.icmp.code <= RESV_RECVD_CLOSE,
               error.ReservationBadCode);
        transition accept;
    }
}

#endif  // TERRAPIN_PARSER_P4
