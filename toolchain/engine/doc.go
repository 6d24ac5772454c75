// Package engine runs BMv2 JSON programs (p4c's and terrapin-p4c's output,
// docs/JSON_format.md v2.x) with v1model semantics as p4lang's
// simple_switch implements them.
//
// Load compiles the JSON once: header fields become indices into a flat
// packet header vector, expressions and actions become Go closures, tables
// get lookup structures fitted to their key. Processing a packet walks no
// JSON and, once the packet-context pool is warm, allocates nothing.
//
// The packet path is split at the traffic manager (Ingress, Egress) so that
// a device can queue jobs between the two; ProcessPacket runs both back to
// back. control.go is the control API used by the P4Runtime server and the
// STF runner.
package engine
