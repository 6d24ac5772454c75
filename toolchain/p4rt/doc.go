// Package p4rt is terrapin-switch's P4Runtime server (spec v1.4, official
// Go protos): a thin translation of P4Runtime requests, validated against
// the P4Info, onto the control API of the engine pipeline that a Target
// (the device) runs. It serves Capabilities, Set/GetForwardingPipelineConfig,
// Write, Read and StreamChannel (arbitration, PacketIn/PacketOut, digests),
// and reports errors with the codes the spec assigns. docs/p4runtime.md
// lists what is supported and where it departs from simple_switch_grpc.
package p4rt
