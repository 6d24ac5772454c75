// Terrapin: a guaranteed-service IPv4 router for the v1model architecture.
//
// After the XTP-aware router of seed 000 (Christie 1995, ch. 3 and §4.1): packets are
// routed by IPv4 longest prefix match; admitted channels are matched exactly, policed by a
// per-channel meter and served from their strict-priority queue; everything else, whatever
// its XTP SORT or DSCP claims, is best effort; reservation protocol messages (ICMP type
// 253) go to the controller. docs/dataplane.md describes the whole program.

#include <core.p4>
#include <v1model.p4>

#include "include/constants.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/checksums.p4"
#include "include/ingress.p4"
#include "include/egress.p4"
#include "include/deparser.p4"

V1Switch(TerrapinParser(),
         TerrapinVerifyChecksum(),
         TerrapinIngress(),
         TerrapinEgress(),
         TerrapinComputeChecksum(),
         TerrapinDeparser()) main;
