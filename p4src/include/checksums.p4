// IPv4 header checksum (RFC 791), options included: verified before ingress (a bad one
// sets standard_metadata.checksum_error, which ingress drops) and recomputed after egress,
// since routing decrements the TTL. Transport checksums do not cover the TTL and are left
// alone.

#ifndef TERRAPIN_CHECKSUMS_P4
#define TERRAPIN_CHECKSUMS_P4

control TerrapinVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version,
              hdr.ipv4.ihl,
              hdr.ipv4.dscp,
              hdr.ipv4.ecn,
              hdr.ipv4.total_len,
              hdr.ipv4.identification,
              hdr.ipv4.flags,
              hdr.ipv4.frag_offset,
              hdr.ipv4.ttl,
              hdr.ipv4.protocol,
              hdr.ipv4.src_addr,
              hdr.ipv4.dst_addr,
              hdr.ipv4_options.data },
            hdr.ipv4.hdr_checksum,
            HashAlgorithm.csum16);
    }
}

control TerrapinComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version,
              hdr.ipv4.ihl,
              hdr.ipv4.dscp,
              hdr.ipv4.ecn,
              hdr.ipv4.total_len,
              hdr.ipv4.identification,
              hdr.ipv4.flags,
              hdr.ipv4.frag_offset,
              hdr.ipv4.ttl,
              hdr.ipv4.protocol,
              hdr.ipv4.src_addr,
              hdr.ipv4.dst_addr,
              hdr.ipv4_options.data },
            hdr.ipv4.hdr_checksum,
            HashAlgorithm.csum16);
    }
}

#endif  // TERRAPIN_CHECKSUMS_P4
